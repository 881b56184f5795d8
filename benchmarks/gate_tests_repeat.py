"""Do the gate tests hold run after run? Issue 26's target: the gate tests pass in 10 of 10
consecutive runs in a fresh virtual environment, with the default thread count and with
``OMP_NUM_THREADS=1``.

``python -m benchmarks.gate_tests_repeat [--runs 10] [--venv DIR]`` creates a virtual environment
in ``DIR`` (removed first; ``torch==2.13.0`` then ``pip install -e .[dev]``, as ``.ci/run`` does),
then runs ``pytest`` on :data:`GATE_TESTS` ``--runs`` times in a row under each thread setting,
every run in a fresh process with the cache off, and writes
``benchmarks/results/gate_tests_repeat.md`` (each run's outcome, passed/failed counts and wall
seconds, with the command, commit, machine and date).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now

#: The tests of what ``Forecaster.gates()`` and the gate plots claim (issue 26).
GATE_TESTS = ("tests/test_gate_truth.py",
              "tests/test_plotting.py::test_plot_gates_marks_the_data_periods_and_the_heads_left_at_their_start",
              "tests/test_plotting.py::test_gates_dominant_cycle_heads_of_the_default_model_report_the_data_cycle")
#: Thread settings: the default (torch's own choice) and one thread.
THREADS = {"default": None, "OMP_NUM_THREADS=1": "1"}


def fresh_venv(folder: Path) -> Path:
    """A new virtual environment in ``folder`` with tsrec's test dependencies; its python."""
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    for args in (["torch==2.13.0"], ["-e", f"{ROOT}[dev]"]):
        subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True)
    return python


def run_once(python: Path, threads: str | None) -> dict[str, object]:
    """One pytest run of :data:`GATE_TESTS` in a fresh process: its outcome and wall seconds."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    started = time.perf_counter()
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           *GATE_TESTS], cwd=ROOT, env=env, capture_output=True, text=True)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-300:]
    return {"passed": done.returncode == 0, "summary": last, "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--venv", type=Path, default=Path("/tmp/tsrec-gate-venv"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gate_tests_repeat.md")
    args = parser.parse_args(argv)
    python = fresh_venv(args.venv)
    rows = []
    for setting, threads in THREADS.items():
        for run in range(1, args.runs + 1):
            rows.append({"threads": setting, "run": run, **run_once(python, threads)})
            print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    tally = frame.groupby("threads", sort=False)["passed"].agg(["sum", "count"])
    lines = [
        "# Gate tests, run after run (issue 26)", "",
        f"- command: `{command_line('benchmarks.gate_tests_repeat', sys.argv[1:] if argv is None else argv)}`",
        f"- commit: {git_commit()}", f"- machine: {machine()}", f"- date: {now()}",
        f"- tests: {', '.join(f'`{t}`' for t in GATE_TESTS)}",
        "- a fresh virtual environment (`torch==2.13.0`, then `pip install -e .[dev]`), every run a fresh pytest "
        "process without its cache", "",
        "Consecutive runs passed: " + "; ".join(f"{setting}: {int(row['sum'])} of {int(row['count'])}"
                                               for setting, row in tally.iterrows()), "",
        markdown_table(frame, floatfmt=".1f"), "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
