"""gather_frames: every rank's frame concatenated on every rank, as pd.concat of them all would be,
with two processes in a gloo group (torch.multiprocessing)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import torch
import torch.multiprocessing as mp

from tsrec.collective import gather_frames


def part(rank: int, rows: int) -> pd.DataFrame:
    """A rank's frame of every kind of column the forecasts and backtests hold, and a few more."""
    rng = np.random.default_rng(rank)
    start = pd.Timestamp("2024-03-30 22:00", tz="Europe/Berlin") + pd.Timedelta(hours=rank)  # across the DST change
    ids = np.array([f"s{rank}{i % 2}" for i in range(rows)], dtype=object)
    if rows:
        ids[-1] = None
    return pd.DataFrame({
        "item_id": ids,
        "timestamp": pd.date_range(start, periods=rows, freq="h"),
        "origin": pd.date_range("2024-01-01", periods=rows, freq="D").as_unit("s"),
        "y_true": rng.normal(size=rows),
        "y_pred_scaled": rng.normal(size=rows).astype(np.float32),
        "mean": np.where(rng.random(rows) < 0.3, np.nan, rng.normal(size=rows)),
        "observed": rng.random(rows) < 0.5,
        "step": np.arange(1, rows + 1),
        "lag": pd.to_timedelta(np.arange(rows), unit="min"),
    })


CASES = {
    "uneven": lambda rank: part(rank, [5, 3][rank]),
    "none_in_one_rank": lambda rank: part(0, 4) if rank == 0 else None,
    "no_rows_in_one_rank": lambda rank: part(rank, [0, 6][rank]),
    "categorical_pickled": lambda rank: part(rank, 3).astype({"item_id": "category"}),
    "other_columns_pickled": lambda rank: part(rank, 2).drop(columns="lag" if rank else "step"),
    "none_anywhere": lambda rank: None,
}


def failing(rank: int) -> pd.DataFrame:
    if rank == 1:
        raise ValueError("no rows for item 's7'")
    return part(0, 2)


def worker(rank: int, init: str, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    sent, broadcast = [], torch.distributed.broadcast

    def counted(tensor, src):  # noqa: ANN001, ANN202
        sent.append(src)
        return broadcast(tensor, src=src)

    torch.distributed.broadcast = counted  # this process's own module: counts the columns sent as arrays
    results = {}
    for name, make in CASES.items():
        sent.clear()
        results[name] = gather_frames(lambda: make(rank))
        results[f"{name}_broadcasts"] = len(sent)
    try:
        gather_frames(lambda: failing(rank))
    except Exception as err:  # noqa: BLE001 (the error each rank gets is the result)
        results["error"] = f"{type(err).__name__}: {err}"
    with open(f"{out}{rank}.pkl", "wb") as fh:
        pickle.dump(results, fh)
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def gathered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gather")
    mp.spawn(worker, args=(f"file://{folder / 'store'}", str(folder / "rank")), nprocs=2, join=True)
    return [pickle.loads((folder / f"rank{rank}.pkl").read_bytes()) for rank in range(2)]


@pytest.mark.slow  # a two-process group
@pytest.mark.parametrize("case", [name for name in CASES if name != "none_anywhere"])
def test_every_rank_gets_the_frames_concatenated_in_rank_order(gathered, case):
    parts = [frame for frame in (CASES[case](rank) for rank in range(2)) if frame is not None]
    expected = pd.concat(parts, ignore_index=True)
    for rank in range(2):
        pd.testing.assert_frame_equal(gathered[rank][case], expected, check_exact=True)


@pytest.mark.parametrize(("case", "broadcasts"), [
    ("uneven", 9 * 2), ("none_in_one_rank", 9), ("no_rows_in_one_rank", 9), ("categorical_pickled", 0),
    ("other_columns_pickled", 0)])
@pytest.mark.slow  # a two-process group
def test_columns_travel_as_arrays_one_broadcast_per_column_and_rank_with_rows(gathered, case, broadcasts):
    assert gathered[0][f"{case}_broadcasts"] == gathered[1][f"{case}_broadcasts"] == broadcasts


@pytest.mark.slow  # a two-process group
def test_no_frame_in_any_rank_gives_none(gathered):
    assert gathered[0]["none_anywhere"] is None and gathered[1]["none_anywhere"] is None


@pytest.mark.slow  # a two-process group
def test_an_error_in_one_rank_is_raised_in_both(gathered):
    assert gathered[1]["error"] == "ValueError: no rows for item 's7'"
    assert gathered[0]["error"].startswith("RuntimeError: process 1 failed (ValueError: no rows for item 's7')")


def test_one_process_returns_its_own_frame():
    frame = part(0, 3)
    assert gather_frames(lambda: frame) is frame
