"""Data recorded only in opening or trading hours (sessions): recognised from the rows, declarable
as ``freq``, forecast only into open hours, in predict, backtest, plots, save/load and the errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pandas.tseries.frequencies import to_offset

from tsrec import Forecaster
from tsrec.data import Calendar, canonicalize, normalize_freq, seasonality
from tsrec.data.time_features import calendar_cycles, future_index, step_duration
from tsrec.evaluation import backtest
from tsrec.models.naive import season_for

QUIET = {"max_epochs": 1, "trainer_kwargs": {"enable_progress_bar": False}}


def session_frame(step: str, start: str, end: str, *, weekdays: int = 7, days: int = 35, tz: str | None = None,
                  first: str = "2024-01-01") -> pd.DataFrame:
    """A shop's or a market's records: one row per ``step`` from ``start`` to ``end`` (excluded,
    wall clock) on the first ``weekdays`` days of each week (5: Monday to Friday), a daily cycle."""
    stamps = pd.date_range(first, periods=days * pd.Timedelta(days=1) // pd.Timedelta(to_offset(step)), freq=step)
    time = stamps - stamps.normalize()
    stamps = stamps[(time >= pd.Timedelta(f"{start}:00")) & (time < pd.Timedelta(f"{end}:00"))
                    & (stamps.dayofweek < weekdays)]
    if tz is not None:
        stamps = stamps.tz_localize(tz)
    hours = stamps.hour + stamps.minute / 60
    noise = 0.1 * np.random.default_rng(0).standard_normal(len(stamps))
    return pd.DataFrame({"sales": 10 + np.sin(2 * np.pi * hours / 24) + noise}, index=stamps.rename("ts"))


def in_hours(stamps: pd.Series | pd.DatetimeIndex, start: str, end: str) -> bool:
    times = pd.DatetimeIndex(stamps)
    time = times - times.normalize()
    return bool(((time >= pd.Timedelta(f"{start}:00")) & (time < pd.Timedelta(f"{end}:00"))).all())


@pytest.mark.parametrize(
    ("step", "start", "end", "weekdays", "freq"),
    [
        ("h", "06:00", "22:00", 7, "h 06:00-22:00"),
        ("5min", "07:00", "21:00", 7, "5min 07:00-21:00"),
        ("h", "09:00", "17:00", 5, "h 09:00-17:00 Mon-Fri"),
        ("5min", "09:30", "16:00", 5, "5min 09:30-16:00 Mon-Fri"),
        ("5min", "00:00", "24:00", 5, "5min 00:00-24:00 Mon-Fri"),
    ],
)
def test_sessions_are_read_from_the_rows_and_forecast_only_in_open_hours(step, start, end, weekdays, freq) -> None:
    """Hourly 06:00-22:00 was forecast through the night; weekday sessions were refused with advice
    (resample, gaps='warn') that then forecast nights and weekends."""
    df = session_frame(step, start, end, weekdays=weekdays)
    horizon = 3 * len(pd.date_range(f"2024-01-01 {start}", f"2024-01-01 {end}" if end != "24:00" else "2024-01-02",
                                    freq=step, inclusive="left"))  # three session days
    forecaster = Forecaster("seasonal_naive", prediction_length=horizon).fit(df)
    assert forecaster.freq == freq
    forecast = forecaster.predict(df)
    stamps = pd.DatetimeIndex(forecast["timestamp"])
    assert stamps[0] > df.index[-1] and stamps.is_monotonic_increasing and len(stamps) == horizon
    assert in_hours(stamps, start, end) and (stamps.dayofweek < weekdays).all()
    # the data end with a session: the forecast starts with the next one (Friday's close -> Monday's open)
    next_day = df.index[-1].normalize() + pd.Timedelta(days=3 if weekdays == 5 else 1)
    assert weekdays == 7 or df.index[-1].dayofweek == 4
    assert stamps[0] == next_day + pd.Timedelta(f"{start}:00")


def test_the_season_is_a_session_day_for_every_model() -> None:
    freq = "h 06:00-22:00"
    calendar = Calendar.of(freq)
    assert seasonality(calendar) == 16 and calendar_cycles(calendar) == (16.0, 112.0)
    assert calendar_cycles(Calendar.of("h 09:00-17:00 Mon-Fri")) == (8.0, 40.0)
    assert season_for(freq, (), history_length=24 * 16)[0] == 16
    df = session_frame("h", "06:00", "22:00")
    forecaster = Forecaster("seasonal_naive", prediction_length=16).fit(df)
    assert forecaster.fitted.facts.season == 16 and forecaster.fitted.facts.sub_daily  # steps of an hour
    assert step_duration(calendar) is None  # a step from 21:00 is an hour, from 22:00 the night
    # seasonal naive repeats the last session day, hour for hour
    forecast = forecaster.predict(df)["mean"].to_numpy()
    np.testing.assert_allclose(forecast, df["sales"].to_numpy()[-16:])


def test_a_session_is_declared_as_freq_or_with_pandas_business_hours() -> None:
    df = session_frame("h", "09:00", "17:00", weekdays=5)
    assert normalize_freq("h 9:00-17:00 mon-fri") == "h 09:00-17:00 Mon-Fri"
    assert normalize_freq("bh") == "h 09:00-17:00 Mon-Fri"
    assert normalize_freq(pd.offsets.CustomBusinessHour(start="07:00", end="20:00",
                                                        weekmask="Mon Tue Wed Thu Fri Sat")) == "h 07:00-20:00 Mon-Sat"
    assert normalize_freq("h 00:00-24:00") == normalize_freq("h 0:00-0:00") == "h"  # nothing closed: the plain step
    assert normalize_freq("h 17:00-17:00 Sun-Thu") == "h 17:00-17:00 Mon-Thu,Sun"  # 24 hours from 17:00
    declared = Forecaster("seasonal_naive", prediction_length=8, freq="h 09:00-17:00 Mon-Fri").fit(df)
    pd.testing.assert_frame_equal(declared.predict(df), Forecaster("seasonal_naive", prediction_length=8).fit(df)
                                  .predict(df))
    # a holiday (a weekday without rows) is a missing session day, not a new calendar
    holiday = df.drop(df.index[df.index.normalize() == pd.Timestamp("2024-01-17")])
    panel = canonicalize(holiday)
    assert panel.freq == "h 09:00-17:00 Mon-Fri" and (~panel.items[0].observed).sum() == 8
    # a session across midnight: the weekdays are the days it opens
    night = session_frame("h", "00:00", "24:00")
    opened = (night.index - pd.Timedelta(hours=18)).dayofweek  # the weekday the night's session opened
    night = night[((night.index.hour >= 18) | (night.index.hour < 2)) & (opened < 5)]
    assert canonicalize(night).freq == "h 18:00-02:00 Mon-Fri"
    assert list(future_index(pd.Timestamp("2024-01-05 01:00"), Calendar.of("h 18:00-02:00 Mon-Fri"), 2)) == \
        [pd.Timestamp("2024-01-05 18:00"), pd.Timestamp("2024-01-05 19:00")]


def test_the_panel_carries_the_calendar_read_once() -> None:
    """The freq string is read into a Calendar where the frame is read: a session detected from
    the rows, one declared, and a plain step alike; the string spelling stays the panel's freq."""
    df = session_frame("h", "09:00", "17:00", weekdays=5)
    detected, declared = canonicalize(df), canonicalize(df, freq="bh")
    assert detected.calendar == declared.calendar == Calendar.of("h 09:00-17:00 Mon-Fri")
    assert detected.calendar.step == "h" and detected.calendar.session.days == (0, 1, 2, 3, 4)
    assert detected.freq == str(detected.calendar) == "h 09:00-17:00 Mon-Fri"
    assert canonicalize(df, freq="h", gaps="warn").calendar.session is not None  # the plain step: its session read
    assert Calendar.of("h 00:00-24:00") == Calendar.of("h") == Calendar("h") and Calendar("h").session is None
    with pytest.raises(ValueError, match="Calendar.of"):
        Calendar("5min", Calendar.of("h 09:00-17:00 Mon-Fri").session)  # a step its session does not step at


def test_errors_about_session_data_name_the_session() -> None:
    df = session_frame("h", "09:00", "17:00", weekdays=5)
    evening = pd.concat([df, pd.DataFrame({"sales": [1.0]}, index=pd.DatetimeIndex(["2024-02-02 20:00"], name="ts"))])
    with pytest.raises(ValueError, match=r"2024-02-02 20:00:00 .* session freq 'h 09:00-17:00 Mon-Fri' \(steps of 'h' "
                                         r"from 09:00 to 17:00 on Mon-Fri\): 1 of .* declare the session"):
        canonicalize(evening.sort_index(), freq="h 09:00-17:00 Mon-Fri")
    forecaster = Forecaster("seasonal_naive", prediction_length=8).fit(df)
    with pytest.raises(ValueError, match="session freq 'h 09:00-17:00 Mon-Fri'"):
        forecaster.predict(evening.sort_index())
    # bars too sparse to show their session (an illiquid stock): the refusals name it, and it works
    sparse = session_frame("5min", "09:30", "16:00", weekdays=5, days=28)
    sparse = sparse[np.random.default_rng(1).random(len(sparse)) < 0.4]
    for freq in (None, "5min"):
        with pytest.raises(ValueError, match=r"freq='5min 09:30-16:00 Mon-Fri' if the rows are a session|if the rows "
                                             r"are a session \(opening or trading hours\), declare it: "
                                             r"freq='5min 09:30-16:00 Mon-Fri'"):
            canonicalize(sparse, freq=freq)
    with pytest.warns(UserWarning, match=r"df.resample\('10min'\).mean\(\).dropna\(\)"):
        panel = canonicalize(sparse, freq="5min 09:30-16:00 Mon-Fri", gaps="warn")
    assert in_hours(panel.items[0].index, "09:30", "16:00") and panel.items[0].observed.sum() == len(sparse)
    for bad, match in [("h 24:00-08:00", "must start before 24:00 and hold a whole number"),
                       ("7min 09:00-17:00", "hold a whole number of '7min' steps"),
                       ("D 09:00-17:00", "shorter than a day"), ("h 09:00-17:00 Mon-Fry", "invalid session days")]:
        with pytest.raises(ValueError, match=match):
            normalize_freq(bad)


def test_rows_that_are_no_session_keep_the_plain_step() -> None:
    hourly = pd.DataFrame({"y": np.arange(24 * 20.0)}, index=pd.date_range("2024-01-01", periods=24 * 20, freq="h"))
    assert canonicalize(hourly).freq == "h"
    one_night = hourly.drop(hourly.index[(hourly.index.hour >= 22) & (hourly.index.day == 5)])
    assert canonicalize(one_night).freq == "h"  # a few missing hours once: missing values
    every_other = hourly.iloc[::2]
    assert canonicalize(every_other, freq="2h").freq == "2h"
    with pytest.raises(ValueError, match="freq 'h' leaves .* pass freq='2h'"):  # not a session of 'h'
        canonicalize(every_other, freq="h")


def test_sessions_keep_the_wall_clock_across_daylight_saving() -> None:
    df = session_frame("h", "06:00", "22:00", tz="Europe/Berlin", first="2024-03-01", days=40)
    forecaster = Forecaster("seasonal_naive", prediction_length=40).fit(df)
    assert forecaster.freq == "h 06:00-22:00"
    stamps = pd.DatetimeIndex(forecaster.predict(df)["timestamp"])
    assert str(stamps.tz) == "Europe/Berlin" and in_hours(stamps.tz_localize(None), "06:00", "22:00")


def test_backtest_origins_and_stamps_follow_the_session() -> None:
    df = session_frame("h", "09:00", "17:00", weekdays=5)
    forecaster = Forecaster("dlinear", prediction_length=12, context_length=24, **QUIET).fit(df)
    errors = backtest(forecaster, df, n_windows=4, stride=5).errors
    for column in ("origin", "timestamp"):
        stamps = pd.DatetimeIndex(errors[column])
        assert in_hours(stamps, "09:00", "17:00") and (stamps.dayofweek < 5).all()
    truth = df["sales"].reindex(pd.DatetimeIndex(errors["timestamp"])).to_numpy()
    np.testing.assert_allclose(errors["y_true"], truth)  # every window scored against its own rows
    refit = backtest(forecaster, df, n_windows=2, stride=8, refit_every=1).errors
    assert in_hours(pd.DatetimeIndex(refit["timestamp"]), "09:00", "17:00")


def test_auto_selects_and_forecasts_on_the_session() -> None:
    df = session_frame("h", "09:00", "17:00", weekdays=5, days=70)
    forecaster = Forecaster("auto", candidates=("seasonal_naive", "theta"), prediction_length=8).fit(df)
    assert forecaster.freq == "h 09:00-17:00 Mon-Fri"
    stamps = pd.DatetimeIndex(forecaster.predict(df)["timestamp"])
    assert in_hours(stamps, "09:00", "17:00") and (stamps.dayofweek < 5).all()
    assert stamps[0] == pd.Timestamp("2024-03-11 09:00")  # Monday's opening after the last Friday's 16:00


def test_saved_models_and_plots_keep_the_session(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from tsrec.plotting import plot_forecast

    df = session_frame("h", "09:00", "17:00", weekdays=5)
    forecaster = Forecaster("dlinear", prediction_length=8, context_length=16, **QUIET).fit(df)
    forecaster.save(tmp_path / "model")
    loaded = Forecaster.load(tmp_path / "model")
    assert loaded.freq == "h 09:00-17:00 Mon-Fri"
    forecast = loaded.predict(df)
    pd.testing.assert_frame_equal(forecast, forecaster.predict(df))
    figure = plot_forecast(df, forecast, history_steps=16)
    observed, mean = figure.axes[0].get_lines()[:2]
    for line in (observed, mean):
        drawn = pd.DatetimeIndex(pd.to_datetime(line.get_xdata()))
        assert in_hours(drawn, "09:00", "17:00") and (drawn.dayofweek < 5).all()


def test_gluonts_names_the_session_it_cannot_carry() -> None:
    pytest.importorskip("gluonts")
    from tsrec.interop.gluonts import TsrecEstimator, from_tsrec_frame

    df = session_frame("h", "09:00", "17:00", weekdays=5)
    with pytest.raises(ValueError, match="freq 'h 09:00-17:00 Mon-Fri' is a session .* tsrec's Forecaster"):
        from_tsrec_frame(df)
    with pytest.raises(ValueError, match="is a session"):
        TsrecEstimator("dlinear", prediction_length=8, freq="bh")
