"""Calendar frequencies read from the data, declared frequencies the data contradict, and the
layouts ``predict`` takes (issue #28: business calendars, ids and layouts).

Property tests (hypothesis, deterministic): random starts, lengths and frequencies among B, D,
W-XXX, MS, ME, QS, QE, h and 15min, several series with rows missing (holidays, for B), rows in
any order: the frequency is inferred as the one the rows were drawn at, every series lies on its
grid, and forecasts fall on it (business days only for B). A frequency declared finer than the
data, or ``D`` on business days, is refused naming the frequency the data look like and rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.tseries.frequencies import to_offset

from tsrec import Forecaster
from tsrec.data import canonicalize
from tsrec.data.calendar import Calendar
from tsrec.data.time_features import future_indexes, metric_season, normalize_freq, seasonality

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
WEEKLY = tuple(f"W-{day}" for day in ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"))
FREQS = ("B", "D", *WEEKLY, "MS", "ME", "QS", "QE", "h", "15min")
LONG = {"time_col": "ts", "id_col": "id", "target_col": "y"}


@st.composite
def calendar_frames(draw, freqs=FREQS) -> tuple[pd.DataFrame, str]:
    """A long frame of 1-3 series at a random ``freq`` of ``freqs``, each from its own start, with
    up to a tenth of its inner rows missing (for ``D`` weekdays only, so that the weekends stay
    calendar days), rows shuffled; and that freq."""
    freq = draw(st.sampled_from(freqs))
    frames = []
    for name in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)):
        day = draw(st.integers(0, 3 * 365))
        start = pd.Timestamp("2019-01-01") + pd.Timedelta(days=day)
        if freq in ("h", "15min"):
            start += draw(st.integers(0, 95)) * pd.Timedelta("15min")
        index = pd.date_range(start, periods=draw(st.integers(25, 80)), freq=freq)
        inner = np.arange(1, len(index) - 1)
        if freq == "D":
            inner = inner[index[inner].dayofweek < 5]
        dropped = draw(st.lists(st.sampled_from(inner.tolist()), max_size=len(index) // 10, unique=True))
        index = index.delete(dropped)
        frames.append(pd.DataFrame({"id": name, "ts": index, "y": np.arange(len(index), dtype=float)}))
    seed = draw(st.integers(0, 2**16))
    return pd.concat(frames).sample(frac=1.0, random_state=seed), freq


@SETTINGS
@given(calendar_frames())
def test_the_calendar_the_rows_were_drawn_at_is_inferred_and_forecast_on(case):
    df, freq = case
    panel = canonicalize(df, **LONG)
    assert panel.freq == normalize_freq(freq)
    for series in panel.items:
        rows = df[df.id == series.item_id].sort_values("ts")
        assert series.index.equals(pd.date_range(rows.ts.iloc[0], rows.ts.iloc[-1], freq=freq))
        assert series.observed.sum() == len(rows)
    lasts = pd.DatetimeIndex([s.index[-1] for s in panel.items])
    future = future_indexes(lasts, panel.calendar, 7)
    expected = [pd.date_range(last, periods=8, freq=freq)[1:] for last in lasts]
    assert future.equals(expected[0].append(expected[1:]))
    if freq == "B":
        assert (future.dayofweek < 5).all()


@SETTINGS
@given(calendar_frames(freqs=("B",)))
def test_calendar_days_declared_on_business_days_are_refused_naming_b(case):
    df, _ = case
    with pytest.raises(ValueError) as info:
        canonicalize(df, freq="D", **LONG)
    message = str(info.value)
    assert "freq 'D' is contradicted" in message and "(freq 'B')" in message and "pass freq='B'" in message
    friday = pd.Timestamp(message.split("(e.g. ")[1].split(" by ")[0])
    assert friday.dayofweek == 4 and friday in set(df.ts)
    with pytest.warns(UserWarning, match="contradicted"):
        assert canonicalize(df, freq="D", gaps="warn", **LONG).freq == "D"


FINER = {"B": "h", "D": "h", "W-WED": "D", "MS": "D", "ME": "D", "QS": "MS", "QE": "ME", "h": "15min",
         "15min": "5min"}


@SETTINGS
@given(calendar_frames(freqs=tuple(FINER)))
def test_a_declared_freq_finer_than_the_data_is_refused_naming_theirs(case):
    df, freq = case
    with pytest.raises(ValueError) as info:
        canonicalize(df, freq=FINER[freq], **LONG)
    message = str(info.value)
    assert f"freq {FINER[freq]!r} leaves" in message and "usually" in message
    assert f"pass freq={normalize_freq(freq)!r}" in message, message
    assert "e.g. the rows at" in message


@pytest.mark.parametrize("fine", ["h", "15min"])
def test_a_freq_twice_as_fine_as_the_data_is_refused_though_half_the_grid_has_rows(fine):
    coarse = to_offset(fine) * 2
    df = pd.DataFrame({"y": np.arange(100.0)}, index=pd.date_range("2024-01-01", periods=100, freq=coarse))
    with pytest.raises(ValueError, match=rf"leaves 49.7% .* usually 2 step\(s\) apart \(freq '{coarse.freqstr}'\)"):
        canonicalize(df, freq=fine)
    assert canonicalize(df).freq == coarse.freqstr


@SETTINGS
@given(st.integers(0, 600), st.integers(4, 40), st.integers(0, 30))
def test_month_starts_ending_on_a_month_end_name_that_row(start, length, later):
    index = pd.date_range(pd.Timestamp("1990-01-01") + pd.DateOffset(months=start), periods=length, freq="MS")
    odd = index[-1] + pd.DateOffset(months=later) + pd.offsets.MonthEnd(0)  # a month end after the last start
    df = pd.DataFrame({"y": np.arange(length + 1.0)}, index=index.append(pd.DatetimeIndex([odd])))
    for freq in (None, "MS"):
        with pytest.raises(ValueError) as info:
            canonicalize(df, freq=freq)
        message = str(info.value)
        assert message.startswith(f"timestamp {odd} in the frame does not match freq 'MS'"), message
        assert f"1 of {length + 1} rows are off that grid ({odd})" in message and "D'" not in message


def test_a_first_row_off_the_grid_of_the_others_is_the_one_named():
    index = pd.date_range("2024-01-01", periods=48, freq="h")
    df = pd.DataFrame({"y": np.arange(48.0)}, index=index).rename(index={index[0]: index[0] - pd.Timedelta("30min")})
    with pytest.raises(ValueError, match=r"timestamp 2023-12-31 23:30:00 .* 1 of 48 rows are off that grid "
                                         r"\(2023-12-31 23:30:00\)"):
        canonicalize(df, freq="h")


@pytest.mark.parametrize(("freq", "expected"), [("QS", "QS-OCT"), ("QS-JAN", "QS-OCT"), ("QS-APR", "QS-OCT"),
                                                ("QE-MAR", "QE-DEC"), ("2QS-FEB", "2QS-NOV"), ("MS", "MS")])
def test_quarters_on_one_grid_have_one_name(freq, expected):
    assert normalize_freq(freq) == expected


def test_business_days_with_an_odd_saturday_name_the_saturday():
    index = pd.bdate_range("2024-01-01", periods=60).delete([9, 30]).append(pd.DatetimeIndex(["2024-02-10"]))
    df = pd.DataFrame({"y": np.arange(len(index), dtype=float)}, index=index).sort_index()
    with pytest.raises(ValueError, match=r"timestamp 2024-02-10 00:00:00 in the frame does not match freq 'B'"):
        canonicalize(df)


def test_weekdays_of_one_week_stay_calendar_days():
    # No weekend in the span: nothing says the data skip weekends.
    df = pd.DataFrame({"y": np.arange(4.0)}, index=pd.bdate_range("2024-01-01", periods=5).delete([2]))
    assert canonicalize(df).freq == "D"


# Layouts given to predict --------------------------------------------------------------------------

def _wide(length: int = 120) -> pd.DataFrame:
    t = np.arange(length)
    return pd.DataFrame({"a": np.sin(t / 5), "b": 3 + np.cos(t / 7)},
                        index=pd.date_range("2024-01-01", periods=length, freq="h"))


def _forecaster(**options) -> Forecaster:
    return Forecaster("dlinear", prediction_length=4, context_length=16, max_epochs=1, seed=0,
                      trainer_kwargs={"enable_progress_bar": False}, **options)


@pytest.fixture(scope="module")
def wide_model() -> Forecaster:
    return _forecaster().fit(_wide())


def test_predict_reorders_the_fitted_columns(wide_model):
    expected = wide_model.predict(_wide())
    pd.testing.assert_frame_equal(wide_model.predict(_wide()[["b", "a"]]), expected)


def test_a_long_frame_given_to_a_wide_model_gets_a_pivot_predict_accepts(wide_model):
    long = _wide().rename_axis("ts").reset_index().melt(id_vars="ts", var_name="id", value_name="y")
    for frame, fix in [(long, "df.pivot(index='ts', columns='id', values='y')"),
                       (long.set_index("ts"), "df.pivot(columns='id', values='y')")]:
        with pytest.raises(ValueError) as info:
            wide_model.predict(frame)
        message = str(info.value)
        assert "fitted on a wide frame" in message and fix in message and "id_col" not in message
        pivoted = eval(fix, {"df": frame})  # the fix as written
        pd.testing.assert_frame_equal(wide_model.predict(pivoted), wide_model.predict(_wide()))
    with pytest.raises(ValueError, match=r"columns differ .* lacks the target columns \['b'\]"):
        wide_model.predict(_wide()[["a"]])


def test_a_wide_frame_given_to_a_long_model_gets_a_melt_predict_accepts():
    wide = _wide().rename_axis("ts").reset_index()
    model = _forecaster().fit(wide.melt(id_vars="ts", var_name="id", value_name="y"), time_col="ts", id_col="id")
    with pytest.raises(ValueError) as info:
        model.predict(wide)
    message = str(info.value)
    fix = "df.melt(id_vars=['ts'], var_name='id', value_name='y')"
    assert "fitted on a long frame" in message and fix in message
    assert len(model.predict(eval(fix, {"df": wide}))) == 2 * 4


def test_a_frame_without_the_fitted_timestamps_names_where_they_go(wide_model):
    with pytest.raises(ValueError, match=r"indexed by its timestamps .* df.set_index\('ts'\)"):
        wide_model.predict(_wide().rename_axis("ts").reset_index())


def test_float32_quantile_levels_are_the_levels_they_print_as():
    model = _forecaster(output="quantile", quantile_levels=np.array([0.1, 0.5, 0.9], dtype=np.float32)).fit(_wide())
    assert model.model.output.levels == (0.1, 0.5, 0.9)
    given = model.predict(quantiles=[0.1, 0.9])
    narrow = model.predict(quantiles=np.array([0.1, 0.9], dtype=np.float32))
    assert list(narrow.columns) == list(given.columns) and "0.1" in narrow.columns
    pd.testing.assert_frame_equal(narrow, given)


@pytest.mark.parametrize(("freq", "season"), [("h", 24), ("3h", 8), ("5h", 2), ("MS", 12), ("2MS", 6), ("5MS", 2),
                                              ("QS-OCT", 4), ("YS", 2), ("5YS", 2), ("7min", 2), ("15min", 96)])
def test_the_season_of_a_multiple_step_is_gluonts_and_logs_nothing(freq, season, caplog):
    """A multiple of a step divides its unit's season where it can (GluonTS's rule); where it cannot
    (five hours, five years) the season is the smallest, 2, without GluonTS's logged warning, which a
    fit on data every five years printed dozens of times."""
    with caplog.at_level("WARNING"):
        assert seasonality(Calendar.of(freq)) == season
    assert caplog.records == []


@pytest.mark.parametrize(("freq", "season"), [("h", 24), ("5h", 1), ("D", 7), ("W-SUN", 52), ("MS", 12),
                                              ("QS-OCT", 4), ("YS", 1), ("5YS", 1)])
def test_a_seasonal_scale_has_no_season_where_the_calendar_has_none(freq, season):
    """MASE's scale (and auto's validation scale): the calendar's season, 1 (the last value) where it
    has none, as the field scores yearly data; the models' season stays at least 2."""
    assert metric_season(Calendar.of(freq)) == season
    assert seasonality(Calendar.of(freq)) == max(season, 2)


def test_sensor_data_sampled_faster_than_once_a_second_fit_forecast_and_load(tmp_path):
    """A series every 100 ms: fitted, forecast on its own grid, scored in a backtest and loaded
    again (it was refused for want of GluonTS calendar features)."""
    from tsrec.evaluation import backtest

    index = pd.date_range("2024-05-01 12:00:00", periods=400, freq="100ms")
    t = np.arange(len(index))
    df = pd.DataFrame({"y": np.sin(2 * np.pi * t / 20) + 0.01 * t}, index=index)
    f = Forecaster("ridge", prediction_length=10).fit(df)
    assert f.freq == "100ms"
    forecast = f.predict()
    assert forecast.timestamp.tolist() == list(pd.date_range(index[-1], periods=11, freq="100ms")[1:])
    np.testing.assert_allclose(forecast["mean"], np.sin(2 * np.pi * t[-10:] / 20 + 2 * np.pi * 10 / 20)
                               + 0.01 * (t[-10:] + 10), atol=0.05)
    f.save(tmp_path / "m")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").predict(), forecast)
    result = backtest(f, df, n_windows=3, baselines=("naive",))
    assert len(result.errors) == 3 * 10
    assert result.skill.set_index("baseline").loc["naive", "mse_ratio"] < 0.1
