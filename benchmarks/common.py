"""What every benchmark records beside its numbers (the exact command, commit, machine and date),
and the process-level helpers they share (peak memory, fresh processes, CSV rows)."""

from __future__ import annotations

import csv
import datetime as dt
import multiprocessing
import os
import platform
import shlex
import subprocess
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
#: Environment variable naming the commit of a copy of the checkout without its git history (a GPU
#: machine's: ``benchmarks/gpu_batch.sh`` sets it to the commit its bundle was built at).
COMMIT_VAR = "TSREC_COMMIT"
T = TypeVar("T")
#: The Lightning precisions a benchmark may train and measure in; the first is the default.
PRECISIONS = ("32-true", "bf16-mixed")


def git_commit() -> str:
    """Short commit of the checkout, with ``+dirty`` when tracked files have changes (result files
    under ``benchmarks/results/`` do not count: they are what benchmarks write, not code that runs).
    ``$TSREC_COMMIT`` (:data:`COMMIT_VAR`) when set: a copy of the checkout on another machine, whose
    git metadata may be missing or stale (a GPU machine's copy named its session's first commit, +dirty).
    Outside a git checkout without it: ``"unknown"``."""
    if os.environ.get(COMMIT_VAR):
        return os.environ[COMMIT_VAR]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """One line: CPU model and cores, GPU if any, torch version."""
    import torch

    parts = [f"{cpu_model()} x{os.cpu_count()}", f"torch {torch.__version__}", f"{torch.get_num_threads()} threads"]
    if torch.cuda.is_available():
        parts.insert(1, torch.cuda.get_device_name(0))
    return ", ".join(parts)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def git_dirty(paths: list[str]) -> list[str]:
    """The given paths (files or folders) that have uncommitted changes."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in out.splitlines() if line.strip()]


def mem_total_gb() -> float | None:
    """Physical memory of the machine in GiB (None where /proc/meminfo is unreadable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return None


def status_kb(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``); None where unreadable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) to the current RSS, if allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def command_line(module: str, argv: list[str]) -> str:
    """The command that reruns ``python -m module`` with ``argv``, quoted for a shell."""
    return f"python -m {module} {shlex.join(argv)}".rstrip()


def peak_rss_growth_mib(run: Callable[[], object], base_kb: int) -> float | None:
    """Peak resident set size while ``run()`` runs, over ``base_kb``, in MiB; None where the peak
    counter cannot be reset. Counts every allocation torch makes on the CPU, which ``tracemalloc``
    does not see."""
    if not reset_peak_rss():
        return None
    run()
    peak_kb = status_kb("VmHWM")
    return None if peak_kb is None else (peak_kb - base_kb) / 1024


def in_fresh_process(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a new Python process (spawned, not forked), so that its peak memory is its own;
    ``fn`` must be a module-level function and its arguments and result picklable."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` (same keys, in order) as a CSV file with a header."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def provenance(module: str, argv: list[str]) -> str:
    """The line a results file ends with: the command that reruns ``python -m module`` with ``argv``
    on one thread, the commit, the machine and the time."""
    return (f"Command: `OMP_NUM_THREADS=1 {command_line(module, argv)}`; commit {git_commit()}; machine: {machine()}; "
            f"{now()}.")


def write_report(path: Path, text: str) -> None:
    """Write the markdown report ``text`` to ``path`` (its folder made) and print it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)


def markdown_table(frame: Any, floatfmt: str = ".4f") -> str:
    """A pandas DataFrame as a GitHub markdown table (floats formatted with ``floatfmt``)."""
    def cell(value: Any) -> str:
        return format(value, floatfmt) if isinstance(value, float) else str(value)

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of the results CSV ``path`` (none when it does not exist yet)."""
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def seeded_runs(seeds: list[int], panel_of: Callable[[int], Any], runs: tuple[str, ...], horizon: int,
                run: Callable[[str, Any, Any], dict[str, object]]) -> Any:
    """Each seed's panel (``panel_of(seed)``: a long frame with ``unique_id``), each series' last
    ``horizon`` steps held out as its test and the rest its training part, and every one of ``runs``
    on it, one after the other (``run(name, train, test)``: its row), each row printed as it comes:
    a DataFrame of ``seed``, ``run`` and the rows' columns."""
    import json

    import pandas as pd

    rows = []
    for seed in seeds:
        df = panel_of(seed)
        train = df.groupby("unique_id", group_keys=False).apply(lambda g: g.iloc[:-horizon])
        test = df.groupby("unique_id").tail(horizon)
        for name in runs:
            rows.append({"seed": seed, "run": name, **run(name, train, test)})
            print(json.dumps(rows[-1]), flush=True)
    return pd.DataFrame(rows)


def over_seeds(table: Any, columns: list[str]) -> Any:
    """The mean and the spread (sample standard deviation) over seeds of ``columns`` of a
    :func:`seeded_runs` ``table``, per run in the order they ran (the spread columns named
    ``<column>_spread``)."""
    aggregations = {}
    for column in columns:
        aggregations[column] = (column, "mean")
        aggregations[f"{column}_spread"] = (column, "std")
    return table.groupby("run", sort=False).agg(**aggregations).reset_index()


def seeds_report(title: str, intro: str, table: Any, columns: list[str], module: str, argv: list[str], *,
                 per_seed: str = "Per seed:") -> str:
    """A :func:`seeded_runs` ``table``'s markdown report: its ``title``, ``intro``, the mean and spread
    over seeds of ``columns`` (:func:`over_seeds`), every row (under ``per_seed``) and the
    :func:`provenance` line of ``python -m module`` with ``argv``."""
    return "\n".join([
        f"# {title}", "", intro, "",
        "Mean and spread (standard deviation) over the seeds:", "",
        markdown_table(over_seeds(table, columns), floatfmt=".3f"), "",
        per_seed, "",
        markdown_table(table, floatfmt=".3f"), "",
        provenance(module, argv), ""])
