"""The vectorised read (:func:`tsrec.data.frame.read_targets`): many items at once give what each
item read alone gives, and the row placement puts other columns on the same steps."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.data import canonicalize, future_index, time_features
from tsrec.data.frame import read_targets
from tsrec.data.time_features import future_indexes, panel_time_features


def _items(rng: np.random.Generator, freq: str, tz: str | None = None) -> pd.DataFrame:
    """A long frame of 12 items of different lengths and starts at ``freq``: a few missing steps,
    a NaN value, rows shuffled."""
    frames = []
    for i in range(12):
        start = pd.Timestamp("2021-03-20", tz=tz) + i * pd.tseries.frequencies.to_offset(freq)
        index = pd.date_range(start, periods=30 + 7 * i, freq=freq)
        keep = np.ones(len(index), bool)
        keep[rng.choice(np.arange(1, len(index) - 1), size=i % 3, replace=False)] = False  # a few missing steps
        values = rng.normal(size=len(index))
        values[5] = np.nan
        frames.append(pd.DataFrame({"id": f"item{i}", "time": index[keep], "y": values[keep]}))
    frame = pd.concat(frames, ignore_index=True)
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


@pytest.mark.parametrize(("freq", "tz"), [("h", None), ("15min", "Europe/Berlin"), ("D", None), ("MS", None),
                                          ("W-WED", None), ("D", "US/Eastern")])
def test_many_items_read_together_equal_each_item_read_alone(freq, tz):
    frame = _items(np.random.default_rng(0), freq, tz)
    panel = canonicalize(frame, time_col="time", id_col="id", target_col="y")
    assert panel.freq == pd.tseries.frequencies.to_offset(freq).freqstr
    assert panel.item_ids == tuple(sorted(frame.id.unique()))
    for series in panel.items:
        alone = canonicalize(frame[frame.id == series.item_id], freq=panel.freq, time_col="time", id_col="id",
                             target_col="y").items[0]
        rows = frame[frame.id == series.item_id].sort_values("time")
        expected = pd.date_range(rows.time.iloc[0], rows.time.iloc[-1], freq=panel.freq)
        assert series.index.equals(expected) and alone.index.equals(expected)
        np.testing.assert_array_equal(series.values, alone.values)
        np.testing.assert_array_equal(series.observed, alone.observed)
        at = expected.get_indexer(rows.time)
        np.testing.assert_array_equal(series.values[at, 0], rows.y.to_numpy())


@pytest.mark.parametrize("last", [1, 4, 31, 200])
def test_reading_the_last_rows_equals_reading_each_items_tail(last):
    frame = _items(np.random.default_rng(0), "h")  # rows shuffled, a few missing steps
    frame.loc[frame.time == frame.time.min(), "y"] = 1.5  # an early row, kept only when last reaches it
    panel = canonicalize(frame, time_col="time", id_col="id", target_col="y")
    latest = frame.sort_values("time").groupby("id").tail(last)
    expected = canonicalize(latest, freq=panel.freq, time_col="time", id_col="id", target_col="y")
    got, placement = read_targets(frame, freq=panel.freq, time_col="time", id_col="id", target_col="y", last=last)
    assert got.item_ids == expected.item_ids == panel.item_ids
    for series, want in zip(got.items, expected.items):
        assert series.index.equals(want.index)
        np.testing.assert_array_equal(series.values, want.values)
    assert len(placement.rows) == len(latest) and set(placement.rows) == set(latest.index)


def test_predict_reads_each_series_last_context_only():
    frame = _items(np.random.default_rng(3), "h")
    forecaster = Forecaster("dlinear", prediction_length=2, context_length=8, max_steps=1, val_windows=0,
                            trainer_kwargs={"enable_progress_bar": False, "logger": False})
    forecaster.fit(frame, time_col="time", id_col="id", target_col="y")
    recent = frame.sort_values("time").groupby("id").tail(8)
    pd.testing.assert_frame_equal(forecaster.predict(frame), forecaster.predict(recent))
    early = frame.loc[[frame.time.idxmin()]]  # a second row at an early timestamp: before every context
    pd.testing.assert_frame_equal(forecaster.predict(pd.concat([frame, early])), forecaster.predict(recent))


def test_placement_puts_every_row_on_its_step():
    frame = _items(np.random.default_rng(1), "h")
    panel, placement = read_targets(frame, time_col="time", id_col="id", target_col="y")
    marks = np.arange(len(frame), dtype=np.float64)[:, None]  # [R, 1]: each row's position in the frame
    for series, placed in zip(panel.items, placement.per_item(placement.on_grid(marks))):
        found = placed[~np.isnan(placed[:, 0]), 0].astype(int)
        rows = frame.loc[found]
        assert (rows.id == series.item_id).all()
        np.testing.assert_array_equal(series.index.get_indexer(rows.time), np.flatnonzero(~np.isnan(placed[:, 0])))


def test_items_at_different_frequencies_are_named():
    hourly = pd.DataFrame({"id": "a", "time": pd.date_range("2021-01-01", periods=10, freq="h"), "y": 1.0})
    weekly = pd.DataFrame({"id": "b", "time": pd.date_range("2021-01-01", periods=10, freq="W-MON"), "y": 1.0})
    with pytest.raises(ValueError, match=r"different frequencies \('h' in item 'a', 'W-MON' in item 'b'\)"):
        canonicalize(pd.concat([hourly, weekly]), time_col="time", id_col="id", target_col="y")


def test_weeks_on_different_weekdays_are_different_frequencies():
    frames = [pd.DataFrame({"id": name, "time": pd.date_range(start, periods=6, freq="7D"), "y": 1.0})
              for name, start in (("a", "2021-01-04"), ("b", "2021-01-05"))]  # a Monday, a Tuesday
    with pytest.raises(ValueError, match="'W-MON' in item 'a', 'W-TUE' in item 'b'"):
        canonicalize(pd.concat(frames), time_col="time", id_col="id", target_col="y")



@pytest.mark.parametrize("freqs, period", [(("W-SUN", "W-MON"), "W"), (("MS", "ME"), "M"), (("QS-JAN", "QE-DEC"), "Q")])
def test_one_period_dated_differently_gets_the_line_that_dates_it_one_way(freqs, period):
    """Stores whose weeks end on different days, months dated by their start or end: the error gives
    the line that dates every row by its period's first day, and that line makes the frame fit
    (other mixes keep the advice to resample)."""
    df = pd.concat([pd.DataFrame({"id": name, "time": pd.date_range("2020-01-01", periods=12, freq=freq), "y": 1.0})
                    for name, freq in zip("ab", freqs)])
    line = f"df['time'] = df['time'].dt.to_period('{period}').dt.start_time"
    with pytest.raises(ValueError, match=r"dated differently: date every row by its \w+'s first day, "
                       + re.escape(line)):
        canonicalize(df, time_col="time", id_col="id", target_col="y")
    exec(line, {"df": df})
    assert len(canonicalize(df, time_col="time", id_col="id", target_col="y").items) == 2
    hourly = pd.DataFrame({"id": "a", "time": pd.date_range("2021-01-01", periods=10, freq="h"), "y": 1.0})
    with pytest.raises(ValueError, match=r"\); resample them to one frequency and pass freq=\.\.\.$"):
        canonicalize(pd.concat([hourly, df[df.id == "b"]]), time_col="time", id_col="id", target_col="y")

def test_ids_equal_as_text_are_one_item_and_missing_ids_are_named():
    time = pd.date_range("2021-01-01", periods=4, freq="h")
    frame = pd.DataFrame({"id": [1, 1, "1", "1"], "time": time, "y": [1.0, 2, 3, 4]})
    panel = canonicalize(frame, time_col="time", id_col="id", target_col="y")
    assert panel.item_ids == ("1",) and len(panel.items[0]) == 4
    frame.loc[2, "id"] = None
    with pytest.raises(ValueError, match=r"id_col 'id' is missing \(NaN/None\) in 1 rows, e\.g\. row 2; .*fillna"):
        canonicalize(frame, time_col="time", id_col="id", target_col="y")


@pytest.mark.parametrize(("freq", "tz"), [("h", None), ("15min", "Europe/Berlin"), ("MS", None)])
def test_panel_time_features_equal_each_item_alone(freq, tz, monkeypatch):
    calendar = importlib.import_module("tsrec.data.time_features")  # the module, not the function of that name
    monkeypatch.setattr(calendar, "BLOCK", 7)  # the gather in many blocks
    panel = canonicalize(_items(np.random.default_rng(2), freq, tz), time_col="time", id_col="id", target_col="y")
    indexes = [s.index for s in panel.items]
    together = np.split(panel_time_features(panel.stamps, panel.calendar), panel.offsets[1:-1])
    for index, features in zip(indexes, together):
        np.testing.assert_array_equal(features, time_features(index, panel.calendar))
    lasts = pd.DatetimeIndex([s.index[-1] for s in panel.items])
    expected = [future_index(last, panel.calendar, 5) for last in lasts]
    assert future_indexes(lasts, panel.calendar, 5).equals(expected[0].append(expected[1:]))


def test_a_covariate_beyond_float32_once_scaled_names_its_item_and_step():
    """Read as it is (far_values='keep'), a covariate value beyond float32 once scaled is an error
    naming it; by default it is far from the training distribution, so read as missing and named."""
    from tsrec.data.scaling import OutlierWarning

    frame = _items(np.random.default_rng(3), "h").sort_values(["id", "time"], ignore_index=True)
    frame["x"] = np.random.default_rng(4).normal(size=len(frame))
    row = frame.index[frame.id == "item2"][-1]  # in the validation part: outside the training statistics
    frame.loc[row, "x"] = 1e300
    columns = {"time_col": "time", "id_col": "id", "target_col": "y", "past_covariates": ["x"]}
    with pytest.raises(ValueError, match=rf"covariate 'x' of item 'item2' at {frame.time[row]}: the value 1e\+300"):
        Forecaster("dlinear", prediction_length=2, max_steps=1, far_values="keep").fit(frame, **columns)
    with pytest.warns(OutlierWarning, match=rf"covariate 'x' of item 'item2' at {frame.time[row]} \(1e\+300\)"):
        Forecaster("dlinear", prediction_length=2, max_steps=1).fit(frame, **columns)


def test_statistics_and_scaling_in_blocks_of_series_equal_one_pass(monkeypatch):
    from tsrec.data import StandardScaler, scaling
    from tsrec.data.windows import stored_panel

    panel = canonicalize(_items(np.random.default_rng(6), "h"), time_col="time", id_col="id", target_col="y")
    values, observed = [s.values for s in panel.items], [s.observed for s in panel.items]
    ends = [len(v) - 3 for v in values]
    steps = (panel.stamps, np.diff(panel.offsets))
    whole = StandardScaler.fit(values, observed, ends)
    whole_stored = stored_panel(panel, whole, None, steps)
    monkeypatch.setattr(scaling, "BLOCK_STEPS", 50)  # a few series per block, one series alone at times
    assert len(scaling.item_blocks(np.diff(panel.offsets))) > 4
    blocked = StandardScaler.fit(values, observed, ends)
    np.testing.assert_allclose(blocked.loc, whole.loc, rtol=1e-12)
    np.testing.assert_allclose(blocked.scale, whole.scale, rtol=1e-12)
    blocked_stored = stored_panel(panel, blocked, None, steps)
    np.testing.assert_array_equal(blocked_stored.observed, np.concatenate(observed))
    np.testing.assert_allclose(blocked_stored.target, whole_stored.target, rtol=1e-6)
    expected = np.where(np.concatenate(observed), whole.transform(np.concatenate(values), np.repeat(
        np.arange(len(values)), np.diff(panel.offsets))), 0.0)
    np.testing.assert_array_equal(whole_stored.target, expected.astype(np.float32))
    panel.items[7].values[4, 0], panel.items[7].observed[4, 0] = 1e300, True  # beyond float32 once scaled
    name = panel.items[7].item_id
    with pytest.raises(ValueError, match=rf"item '{name}' \(column 'y'\) at {panel.items[7].index[4]}: the value 1e\+300"):
        stored_panel(panel, blocked, None, steps)


@pytest.mark.parametrize(("freq", "tz"), [("h", None), ("15min", "Europe/Berlin"), ("MS", None)])
def test_stamps_and_tails_of_items_on_shared_grids_are_each_items_own_steps(freq, tz):
    """A panel's items share one grid (no index sliced per item): its stamps, and those of its tail
    and of a panel joined from two (two grids), are each item's own timestamps laid end to end."""
    import dataclasses

    first, second = (canonicalize(_items(np.random.default_rng(seed), freq, tz), time_col="time", id_col="id",
                                  target_col="y") for seed in (7, 8))
    joined = dataclasses.replace(first, items=first.items + second.items)  # items on two grids
    for panel in (first, joined, first.tail(33), joined.tail(33)):
        own = [s.index for s in panel.items]
        assert panel.stamps.equals(own[0].append(own[1:]).as_unit("ns"))
        assert str(panel.stamps.tz) == str(tz) and panel.stamps.unit == "ns"
    tail = joined.tail(33)
    for item, cut in zip(joined.items, tail.items):
        assert cut.index.equals(item.index[-33:]) and len(cut) == min(len(item), 33)
        np.testing.assert_array_equal(cut.values, item.values[-33:])
    assert tail.tail(33) is tail and len({id(s.grid) for s in tail.items}) == 1  # one new grid of the kept steps


def test_read_before_slices_what_a_read_of_the_rows_before_each_cut_gives():
    """``Read.before(ends)``: every series' first ``ends[i]`` steps, targets and covariates, equal to
    reading the frame's rows before each series' cut again (the cut a step with a row, so that the
    re-read's grid ends where the slice does), without reading anything."""
    from tsrec.config import CovariateConfig
    from tsrec.data import source
    from tsrec.data.schema import Schema

    frame = _items(np.random.default_rng(1), "h")
    frame["x"] = np.arange(len(frame), dtype=float)
    frame["s"] = frame.id.str.len().astype(float)
    schema = Schema("time", "id", "y", CovariateConfig(past=("x",), static=("s",)))
    read = source.read(frame, schema, categorical=(), freq=None, gaps="warn")
    rng = np.random.default_rng(2)
    ends = []
    for series in read.panel.items:
        rows = set(frame.loc[frame.id == series.item_id, "time"])
        ends.append(int(rng.choice([p for p, t in enumerate(series.index) if t in rows and p > 0])))
    cut = read.before(ends)
    stamps = pd.Series(dict(zip(read.panel.item_ids, [s.index[e] for s, e in zip(read.panel.items, ends)])))
    again = source.read(frame[frame.time < frame.id.map(stamps)], schema, categorical=(), freq="h", gaps="warn")
    assert cut.panel.item_ids == again.panel.item_ids
    for a, b, da, db in zip(cut.panel.items, again.panel.items, cut.covariates.dynamic, again.covariates.dynamic):
        assert a.index.equals(b.index)
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.observed, b.observed)
        np.testing.assert_array_equal(da, db)
    np.testing.assert_array_equal(cut.panel.stamps, again.panel.stamps)
    np.testing.assert_array_equal(cut.covariates.static_real, again.covariates.static_real)
    assert read.before([len(s) for s in read.panel.items]).panel is read.panel  # nothing cut: the panel itself
    with pytest.raises(ValueError, match="would keep no step"):
        read.before([0] * len(read.panel.items))


def test_a_frame_indexed_by_series_and_time_reads_as_the_long_frame_it_is():
    """AutoGluon's TimeSeriesDataFrame (and df.set_index(["item_id", "timestamp"])) is a frame with a
    MultiIndex of series and timestamps: fit, predict, its future covariates and a backtest read it
    as its reset_index(); an unnamed MultiIndex gets the line that makes its levels columns."""
    from tsrec.evaluation import backtest

    rng = np.random.default_rng(0)
    stamps = pd.date_range("2024-01-01", periods=60, freq="D")
    flat = pd.concat([pd.DataFrame({"item_id": key, "timestamp": stamps, "promo": rng.integers(0, 2, stamps.size),
                                    "target": 5 + key + np.sin(np.arange(60)) + 0.1 * rng.standard_normal(60)})
                      for key in (1, 2)], ignore_index=True)
    ahead = flat.assign(timestamp=flat["timestamp"] + pd.Timedelta(days=60))[["item_id", "timestamp", "promo"]]
    indexed = flat.set_index(["item_id", "timestamp"])
    got = {}
    frames = {"flat": (flat, ahead), "indexed": (indexed, ahead.set_index(["item_id", "timestamp"]))}
    for name, (frame, future) in frames.items():
        forecaster = Forecaster("ridge", prediction_length=3).fit(frame, future_covariates=["promo"])
        got[name] = (forecaster.predict(frame, future_covariates=future),
                     backtest(forecaster, frame, n_windows=2, baselines=()).errors)
    pd.testing.assert_frame_equal(got["flat"][0], got["indexed"][0])
    pd.testing.assert_frame_equal(got["flat"][1], got["indexed"][1])
    with pytest.raises(ValueError, match=r"MultiIndex of levels \[None, None\].*df = df.reset_index\(\)"):
        Forecaster("naive", prediction_length=3).fit(indexed.rename_axis([None, None]))
