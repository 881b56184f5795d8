"""What a worker of a distributed prediction or backtest does: its part of the series, from a frame or
Parquet, with the saved model loaded once; the parts together equal one process's results."""

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.data.source import rows_of
from tsrec.collective import split_ids
from tsrec.distributed.partitions import backtest_part, load_model, predict_part
from tsrec.evaluation import backtest, score_backtest

COLUMNS = {"id_col": "id", "time_col": "time", "target_col": "y"}
NAIVE = ("naive", "seasonal_naive")


def long_frame(n_series=7, length=120):
    rng = np.random.default_rng(3)
    parts = []
    for k in range(n_series):
        t = np.arange(length - 3 * k)
        y = (k + 1) * np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(len(t)) + k
        parts.append(pd.DataFrame({"id": f"s{k}", "time": pd.date_range("2024-01-01", periods=len(t), freq="h"),
                                   "y": y}))
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=0)  # rows in any order


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "dlinear"
    df = long_frame()
    Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1,
               trainer_kwargs={"enable_progress_bar": False, "logger": False}).fit(df, **COLUMNS).save(path)
    return path, df


def test_split_ids_covers_every_id_once_in_text_order():
    ids = ["b", 10, "a", 2, "b", "c", 10]
    parts = split_ids(ids, 3)
    assert [list(p) for p in parts] == [[10, 2], ["a", "b"], ["c"]]
    assert [list(p) for p in split_ids(["x"], 4)] == [["x"]]
    with pytest.raises(ValueError, match="parts must be an integer >= 1"):
        split_ids(ids, 0)


@pytest.mark.parametrize("form", ["frame", "parquet"])
def test_predictions_of_the_parts_are_one_predict(saved, form, tmp_path):
    path, df = saved
    source = df
    if form == "parquet":
        source = tmp_path / "data.parquet"
        df.sort_values(["id", "time"]).to_parquet(source, row_group_size=100)
    parts = split_ids(df.id, 3)
    forecasts = pd.concat([predict_part(path, rows_of(source, "id", ids)) for ids in parts], ignore_index=True)
    whole = Forecaster.load(path).predict(df)
    pd.testing.assert_frame_equal(forecasts, whole, rtol=1e-6)


def test_backtest_errors_of_the_parts_score_as_one_backtest(saved):
    path, df = saved
    errors = [backtest_part(path, rows_of(df, "id", ids), n_windows=3, stride=5, baselines=NAIVE)
              for ids in split_ids(df.id, 2)]
    scored = score_backtest(load_model(path), pd.concat(errors, ignore_index=True))
    whole = backtest(Forecaster.load(path), df, n_windows=3, stride=5, baselines=NAIVE, **COLUMNS)
    assert len(scored.errors) == len(whole.errors)
    pd.testing.assert_frame_equal(scored.summary, whole.summary, rtol=1e-6)
    pd.testing.assert_frame_equal(scored.skill, whole.skill, rtol=1e-6)
    with pytest.raises(ValueError, match="refit_every is not supported"):
        backtest_part(path, df, refit_every=2)


def test_the_model_is_loaded_once_per_process_until_saved_again(saved, tmp_path):
    path, df = saved
    assert load_model(path) is load_model(str(path))
    copy = tmp_path / "copy"
    load_model(path).save(copy)
    first = load_model(copy)
    assert load_model(copy) is first
    first.save(copy)  # saved again: a new forecaster.json
    assert load_model(copy) is not first
    with pytest.raises(FileNotFoundError, match="no saved model in"):
        load_model(tmp_path / "missing")


def test_a_wide_model_is_refused_with_what_to_call_instead():
    from tsrec.distributed.partitions import id_column

    index = pd.date_range("2024-01-01", periods=100, freq="h")
    wide = pd.DataFrame({"a": np.sin(np.arange(100) / 4), "b": np.cos(np.arange(100) / 4)}, index=index)
    forecaster = Forecaster("naive", prediction_length=4).fit(wide)
    with pytest.raises(ValueError, match="wide frame.*call Forecaster.predict"):
        id_column(forecaster)
