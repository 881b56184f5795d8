"""Exact DDP: two CPU processes (gloo) read every training and validation window once, and predict and
backtest exactly what one process does with the same model, for every trainable model family."""

import dataclasses
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.evaluation import backtest
from tsrec.models.registry import model_config

MODELS = ("dlinear", "patchtst", "rsa_patchtst", "rsa_informer", "rsa_srupp", "rsa_starsaber", "relevancy_rnn")
COLUMNS = {"id_col": "id", "time_col": "ds", "target_col": "y"}
BACKTEST = dict(n_windows=5, stride=3, baselines=("naive", "seasonal_naive"), **COLUMNS)

SCRIPT = """
import dataclasses, json, os, sys
import pandas as pd
import torch
sys.path.insert(0, {tests!r})
from test_ddp import BACKTEST, COLUMNS, MODELS, frame, settings
from tsrec import Forecaster
from tsrec.evaluation import backtest
from tsrec.training import sharding

read = {{"train": [], "val": []}}  # the window indices this rank read, per loader kind
train_iter, shard_iter = sharding.GlobalBatchSampler.__iter__, sharding.ShardSampler.__iter__

def record_train(self):
    for batch in train_iter(self):
        read["train"].append(batch)
        yield batch

def record_shard(self):
    indices = list(shard_iter(self))
    read["val"].append(indices)
    return iter(indices)

sharding.GlobalBatchSampler.__iter__, sharding.ShardSampler.__iter__ = record_train, record_shard
rank = int(os.environ.get("LOCAL_RANK", 0))
out = {out!r}
results = {{}}
for name in MODELS:
    read["train"].clear(); read["val"].clear()
    f = Forecaster(name, **settings(name), trainer_kwargs={{"strategy": "ddp", "devices": 2, "accelerator": "cpu",
                                                         "enable_progress_bar": False, "logger": False}})
    f.fit(frame(), **COLUMNS)
    reads = {{"train": [list(b) for b in read["train"]], "val": [list(v) for v in read["val"]]}}
    f.save(os.path.join(out, name))
    result = backtest(f, frame(), **BACKTEST)
    results[name] = {{"read": reads, "world": f.trainer.world_size, "steps": int(f.trainer.global_step),
                      "losses": f.training_summary.history[["train_loss", "val_loss"]].to_numpy().tolist(),
                      "logged_val_loss": float(f.trainer.callback_metrics["val_loss"]),
                      "forecast": f.predict()["mean"].tolist(), "windows": len(result.errors),
                      "from_parquet": f.predict(os.path.join(out, "frame.parquet")).to_json(),
                      "from_parquet_folder": f.predict(os.path.join(out, "parts")).to_json(),
                      "from_frame": f.predict(frame()).to_json(),
                      "summary": result.summary.value.tolist()}}
blocked = os.path.join(out, "not_a_model")  # a folder of something else: rank 0's save refuses to replace it
os.makedirs(blocked, exist_ok=True)
open(os.path.join(blocked, "notes.txt"), "w").close()
try:
    f.save(blocked)
except Exception as err:
    results["save_error"] = f"{{type(err).__name__}}: {{err}}"
duplicated = frame()
duplicated = pd.concat([duplicated, duplicated[duplicated.id == "s4"].tail(1)])
try:
    f.predict(duplicated)  # s4, with a timestamp twice, is among rank 1's series, which rank 1 alone reads
except Exception as err:
    results["series_error"] = f"{{type(err).__name__}}: {{err}}"
with open(os.path.join(out, f"rank{{rank}}.json"), "w") as fh:
    json.dump(results, fh)
torch.distributed.destroy_process_group()  # before exit: a group left to the interpreter's exit may abort it
"""


def frame():
    """Five hourly series of different lengths (so that the ranks' shares hold parts of several),
    two with missing values (so that the ranks' parts of a batch hold different numbers of
    observed targets)."""
    rng = np.random.default_rng(0)
    parts = []
    for k, n in enumerate((130, 150, 170, 140, 160)):
        t = np.arange(n)
        y = 3 * k + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)
        if k in (1, 3):
            y[40 + 7 * k:70 + 7 * k] = np.nan
        parts.append(pd.DataFrame({"id": f"s{k}", "ds": pd.date_range("2024-03-01", periods=n, freq="h"), "y": y}))
    return pd.concat(parts, ignore_index=True)


def settings(name):
    """The script's Forecaster settings of ``name``, in one process."""
    fields = {field.name for field in dataclasses.fields(model_config(name))}
    net = {k: v for k, v in dict(d_model=16, n_heads=8, d_ff=16, e_layers=1, d_layers=1, n_layers=1).items()
           if k in fields}
    return dict(prediction_length=6, context_length=24, val_windows=6, max_epochs=1, batch_size=16,
                refit_full=False, **net)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Each rank's record of the 2-process runs (one script, Lightning's launcher starts rank 1), and
    the folder of the models rank 0 saved."""
    tmp = tmp_path_factory.mktemp("ddp")
    script = tmp / "ddp_run.py"
    script.write_text(textwrap.dedent(SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp))))
    frame().to_parquet(tmp / "frame.parquet")
    (tmp / "parts").mkdir()  # three files, series s2 in the first two: each rank reads the ids of its files
    whole = frame()
    s2 = np.flatnonzero(whole.id == "s2")
    for k, rows in enumerate(np.split(np.arange(len(whole)), [s2[len(s2) // 2], s2[-1] + 1])):
        whole.iloc[rows].to_parquet(tmp / "parts" / f"part-{k}.parquet")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in (0, 1)], tmp


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_two_processes_read_every_window_once_and_score_as_one(ranks, name):
    (first, second), folder = ranks
    one, two = first[name], second[name]
    assert one["world"] == two["world"] == 2
    # training: the same number of steps on both ranks, every window once, batches split in two
    assert len(one["read"]["train"]) == len(two["read"]["train"]) == one["steps"] == two["steps"]
    trained = [i for rank in (one, two) for batch in rank["read"]["train"] for i in batch]
    single = Forecaster.load(folder / name)
    windows = single.training_summary.budget["train_windows"]
    assert sorted(trained) == list(range(windows))
    # validation: each rank a contiguous share, together every window once, no padding
    val = [sorted(i for v in rank["read"]["val"] for i in v) for rank in (one, two)]
    assert val[0] and val[1] and sorted(val[0] + val[1]) == list(range(len(val[0]) + len(val[1])))
    assert max(val[0]) < min(val[1])
    # the epoch's losses are over all windows, the same on both ranks; the logged val_loss that early
    # stopping watches is the same mean (Lightning's own synced mean truncated the window count)
    assert one["losses"] == two["losses"] and np.isfinite(one["losses"]).all()
    assert one["logged_val_loss"] == two["logged_val_loss"] == pytest.approx(one["losses"][-1][1], rel=1e-6)
    # predict and backtest: on both ranks what one process gives with the saved model
    expected = single.predict(frame())
    result = backtest(single, frame(), **BACKTEST)
    for rank in (one, two):
        np.testing.assert_allclose(rank["forecast"], expected["mean"], rtol=1e-6, atol=1e-6)
        for source in ("from_frame", "from_parquet", "from_parquet_folder"):  # each rank forecast its own series
            got = pd.read_json(io.StringIO(rank[source]))
            assert list(got.item_id) == list(expected.item_id) and (got.timestamp == expected.timestamp).all()
            np.testing.assert_allclose(got["mean"], expected["mean"], rtol=1e-6, atol=1e-6)
        assert rank["windows"] == len(result.errors)
        np.testing.assert_allclose(rank["summary"], result.summary.value, rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_the_ranks_gradient_is_the_global_batchs_so_ddp_trains_as_one_process(ranks):
    """DLinear (no dropout): two processes, each averaging the loss over its own part of every batch
    (parts with different numbers of observed targets: the frame has gaps), forecast as the model one
    process trains on the same batches. Measured: 2.6e-4 apart at most (Adam turns the float noise of
    near-zero gradients into steps of about the learning rate), 2.8e-3 with each rank's loss left
    unweighted."""
    single = Forecaster("dlinear", **settings("dlinear"), trainer_kwargs={"enable_progress_bar": False,
                                                                          "logger": False}).fit(frame(), **COLUMNS)
    (first, _), _ = ranks
    np.testing.assert_allclose(first["dlinear"]["forecast"], single.predict()["mean"], rtol=0, atol=1e-3)


@pytest.mark.slow
def test_a_save_that_fails_in_process_0_raises_in_every_process(ranks):
    (first, second), _ = ranks
    assert first["save_error"].startswith("ValueError: ") and "not_a_model" in first["save_error"]
    assert second["save_error"] == f"RuntimeError: process 0 failed ({first['save_error']}); its traceback is in its output"


@pytest.mark.slow
def test_an_error_in_one_processs_series_is_raised_in_every_process(ranks):
    (first, second), _ = ranks
    assert second["series_error"].startswith("ValueError: duplicate timestamps in item 's4'")
    assert first["series_error"] == \
        f"RuntimeError: process 1 failed ({second['series_error']}); its traceback is in its output"
