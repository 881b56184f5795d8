"""Long frames in AutoGluon's (item_id, timestamp, target) and Nixtla's (unique_id, ds, y) column names
read without naming the columns (tsrec.data.schema.Schema.conventional); names given always win."""

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.data import canonicalize
from tsrec.data.schema import Schema
from tsrec.evaluation import backtest

NIXTLA = {"id": "unique_id", "time": "ds", "target": "y"}
AUTOGLUON = {"id": "item_id", "time": "timestamp", "target": "target"}


def long_frame(names: dict[str, str], steps: int = 24 * 6) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = pd.date_range("2024-01-01", periods=steps, freq="h")
    return pd.concat([pd.DataFrame({names["id"]: item, names["time"]: t,
                                    names["target"]: level + np.sin(np.arange(steps) * 2 * np.pi / 24)
                                    + 0.1 * rng.standard_normal(steps)})
                      for item, level in (("a", 5.0), ("b", 9.0))], ignore_index=True)


@pytest.mark.parametrize("names, tool", [(NIXTLA, "Nixtla"), (AUTOGLUON, "AutoGluon")])
def test_a_conventional_long_frame_needs_no_column_names(names, tool):
    df = long_frame(names)
    f = Forecaster("seasonal_naive", prediction_length=24).fit(df)
    assert f.columns == {"time_col": names["time"], "id_col": names["id"], "target_col": names["target"]}
    assert f.fitted.schema.convention == tool
    assert tool in f.fitted.schema.note and repr(names["id"]) in f.fitted.schema.note
    forecast = f.predict()
    assert sorted(forecast["item_id"].unique()) == ["a", "b"] and len(forecast) == 48
    named = Forecaster("seasonal_naive", prediction_length=24).fit(
        df, id_col=names["id"], time_col=names["time"], target_col=names["target"])
    pd.testing.assert_frame_equal(forecast, named.predict())
    pd.testing.assert_frame_equal(f.predict(df), forecast)


def test_backtests_and_their_refits_read_the_convention():
    df = long_frame(NIXTLA)
    f = Forecaster("seasonal_naive", prediction_length=24).fit(df)
    for refit_every in (None, 1):  # the refits cut the frame at each origin by its time column
        result = backtest(f, df, n_windows=2, refit_every=refit_every, baselines=("naive",))
        named = backtest(f, df, n_windows=2, refit_every=refit_every, baselines=("naive",),
                         id_col="unique_id", time_col="ds", target_col="y")
        assert len(result.errors) == 2 * 2 * 24
        pd.testing.assert_frame_equal(result.errors, named.errors)


def test_names_given_win_over_the_convention():
    df = long_frame(NIXTLA).assign(z=lambda d: 2 * d["y"])
    f = Forecaster("seasonal_naive", prediction_length=24).fit(df, target_col="z")
    assert f.columns == {"time_col": "ds", "id_col": "unique_id", "target_col": "z"}
    np.testing.assert_allclose(f.predict()["mean"].to_numpy(),
                               2 * Forecaster("seasonal_naive", prediction_length=24).fit(df.drop(columns="z"))
                               .predict()["mean"].to_numpy())
    # every role named, or an id column of another name: no convention at all
    named = Schema("ds", "unique_id", "y")
    assert named.conventional(df.columns) == named and named.conventional(df.columns).convention is None
    other = Schema(id_col="store")
    assert other.conventional([*df.columns, "store"]) == other and other.conventional(df.columns).convention is None


@pytest.mark.parametrize("names, tool", [(NIXTLA, "Nixtla"), (AUTOGLUON, "AutoGluon")])
def test_naming_the_conventional_id_column_alone_reads_the_rest_by_the_convention(names, tool, tmp_path):
    """AutoGluon's ``from_data_frame(df, id_column="item_id")`` finds "timestamp" and "target" by itself: so does
    ``fit(df, id_col="item_id")`` (it asked for time_col before, naming the convention in its error)."""
    df = long_frame(names)
    f = Forecaster("seasonal_naive", prediction_length=24).fit(df, id_col=names["id"])
    assert f.columns == {"time_col": names["time"], "id_col": names["id"], "target_col": names["target"]}
    assert f.fitted.schema.convention == tool
    pd.testing.assert_frame_equal(f.predict(), Forecaster("seasonal_naive", prediction_length=24).fit(df).predict())
    pytest.importorskip("pyarrow")
    df.to_parquet(tmp_path / "data.parquet")
    parquet = Forecaster("seasonal_naive", prediction_length=24).fit(tmp_path / "data.parquet", id_col=names["id"])
    pd.testing.assert_frame_equal(parquet.predict(), f.predict())


def test_a_wide_frame_is_not_read_as_a_convention():
    wide = pd.DataFrame({"y": np.arange(48.0), "target": np.arange(48.0)},
                        index=pd.date_range("2024-01-01", periods=48, freq="h"))
    assert Schema().conventional(wide.columns) == Schema()
    assert canonicalize(wide).layout == "wide"


def test_both_conventions_at_once_is_an_error_asking_for_names():
    df = long_frame(NIXTLA).assign(item_id="x", timestamp=lambda d: d["ds"], target=1.0)
    with pytest.raises(ValueError, match="both AutoGluon and Nixtla.*id_col=..., time_col=..., target_col"):
        Forecaster("seasonal_naive", prediction_length=24).fit(df)


def test_canonicalize_and_the_time_index_read_the_convention():
    df = long_frame(AUTOGLUON)
    panel = canonicalize(df)
    assert panel.layout == "long" and panel.item_ids == ("a", "b")
    indexed = canonicalize(df.set_index("timestamp"))  # id and target by name, the times from the index
    assert indexed.item_ids == ("a", "b") and len(indexed.items[0].index) == 24 * 6


def test_long_parquet_data_in_a_convention(tmp_path):
    pytest.importorskip("pyarrow")
    df = long_frame(NIXTLA)
    df.to_parquet(tmp_path / "data.parquet")
    f = Forecaster("seasonal_naive", prediction_length=24).fit(tmp_path / "data.parquet")
    assert f.columns["id_col"] == "unique_id"
    pd.testing.assert_frame_equal(f.predict(), Forecaster("seasonal_naive", prediction_length=24).fit(df).predict())
