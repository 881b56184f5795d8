"""Build what a batch of benchmark runs needs on an offline GPU machine, and print the command that runs it.

Usage (from the repository root, in the environment where tsrec's tests pass)::

    python -m benchmarks.gpu_bundle benchmarks/configs/paper_table_d512.toml benchmarks/configs/long_horizon.toml \\
        --data-dir ../shared/datasets [--dataset ETTh1] [--out .bundle] [--find-links DIR]

The machine: x86-64 Linux, Python 3.12 with a CUDA build of torch, lightning, numpy, pandas,
scikit-learn, scipy, matplotlib, toolz, tqdm and typing-extensions; no package index, no GluonTS
(which tsrec imports for calendar features and distributions) and no benchmark CSVs. The bundle
(``.bundle/``, git-ignored) holds

- ``wheels/``: the packages of :data:`CARRIED` for CPython 3.12 on manylinux x86-64 (or pure
  Python), each at the version installed here, where tsrec's tests pass with them; fetched from
  PyPI, or with ``--find-links DIR`` from that folder alone, without network;
- ``data/``: exactly the CSVs of the selected runs' datasets, checked against the registry's sha256;
- ``requirements.txt``: the pins; ``commit``: this checkout's commit, which the rows written there
  record (the working tree that reaches the machine has no git history).

Only the working tree and the folders named to travel with it reach the machine, at most 64 MiB
together: the build refuses a bundle that does not fit beside the working tree. There,
``bash benchmarks/gpu_batch.sh BUNDLE CONFIG...`` installs the wheels offline and runs
``python -m benchmarks.run`` on the bundle's data (the command printed at the end).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import ROOT, git_commit
from benchmarks.run import add_selection_arguments, load_config, selected_runs

if TYPE_CHECKING:
    from tsrec.datasets import DatasetInfo

#: What tsrec needs on the GPU machine beyond what is installed there: GluonTS, the pydantic it
#: needs (with pydantic-core, annotated-types and typing-inspection), and typing-extensions, which
#: is there but possibly older than the 4.16 that this pydantic-core requires; and the pandas and NumPy
#: that tsrec's tests pass with here (the image's may be a pandas 3, which GluonTS does not take, with a
#: NumPy no machine here has run), with the pytz and tzdata this pandas needs and the image lacks.
CARRIED = ("gluonts", "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions",
           "numpy", "pandas", "pytz", "tzdata")
#: The Python packages of the GPU machines' image ('cuda'), as the device tool's KINDS.md listed them on
#: 2026-11-17: a rehearsal here (``benchmarks.gpu_all --rehearse``, tests/test_gpu_all.py) imports from
#: these alone, beside the bundle's wheels.
IMAGE_PACKAGES = (
    "absl-py", "accelerate", "aiofiles", "aiohappyeyeballs", "aiohttp", "aiosignal", "annotated-doc", "anyio",
    "attrs", "botorch", "build", "certifi", "charset-normalizer", "chex", "click", "cloudpickle", "cmake",
    "colorama", "contourpy", "coverage", "cuda-bindings", "cuda-core", "cuda-pathfinder", "cuda-toolkit",
    "cupy-cuda13x", "cycler", "cython", "diffrax", "e3nn", "einops", "equinox", "etils", "execnet", "filelock",
    "flatbuffers", "flax", "fonttools", "formulaic", "frozenlist", "fsspec", "gpytorch", "grpcio", "h11", "h5py",
    "hf-xet", "httpcore", "httpx", "huggingface-hub", "humanize", "hypothesis", "idna", "imageio", "iniconfig",
    "interface-meta", "jax", "jax-cuda13-pjrt", "jax-cuda13-plugin", "jaxlib", "jaxtyping", "jinja2", "joblib",
    "kiwisolver", "lazy-loader", "lightning", "lightning-utilities", "linear-operator", "lineax", "llvmlite",
    "lxml", "markdown", "markdown-it-py", "markupsafe", "matplotlib", "mdurl", "meson", "ml-dtypes", "mpi4py",
    "mpmath", "msgpack", "multidict", "multipledispatch", "mypy-extensions", "nanobind", "narwhals", "networkx",
    "ninja", "numba", "numba-cuda", "numpy", "numpyro", "nvidia-cublas", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc",
    "nvidia-cuda-runtime", "nvidia-cudnn-cu13", "nvidia-cufft", "nvidia-cufile", "nvidia-curand", "nvidia-cusolver",
    "nvidia-cusparse", "nvidia-cusparselt-cu13", "nvidia-ml-py", "nvidia-nccl-cu13", "nvidia-nvjitlink",
    "nvidia-nvshmem-cu13", "nvidia-nvtx", "onnx", "onnx-ir", "onnxruntime", "onnxscript", "opencv-python-headless",
    "optax", "opt-einsum", "opt-einsum-fx", "optimistix", "orbax-checkpoint", "packaging", "pandas", "pathspec",
    "patsy", "peft", "pillow", "pip", "pluggy", "portalocker", "prometheus-client", "propcache", "protobuf",
    "psutil", "pyarrow", "pybind11", "py-cpuinfo", "pygments", "pyparsing", "pyproject-hooks", "pyre-extensions",
    "pytest", "pytest-benchmark", "pytest-cov", "pytest-mock", "pytest-timeout", "pytest-xdist", "python-dateutil",
    "pytorch-lightning", "pyyaml", "regex", "requests", "rich", "sacrebleu", "safetensors", "scikit-build-core",
    "scikit-image", "scikit-learn", "scipy", "seaborn", "sentencepiece", "sentence-transformers", "setuptools",
    "shellingham", "simplejson", "six", "sortedcontainers", "statsmodels", "sympy", "tabulate", "tensorboard",
    "tensorboard-data-server", "tensorstore", "threadpoolctl", "tifffile", "tiktoken", "timm", "tokenizers",
    "toolz", "torch", "torchaudio", "torchdiffeq", "torch-geometric", "torchmetrics", "torchvision", "tqdm",
    "transformers", "treescope", "triton", "typer", "typing-extensions", "typing-inspect", "urllib3", "uvloop",
    "wadler-lindig", "werkzeug", "wheel", "wrapt", "xarray", "xxhash", "yarl", "zipp",
)
#: The Python of the GPU machine's image; ``--python-version`` builds a bundle for another (a rehearsal here).
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
#: What may travel to the GPU machine: the working tree and the bundle together, in MiB.
TRAVEL_LIMIT_MIB = 64.0
MIB = 2**20
DEFAULT_OUT = ROOT / ".bundle"


def pinned(names: tuple[str, ...] = CARRIED) -> list[str]:
    """``name==version`` for each of ``names``, at the version installed in this environment."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return [f"{name}=={version(name)}" for name in names]
    except PackageNotFoundError as err:
        raise SystemExit(f"gpu_bundle: {err.name} is not installed here; build the bundle in the environment "
                         "where tsrec's tests pass (pip install -e '.[dev]')") from None


def needed_datasets(configs: list[dict[str, Any]], args: argparse.Namespace) -> list[DatasetInfo]:
    """The registry entries of the datasets of the runs that ``args`` selects in ``configs``, in order."""
    from tsrec.datasets import get_info

    infos = (get_info(setting.dataset) for config in configs for setting in selected_runs(config, args))
    return list({info.name: info for info in infos}.values())


def copy_data(infos: list[DatasetInfo], data_dir: Path, dest: Path) -> None:
    """Copy each dataset's file from ``data_dir`` to ``dest``; refuse a missing file or one that is
    not the published file (another sha256)."""
    from tsrec.datasets import sha256_of

    missing = [info.filename for info in infos if not (data_dir / info.filename).is_file()]
    if missing:
        raise SystemExit(f"gpu_bundle: {data_dir} lacks {', '.join(missing)}, which the selected runs need; put "
                         f"them there (tsrec.datasets.download(NAME, DIR) fetches one) or pass --data-dir DIR")
    for info in infos:
        source = data_dir / info.filename
        digest = sha256_of(source)
        if digest != info.sha256:
            raise SystemExit(f"gpu_bundle: {source} is not the published {info.filename}: its sha256 is {digest}, "
                             f"the registry's {info.sha256}; replace it with the published file")
        shutil.copyfile(source, dest / info.filename)


def download_wheels(requirements: list[str], dest: Path, find_links: Path | None = None,
                    python_version: str = PYTHON_VERSION) -> None:
    """Fetch one wheel per requirement for CPython ``python_version`` on manylinux x86-64 (pure-Python
    ones match too) into ``dest``: from PyPI, or with ``find_links`` from that folder alone."""
    source = ["--no-index", "--find-links", str(find_links)] if find_links else []
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                           "--python-version", python_version, "--implementation", "cp", *platforms, *source,
                           "--dest", str(dest), *requirements], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        fix = (f"put those wheels in {find_links}" if find_links else
               "this needs PyPI; without network, pass --find-links DIR with those wheels")
        raise SystemExit(f"gpu_bundle: pip could not fetch {' '.join(requirements)} for CPython {python_version} "
                         f"on manylinux x86-64 from {find_links or 'PyPI'}; {fix}.\n{done.stderr.strip()}")


def image_site(dest: Path) -> list[str]:
    """A stand-in for the GPU machine's site-packages, for a rehearsal here: ``dest`` gets a link to every
    top-level module, package and metadata folder of each installed package of :data:`IMAGE_PACKAGES`
    (nothing else: no GluonTS, no tsrec). Run an interpreter with ``-S`` and ``PYTHONPATH=dest`` to import
    from these alone. Returns the image's packages not installed here (they cannot be rehearsed)."""
    from importlib.metadata import PackageNotFoundError, distribution

    dest.mkdir(parents=True, exist_ok=True)
    missing = []
    for name in IMAGE_PACKAGES:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            missing.append(name)
            continue
        tops = {Path(str(file)).parts[0] for file in dist.files or []}
        for top in tops - {"..", "__pycache__"}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (dest / top).exists():
                (dest / top).symlink_to(source)
    return missing


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def tree_bytes() -> int:
    """Bytes of the working tree that travels beside the bundle: tracked files and the untracked
    ones git does not ignore (0 outside a git checkout)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    paths = (ROOT / os.fsdecode(name) for name in listed.split(b"\0") if name)
    return sum(path.stat().st_size for path in paths if path.is_file())


def build(out: Path, infos: list[DatasetInfo], data_dir: Path, requirements: list[str], *,
          find_links: Path | None = None, limit_mib: float = TRAVEL_LIMIT_MIB,
          python_version: str = PYTHON_VERSION) -> int:
    """Build the bundle in ``out`` (replacing an earlier bundle there) with the files of the datasets
    ``infos`` from ``data_dir`` and the wheels of ``requirements``; return its size in bytes.

    Refuses (``SystemExit``) a missing or altered data file, wheels pip cannot fetch, and a bundle
    that exceeds ``limit_mib`` together with the working tree; a refused bundle is removed, and a
    folder that is not a bundle is left untouched."""
    if out.exists():
        if any(out.iterdir()) and not (out / "commit").is_file():
            raise SystemExit(f"gpu_bundle: {out} exists and is not a bundle (it has no commit file); "
                             "choose another --out")
        shutil.rmtree(out)
    (out / "data").mkdir(parents=True)
    (out / "wheels").mkdir()
    try:
        copy_data(infos, data_dir, out / "data")
        download_wheels(requirements, out / "wheels", find_links, python_version)
        (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
        (out / "commit").write_text(git_commit() + "\n")
        size, tree = folder_bytes(out), tree_bytes()
        if size + tree > limit_mib * MIB:
            raise SystemExit(f"gpu_bundle: the bundle ({size / MIB:.1f} MiB) and the working tree "
                             f"({tree / MIB:.1f} MiB) exceed the {limit_mib:g} MiB that reach the GPU machine; "
                             "select fewer datasets (--dataset) and run them as separate batches")
    except BaseException:
        shutil.rmtree(out)
        raise
    return size


def batch_command(out: Path, args: argparse.Namespace) -> str:
    """The command that runs the selected runs of ``args.configs`` on the GPU machine from the bundle ``out``."""
    def shown(path: Path) -> str:
        path = path.resolve()
        return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)

    selection = [arg for option in ("dataset", "horizon", "model") if getattr(args, option)
                 for arg in (f"--{option}", *map(str, getattr(args, option)))]
    return shlex.join(["bash", "benchmarks/gpu_batch.sh", shown(out), *map(shown, args.configs), *selection])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_bundle", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="+", type=Path, help="TOML configs of the batch")
    add_selection_arguments(parser)
    parser.add_argument("--data-dir", type=Path, required=True, help="directory with the dataset CSVs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the bundle folder (default .bundle)")
    parser.add_argument("--find-links", type=Path, metavar="DIR",
                        help="take the wheels from this folder instead of PyPI (no network)")
    parser.add_argument("--python-version", default=PYTHON_VERSION,
                        help="the CPython the wheels are for (default %(default)s, the GPU machine's; this "
                             "machine's for a rehearsal)")
    args = parser.parse_args(argv)
    infos = needed_datasets([load_config(path) for path in args.configs], args)
    if not infos:
        parser.error("--dataset/--horizon/--model select no run of these configs")
    requirements = pinned()
    size = build(args.out, infos, args.data_dir, requirements, find_links=args.find_links,
                 python_version=args.python_version)
    print(f"{args.out}: {size / MIB:.1f} MiB: wheels of {', '.join(requirements)}; data "
          f"{', '.join(info.filename for info in infos)}")
    print(f"On the GPU machine, with {args.out.name} travelling beside the working tree, from the repository root "
          "(add --out-dir DIR for a folder that comes back, and --jobs N, --precision bf16-mixed, --compile, "
          "--seeds ... as wanted):")
    print(batch_command(args.out, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
