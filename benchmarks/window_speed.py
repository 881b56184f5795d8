"""CPU time per window of the batches :class:`tsrec.data.WindowDataset` feeds a model, against the
per-window implementation it replaced.

The reference is ``tsrec/data/windows.py`` as of :data:`REFERENCE_COMMIT` (one ``__getitem__`` per
window: a ``searchsorted``, slices and a ``torch.tensor`` per field, stacked by the default
collate), read with ``git show`` and run from memory; the current one gathers a whole batch with
one index per field (``__getitems__``, passed on by ``WindowDataset.collate``). Both serve the
same windows of the same panel: ``--series`` hourly series of ``--steps`` steps, one channel, the
calendar's time features, ``--context`` past and ``--horizon`` future steps.

Paths, each a single-process ``DataLoader`` with batches of ``--batch-size`` windows, timed over a
whole epoch (or its first ``--batches`` batches: then the per-epoch work, such as drawing the
shuffled order, weighs on those batches only):

- training: ``make_loader(train=True)``, shuffled by the ``EpochShuffleSampler`` (the reference:
  the same loader with the default collate);
- validation: ``make_loader(train=False)``, windows in order;
- prediction: one window per series (``WindowDataset.for_prediction``);
- training, gather alone: ``WindowDataset.gather`` on slices of the same shuffled order held as a
  tensor, without the sampler's Python list of indices, ``BatchSampler`` or ``DataLoader``.

CPU seconds (``time.process_time``, one torch thread) per window, median (min-max) of
``--repeats`` runs after one untimed batch of each. ``OMP_NUM_THREADS`` is 1 unless set otherwise.
Writes ``window_speed.md``.

Usage::

    python -m benchmarks.window_speed [--series 1000] [--steps 500] [--batches N] [--repeats 5] [--out-dir DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy and torch load their thread pools

import argparse  # noqa: E402
import itertools  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable, Iterable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, machine, now  # noqa: E402
from tsrec.config import TrainingConfig  # noqa: E402
from tsrec.data import Panel, StandardScaler, WindowDataset, canonicalize  # noqa: E402
from tsrec.training import EpochShuffleSampler, make_loader  # noqa: E402

#: The last commit with the per-window implementation (the reference being replaced).
REFERENCE_COMMIT = "577afe1"
SEED = 0
#: A fresh iteration of the batches a path times.
Batches = Callable[[], Iterable[dict]]


def reference_window_dataset() -> type:
    """``WindowDataset`` of ``tsrec/data/windows.py`` at :data:`REFERENCE_COMMIT`."""
    path = "tsrec/data/windows.py"
    source = subprocess.run(["git", "show", f"{REFERENCE_COMMIT}:{path}"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    module = types.ModuleType("reference_windows")
    sys.modules[module.__name__] = module  # dataclasses look their module up while the source runs
    exec(compile(source, f"{REFERENCE_COMMIT}:{path}", "exec"), module.__dict__)
    return module.WindowDataset


def panel(n_series: int, n_steps: int, seed: int = SEED) -> Panel:
    """``n_series`` hourly items of ``n_steps`` steps: a daily sine plus unit Gaussian noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps)
    frame = pd.DataFrame({
        "id": np.repeat(np.arange(n_series), n_steps),
        "ts": np.tile(pd.date_range("2024-01-01", periods=n_steps, freq="h"), n_series),
        "y": (np.sin(2 * np.pi * t / 24) + rng.standard_normal((n_series, n_steps))).ravel(),
    })
    return canonicalize(frame, time_col="ts", id_col="id")


def cpu_seconds_per_window(batches: Batches, repeats: int) -> list[float]:
    """CPU seconds per window of drawing every batch of ``batches()``, ``repeats`` times."""
    times = []
    for _ in range(repeats):
        started, windows = time.process_time(), 0
        for batch in batches():
            windows += len(batch["item"])
        times.append((time.process_time() - started) / windows)
    return times


def summary(times: list[float] | None) -> str:
    if times is None:
        return "-"
    micro = [t * 1e6 for t in times]
    return f"{statistics.median(micro):.2f} ({min(micro):.2f}-{max(micro):.2f})"


def same_batches(old: Iterable[dict], new: Iterable[dict]) -> bool:
    """Whether two iterations give the same batches: keys, dtypes, shapes and values."""
    old, new = list(old), list(new)
    return len(old) == len(new) and all(list(a) == list(b) and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a)
        for a, b in zip(old, new))


def paths(args: argparse.Namespace) -> dict[str, tuple[Batches | None, Batches]]:
    """Per path, a fresh iteration of its timed batches from the reference (None where it has no
    such path) and from the current implementation."""
    reference = reference_window_dataset()
    data = panel(args.series, args.steps)
    scaler = StandardScaler.fit([s.values for s in data.items], [s.observed for s in data.items])
    origins = [(args.context, len(s) - args.horizon + 1) for s in data.items]
    old = reference.from_panel(data, scaler, args.context, args.horizon, origins)
    new = WindowDataset.from_panel(data, scaler, args.context, args.horizon, origins)
    old_prediction = reference.for_prediction(data, scaler, args.context, args.horizon)
    new_prediction = WindowDataset.for_prediction(data, scaler, args.context, args.horizon)
    config = TrainingConfig(batch_size=args.batch_size, seed=SEED)
    limit = None if args.batches is None else args.batches * args.batch_size
    order = torch.tensor(list(EpochShuffleSampler(len(new), SEED)))[:limit]

    def head(loader: DataLoader) -> Iterable[dict]:
        return itertools.islice(loader, args.batches)

    return {
        "training": (lambda: head(DataLoader(old, args.batch_size, sampler=EpochShuffleSampler(len(old), SEED))),
                     lambda: head(make_loader(new, config, train=True))),
        "validation": (lambda: head(DataLoader(old, args.batch_size)),
                       lambda: head(make_loader(new, config, train=False))),
        "prediction": (lambda: head(DataLoader(old_prediction, args.batch_size)),
                       lambda: head(DataLoader(new_prediction, args.batch_size, collate_fn=new_prediction.collate))),
        "training, gather alone": (None, lambda: (new.gather(chunk) for chunk in order.split(args.batch_size))),
    }


def measure(args: argparse.Namespace) -> tuple[list[dict[str, str]], bool]:
    """One row per path (old and new CPU seconds per window), and whether old and new batches agree."""
    rows, agree = [], True
    for name, (old, new) in paths(args).items():
        if old is not None:
            agree &= same_batches(old(), new())
        times = {}
        for side, batches in (("old", old), ("new", new)):
            if batches is not None:
                next(iter(batches()))  # warm-up
                times[side] = cpu_seconds_per_window(batches, args.repeats)
        ratio = f"{statistics.median(times['old']) / statistics.median(times['new']):.0f}x" if "old" in times else ""
        rows.append({"path": name, "old": summary(times.get("old")), "new": summary(times["new"]), "old/new": ratio})
        print(rows[-1], file=sys.stderr, flush=True)
    return rows, agree


def report(rows: list[dict[str, str]], agree: bool, args: argparse.Namespace, *, command: str,
           load: tuple[float, float]) -> str:
    columns = ("path", "old", "new", "old/new")
    windows = args.series * (args.steps - args.context - args.horizon + 1)
    timed = f"{'a whole epoch' if args.batches is None else f'the first {args.batches} batches'} of each loader"
    lines = [
        "# Forecast windows: per-window reference vs batched gather",
        "",
        f"`WindowDataset` batches of {args.batch_size} windows: {args.series:,} hourly series x {args.steps} steps "
        f"({windows:,} training windows), 1 channel, context {args.context}, horizon {args.horizon}.",
        "",
        f"- command: `{command}`",
        f"- git commit: `{git_commit()}`; old = `tsrec/data/windows.py` at `{REFERENCE_COMMIT}` (a `__getitem__` "
        "per window, stacked by the default collate)",
        f"- machine: {machine()}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}",
        f"- date: {now()}; 1-min load average {load[0]:.1f} at the start, {load[1]:.1f} at the end "
        "(2 cores shared with other jobs: CPU seconds, not wall time)",
        f"- time: CPU microseconds per window over {timed}, median (min-max) of {args.repeats} runs after an "
        "untimed batch",
        "- training / validation: `make_loader(train=True / False)` (old: the same `DataLoader` with the default "
        "collate); gather alone: `WindowDataset.gather` on tensor slices of the same shuffled order, without the "
        "sampler's list of indices, `BatchSampler` and `DataLoader`",
        "",
        "| " + " | ".join(columns) + " |",
        "|---|" + "|".join("---:" for _ in columns[1:]) + "|",
        *("| " + " | ".join(row[c] for c in columns) + " |" for row in rows),
        "",
        "Batches: " + ("every timed batch the same (keys, dtypes, shapes, values) from old and new on every path."
                       if agree else "DIFFERENT between old and new."),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--context", type=int, default=96)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--batches", type=int, help="batches timed per loader (default: a whole epoch)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    rows, agree = measure(args)
    text = report(rows, agree, args, command=command_line("benchmarks.window_speed", argv),
                  load=(load_before, os.getloadavg()[0]))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "window_speed.md").write_text(text)
    print(text)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
