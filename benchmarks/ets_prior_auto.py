"""Does the default model (``auto``) give an RSA model ensemble weight on issue 37's study data,
with and without the ETS prior?

``auto`` tries its networks only where the steps before its validation windows hold at least
:data:`tsrec.halving.MIN_NETWORK_WINDOWS` training windows (its rule, not changed here). For each
dataset of the study (configs/ets_prior.toml's panels on the data before the first test origin, and
configs/ets_prior_few_shot.toml's 5% training parts) this counts those windows with auto's own
functions; where the networks are tried it fits ``Forecaster()`` (auto, defaults, seeds 0-2) twice,
as it is and with its ``rsa_patchtst`` candidate built with ``rsa={"prior": "ets"}`` (the candidate
Forecasters auto builds are wrapped for that run only; auto's code is unchanged), and reads the
weight its leaderboard gives ``rsa_patchtst``.

    OMP_NUM_THREADS=1 python -m benchmarks.ets_prior_auto

writes ``benchmarks/results/ets_prior_auto.csv`` and ``ets_prior_auto.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import unseen_like as ul
from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv

RESULTS = ROOT / "benchmarks" / "results"
CONFIGS = ROOT / "benchmarks" / "configs"
RSA_CANDIDATE = "rsa_patchtst"


@contextlib.contextmanager
def rsa_candidate_with_prior() -> Iterator[None]:
    """Within the block, auto fits its ``rsa_patchtst`` candidate with ``rsa={"prior": "ets"}``."""
    from tsrec.candidates import Candidates

    plain = Candidates.settings_of

    def settings_of(self: Any, name: str, **overrides: Any) -> Any:
        if name == RSA_CANDIDATE:
            overrides = {**overrides, "rsa": {"prior": "ets"}}
        return plain(self, name, **overrides)

    Candidates.settings_of = settings_of
    try:
        yield
    finally:
        Candidates.settings_of = plain


def admitted(lengths: list[int], n_series: int, channels: int, horizon: int) -> int:
    """auto's count of training windows for its networks (:func:`tsrec.halving.network_windows`)."""
    from tsrec.halving import network_windows
    from tsrec.validation import validation_windows

    windows = validation_windows(n_series * channels, min(lengths), horizon)
    return network_windows(lengths, channels, horizon, windows)


def panel_rows(seeds: list[int]) -> list[dict[str, Any]]:
    from tsrec import Forecaster
    from tsrec.halving import MIN_NETWORK_WINDOWS

    config = ul.load_config(CONFIGS / "ets_prior.toml")
    rows = []
    for name, spec in config["datasets"].items():
        task = ul.prepare_task(name, spec, config["test_fraction"])
        first = task.windows.first
        count = admitted([first] * spec["series"], spec["series"], 1, spec["horizon"])
        base = {"dataset": name, "part": "A", "training_windows": count}
        if count < MIN_NETWORK_WINDOWS:
            why = f"no: auto does not try networks ({count} < {MIN_NETWORK_WINDOWS} training windows)"
            rows.append({**base, "prior": "-", "seed": "", "rsa_weight": "", "members": "", "answer": why})
            continue
        for prior in ("none", "ets"):
            for seed in seeds:
                started = time.process_time()
                with rsa_candidate_with_prior() if prior == "ets" else contextlib.nullcontext():
                    f = Forecaster(prediction_length=spec["horizon"], seed=seed,
                                   trainer_kwargs={"enable_progress_bar": False})
                    f.fit(task.train, id_col=ul.ID, time_col=ul.TIME, target_col=ul.TARGET)
                board = f.leaderboard
                weight = float(board.loc[board.model == RSA_CANDIDATE, "weight"].sum())
                members = ", ".join(f"{r.model} {r.weight:.2f}" for r in board[board.weight > 0].itertuples())
                note = board.loc[board.model == RSA_CANDIDATE, "note"].iloc[0] if (board.model == RSA_CANDIDATE).any() \
                    else "not a candidate"
                rows.append({**base, "prior": prior, "seed": seed, "rsa_weight": weight, "members": members,
                             "answer": ("yes" if weight > 0 else "no") + f" (rsa_patchtst: {note})",
                             "cpu_seconds": round(time.process_time() - started, 1)})
                print(rows[-1], flush=True)
    return rows


def few_shot_rows() -> list[dict[str, Any]]:
    from benchmarks.run import train_fraction_split
    from tsrec import datasets
    from tsrec.halving import MIN_NETWORK_WINDOWS

    config = tomllib.loads((CONFIGS / "ets_prior_few_shot.toml").read_text())
    rows = []
    for dataset, horizons in config["settings"].items():
        info = datasets.get_info(dataset)
        for horizon in horizons:
            for fraction in config["train_fractions"]:
                split = datasets.splits(dataset, "long_horizon", context_length=96, prediction_length=horizon,
                                        n_rows=info.n_rows)
                part = train_fraction_split(split, fraction)["train"]
                count = admitted([part.end - part.start], 1, info.n_variables, horizon)
                rows.append({"dataset": f"{dataset}-{horizon} at {fraction:g}", "part": "B", "training_windows": count,
                             "prior": "-", "seed": "", "rsa_weight": "", "members": "",
                             "answer": ("no: auto does not try networks" if count < MIN_NETWORK_WINDOWS else
                                        "networks tried (not fitted here)")
                             + f" ({count} {'<' if count < MIN_NETWORK_WINDOWS else '>='} {MIN_NETWORK_WINDOWS})"})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ets_prior_auto", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    import pandas as pd
    import torch

    torch.set_num_threads(1)
    rows = panel_rows(args.seeds) + few_shot_rows()
    columns = ["dataset", "part", "training_windows", "prior", "seed", "rsa_weight", "members", "answer", "cpu_seconds"]
    frame = pd.DataFrame(rows).reindex(columns=columns)
    out = Path(args.out_dir)
    write_csv(out / "ets_prior_auto.csv", frame.fillna("").to_dict("records"))
    command = command_line("benchmarks.ets_prior_auto", sys.argv[1:] if argv is None else argv)
    text = "\n".join(["# auto on the ETS-prior study's data: does an RSA model get ensemble weight? (issue 37, part 3)",
                      "", f"`{command}` at commit {git_commit()} on {machine()}, {now()}. See the module docstring "
                      "of benchmarks/ets_prior_auto.py.", "", markdown_table(frame.fillna("")), ""])
    (out / "ets_prior_auto.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
