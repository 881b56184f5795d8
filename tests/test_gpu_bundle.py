"""The GPU-machine bundle (benchmarks.gpu_bundle) and its batch script (benchmarks/gpu_batch.sh),
offline: wheels from a local folder (a throw-away wheel built here), data from a temporary folder."""

import csv
import os
import shutil
import subprocess
import sys
from importlib.metadata import distribution, version

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from benchmarks import gpu_bundle
from benchmarks.common import ROOT
from tsrec.datasets import get_info
from tests.shared_data import SHARED_DATASETS

DATA = SHARED_DATASETS
needs_etth1 = pytest.mark.shared_datasets("ETTh1.csv")
#: Python packages of the GPU machine's image that GluonTS's needs could name (issue #15).
GPU_IMAGE = {"torch", "lightning", "pytorch-lightning", "numpy", "pandas", "scikit-learn", "scipy", "matplotlib",
             "toolz", "tqdm", "typing-extensions", "pyyaml", "python-dateutil", "pytz", "tzdata", "six", "packaging"}
#: Markers of the GPU machine, to read which requirements apply there.
GPU_MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
               "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """A folder with one throw-away wheel, tinypkg 0.1 (built offline)."""
    src = tmp_path_factory.mktemp("tinypkg")
    (src / "tinypkg").mkdir()
    (src / "tinypkg" / "__init__.py").write_text("VALUE = 1\n")
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n[project]\nname = "tinypkg"\nversion = "0.1"\n')
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(out), str(src)], check=True)
    return out


@pytest.fixture
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copyfile(DATA / "ETTh1.csv", folder / "ETTh1.csv")
    return folder


def build(out, data_dir, wheels, **kwargs):
    return gpu_bundle.build(out, [get_info("ETTh1")], data_dir, ["tinypkg==0.1"], find_links=wheels, **kwargs)


@needs_etth1
def test_bundle_holds_the_wheels_the_checked_data_the_pins_and_the_commit(tmp_path, data_dir, wheels):
    out = tmp_path / "bundle"
    size = build(out, data_dir, wheels)
    assert [p.name for p in (out / "wheels").iterdir()] == ["tinypkg-0.1-py3-none-any.whl"]
    assert [p.name for p in (out / "data").iterdir()] == ["ETTh1.csv"]
    assert (out / "data" / "ETTh1.csv").read_bytes() == (data_dir / "ETTh1.csv").read_bytes()
    assert (out / "requirements.txt").read_text() == "tinypkg==0.1\n"
    assert (out / "commit").read_text().strip()
    assert size == gpu_bundle.folder_bytes(out) > (data_dir / "ETTh1.csv").stat().st_size
    build(out, data_dir, wheels)  # an earlier bundle is replaced
    not_a_bundle = tmp_path / "mine"
    not_a_bundle.mkdir()
    (not_a_bundle / "notes.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="is not a bundle"):
        build(not_a_bundle, data_dir, wheels)
    assert (not_a_bundle / "notes.txt").exists()


@needs_etth1
def test_a_bundle_that_does_not_fit_beside_the_working_tree_is_refused_and_removed(tmp_path, data_dir, wheels):
    with pytest.raises(SystemExit, match=r"exceed the 1 MiB that reach the GPU machine; select fewer datasets"):
        build(tmp_path / "bundle", data_dir, wheels, limit_mib=1)
    assert not (tmp_path / "bundle").exists()


def test_missing_or_altered_data_files_and_missing_wheels_are_refused(tmp_path, wheels):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with pytest.raises(SystemExit, match=f"{data_dir} lacks ETTh1.csv, which the selected runs need"):
        build(tmp_path / "bundle", data_dir, wheels)
    (data_dir / "ETTh1.csv").write_text("date,OT\n")
    with pytest.raises(SystemExit, match="is not the published ETTh1.csv: its sha256 is"):
        build(tmp_path / "bundle", data_dir, wheels)
    with pytest.raises(SystemExit, match=f"pip could not fetch tinypkg==9.9 .* from {wheels}; put those wheels"):
        gpu_bundle.download_wheels(["tinypkg==9.9"], tmp_path, wheels)


def test_the_carried_wheels_complete_gluonts_on_the_gpu_machine_at_the_versions_installed_here():
    """Every package GluonTS needs there (its needs' needs too) is on the machine or carried, and
    each carried pin satisfies what the others require of it (pydantic-core the one pydantic pins)."""
    assert gpu_bundle.pinned() == [f"{name}=={version(name)}" for name in gpu_bundle.CARRIED]
    pins = {canonicalize_name(name): version(name) for name in gpu_bundle.CARRIED}
    carried = set(pins)
    needed, todo = set(), ["gluonts"]
    while todo:
        name = todo.pop()
        needed.add(canonicalize_name(name))
        for requirement in map(Requirement, distribution(name).requires or []):
            if requirement.marker is not None and not requirement.marker.evaluate(GPU_MARKERS):
                continue
            key = canonicalize_name(requirement.name)
            if key in carried:
                assert requirement.specifier.contains(pins[key], prereleases=True), (name, requirement)
            if key not in needed and (key in carried or key not in GPU_IMAGE):
                todo.append(requirement.name)
    assert needed == carried


@needs_etth1
def test_main_bundles_the_data_of_the_selected_runs_and_prints_the_command(tmp_path, data_dir, wheels, monkeypatch,
                                                                          capsys):
    monkeypatch.setattr(gpu_bundle, "pinned", lambda: ["tinypkg==0.1"])
    configs = ["benchmarks/configs/paper_table_d512.toml", "benchmarks/configs/long_horizon.toml"]
    common = ["--data-dir", str(data_dir), "--out", str(tmp_path / "bundle"), "--find-links", str(wheels)]
    with pytest.raises(SystemExit, match="lacks ETTh2.csv, ETTm1.csv, WTH.csv, ETTm2.csv, weather.csv"):
        gpu_bundle.main([*configs, *common])  # long_horizon.toml's datasets
    assert gpu_bundle.main([*configs, "--dataset", "ETTh1", *common]) == 0
    assert [p.name for p in (tmp_path / "bundle" / "data").iterdir()] == ["ETTh1.csv"]
    printed = capsys.readouterr().out
    assert f"bash benchmarks/gpu_batch.sh {tmp_path / 'bundle'} {' '.join(configs)} --dataset ETTh1\n" in printed


@pytest.mark.slow
@needs_etth1
def test_gpu_batch_installs_the_wheels_offline_and_runs_a_quick_batch_on_the_bundles_data(tmp_path, data_dir, wheels):
    """The command run on the GPU machine, dry-run here: the offline install into a throw-away
    target, then two tiny runs at once (--jobs 2) through benchmarks.run, rows in the out dir."""
    bundle, site, out = tmp_path / "bundle", tmp_path / "site", tmp_path / "out"
    build(bundle, data_dir, wheels)
    env = {**os.environ, "PYTHON": sys.executable, "SITE": str(site), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # the bundle's data, nothing else
    env.pop("TSREC_DATA_DIR", None)
    subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_batch.sh"), str(bundle),
                    "benchmarks/configs/long_horizon.toml", "--quick", "--dataset", "ETTh1", "--horizon", "96",
                    "--model", "naive", "dlinear", "--seeds", "0", "--jobs", "2", "--threads", "1",
                    "--precision", "bf16-mixed", "--out-dir", str(out)], cwd=ROOT, env=env, check=True)
    assert (site / "tinypkg" / "__init__.py").exists()
    rows = list(csv.DictReader((out / "long_horizon.csv").open()))
    assert sorted(row["model"] for row in rows) == ["dlinear", "naive"]
    for row in rows:
        assert row["config"] == "long_horizon-quick" and row["precision"] == "bf16-mixed" and row["compile"] == "False"
        assert float(row["mse"]) > 0 and row["test_windows"] == "32"
    assert "| ETTh1 | 96 |" in (out / "long_horizon.md").read_text()
