"""CPU time of :func:`tsrec.data.periods.dominant_periods` against the implementation it replaced.

The reference is ``tsrec/data/periods.py`` as of :data:`REFERENCE_COMMIT` (one periodogram of the
whole series, the noise floor's median taken at every local peak: about quadratic in the length),
read with ``git show`` and run from memory; the current one averages segments of at most
``MAX_SEGMENT`` steps and takes the floor on a log-frequency grid. Both run on the same series: a
24-step sine plus unit Gaussian noise, one channel, every step observed. CPU seconds
(``time.process_time``) of one call, median (min-max) of ``--repeats`` calls after one untimed
warm-up call of each on the shortest series; the reference is skipped at a length where its time,
extrapolated quadratically from the previous length, exceeds ``--reference-limit`` seconds.
``OMP_NUM_THREADS`` is 1 unless set otherwise. Writes ``periods_speed.md``.

Usage::

    python -m benchmarks.periods_speed [--lengths 10000 50000 200000 1000000] [--repeats 5] [--out-dir DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, machine, now, write_report  # noqa: E402
from tsrec.data import periods  # noqa: E402

#: The last commit with the quadratic implementation (the reference being replaced).
REFERENCE_COMMIT = "8165129"
LENGTHS = (10_000, 50_000, 200_000, 1_000_000)
CYCLE = 24


def reference_dominant_periods() -> Callable[..., tuple[float, ...]]:
    """``dominant_periods`` of ``tsrec/data/periods.py`` at :data:`REFERENCE_COMMIT`."""
    source = subprocess.run(["git", "show", f"{REFERENCE_COMMIT}:tsrec/data/periods.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("reference_periods")
    exec(compile(source, f"{REFERENCE_COMMIT}:tsrec/data/periods.py", "exec"), module.__dict__)
    return module.dominant_periods


def series(n_steps: int, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One item ``[n_steps, 1]``: a :data:`CYCLE`-step sine plus unit Gaussian noise, all observed."""
    t = np.arange(n_steps)
    y = np.sin(2 * np.pi * t / CYCLE) + np.random.default_rng(seed).standard_normal(n_steps)
    return [y[:, None]], [np.ones((n_steps, 1), bool)]


def cpu_seconds(find: Callable[..., tuple[float, ...]], data, repeats: int) -> tuple[list[float], tuple[float, ...]]:
    """CPU seconds of ``repeats`` calls of ``find(*data)``, and what it found."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        found = find(*data)
        times.append(time.process_time() - started)
    return times, found


def summary(times: list[float]) -> str:
    return f"{statistics.median(times):.3f} ({min(times):.3f}-{max(times):.3f})"


def periods_text(found: tuple[float, ...]) -> str:
    return ", ".join(f"{float(p):g}" for p in found) or "none"


def measure(lengths: list[int], repeats: int, reference_limit: float) -> list[dict[str, str]]:
    """One row per length: the reference's and the current implementation's times and periods."""
    reference, current = reference_dominant_periods(), periods.dominant_periods
    warm = series(min(lengths))
    reference(*warm)
    current(*warm)
    rows, previous = [], None  # previous: (length, median reference seconds)
    for n_steps in lengths:
        data = series(n_steps)
        new_times, new_found = cpu_seconds(current, data, repeats)
        row = {"steps": f"{n_steps:,}", "new": summary(new_times), "new periods": periods_text(new_found)}
        estimate = None if previous is None else previous[1] * (n_steps / previous[0]) ** 2
        if estimate is not None and estimate > reference_limit:
            row |= {"old": f"skipped (~{estimate:.0f} s, quadratic extrapolation)", "old/new": "", "old periods": ""}
        else:
            old_times, old_found = cpu_seconds(reference, data, repeats)
            previous = (n_steps, statistics.median(old_times))
            row |= {"old": summary(old_times), "old periods": periods_text(old_found),
                    "old/new": f"{statistics.median(old_times) / statistics.median(new_times):.0f}x"}
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    return rows


def agreement(rows: list[dict[str, str]]) -> str:
    """One line: whether both found the same periods wherever both ran."""
    differ = [row["steps"] for row in rows if row["old periods"] and row["old periods"] != row["new periods"]]
    ran = [row["steps"] for row in rows if row["old periods"]]
    if not differ:
        return f"Periods: the same from both at every length both ran ({', '.join(ran)} steps)."
    return f"Periods: different at {', '.join(differ)} steps."


def report(rows: list[dict[str, str]], *, command: str, repeats: int, reference_limit: float,
           load: tuple[float, float]) -> str:
    columns = ("steps", "old", "new", "old/new", "old periods", "new periods")
    lines = [
        "# Dominant periods: quadratic reference vs segment-averaged periodogram",
        "",
        "`tsrec.data.periods.dominant_periods` on one channel: a 24-step sine plus unit Gaussian noise.",
        "",
        f"- command: `{command}`",
        f"- git commit: `{git_commit()}`; old = `tsrec/data/periods.py` at `{REFERENCE_COMMIT}` "
        "(one periodogram of the whole series, a median at every local peak)",
        f"- machine: {machine()}; numpy {np.__version__}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}",
        f"- date: {now()}; 1-min load average {load[0]:.1f} at the start, {load[1]:.1f} at the end "
        "(2 cores shared with other jobs: CPU seconds, not wall time)",
        f"- time: CPU seconds of one call, median (min-max) of {repeats} calls after an untimed warm-up; "
        f"old skipped where its quadratic extrapolation exceeds {reference_limit:.0f} s",
        f"- new: segments of at most {periods.MAX_SEGMENT} steps (half-overlapping), floor exact every "
        f"1/{periods.FLOOR_GRID_PER_OCTAVE} octave",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if c in ("steps", "old", "new", "old/new") else "---" for c in columns) + "|",
        *("| " + " | ".join(row[c] for c in columns) + " |" for row in rows),
        "",
        agreement(rows),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reference-limit", type=float, default=60.0,
                        help="skip the old implementation where its extrapolated time exceeds this (seconds)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = measure(sorted(args.lengths), args.repeats, args.reference_limit)
    text = report(rows, command=command_line("benchmarks.periods_speed", argv), repeats=args.repeats,
                  reference_limit=args.reference_limit, load=(load_before, os.getloadavg()[0]))
    write_report(args.out_dir / "periods_speed.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
