"""Property-based tests of the data layer (hypothesis).

Random frames, wide and long, with gaps, NaN and +-inf values, time zones across daylight-saving
changes, duplicate and unsorted timestamps and several frequencies either raise a clear error
(``ValueError`` / ``TypeError`` with a message) or give a panel, and windows, that hold exactly the
input: every row's value at its timestamp, NaN and unobserved at grid steps without a row.

Deterministic (``derandomize=True``, no example database), about 15 s on one thread.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tsrec.data import (Calendar, Panel, StandardScaler, WindowDataset, canonicalize, future_index, seasonality,
                        time_features)

SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

FREQS = ("15min", "h", "D", "W-SUN", "MS")
FINER = {"15min": "5min", "h": "15min", "D": "h", "W-SUN": "D", "MS": "D"}
ZONES = (None, "UTC", "Europe/Berlin", "America/New_York")
STARTS = ("2021-03-27", "2021-10-30", "2021-03-13", "2021-11-06")  # the days before DST changes in Berlin, New York
FAR = (200, 1000)  # a row this many steps after the others: a long gap at every freq of FREQS
VALUES = st.one_of(
    st.floats(min_value=-1e300, max_value=1e300),
    st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 1e9 + 0.5, 1e39, -1e-300]),
)


@dataclass
class Case:
    """A generated frame, how to read it and what it holds."""

    df: pd.DataFrame
    kwargs: dict
    freq: str
    declared: str | None
    tz: str | None
    rows: dict[str, dict[pd.Timestamp, np.ndarray]]  # item id -> timestamp -> its [C] values
    positions: dict[str, list[int]]  # item id -> its rows' positions on the grid at freq, sorted
    columns: tuple[str, ...]
    duplicated: bool
    far: bool


@st.composite
def cases(draw, exact: bool = False) -> Case:
    """Random frames; ``exact``: no duplicate, ``freq`` declared, a far row in a third of the items."""
    freq, tz, layout = draw(st.sampled_from(FREQS)), draw(st.sampled_from(ZONES)), draw(st.sampled_from(["wide", "long"]))
    grid = pd.date_range(draw(st.sampled_from(STARTS)), periods=1200, freq=freq, tz=tz)
    n_columns = draw(st.integers(1, 3)) if layout == "wide" else 1
    ids = ["0"] if layout == "wide" else draw(st.lists(st.sampled_from(["a", "b", "7"]), min_size=1, max_size=3,
                                                       unique=True))
    frames, rows, steps, far = [], {}, {}, False
    for item_id in ids:
        first, length = draw(st.integers(0, 5)), draw(st.integers(1, 40))
        most = draw(st.sampled_from([length // 4, 3 * length // 4]))  # sparse, or about half empty
        dropped = draw(st.sets(st.integers(1, length - 1), max_size=most)) if length > 1 else set()
        positions = [first + p for p in range(length) if p not in dropped]
        if len(positions) > 1 and draw(st.integers(0, 2 if exact else 9)) == 0:  # a mistyped, far too late timestamp
            positions[-1] += draw(st.sampled_from(FAR))
            far = True
        values = np.array(draw(st.lists(st.lists(VALUES, min_size=n_columns, max_size=n_columns),
                                        min_size=len(positions), max_size=len(positions))))  # [n, C]
        stamps = grid[positions]
        rows[item_id], steps[item_id] = dict(zip(stamps, values)), positions
        part = pd.DataFrame(values, columns=[f"v{c}" for c in range(n_columns)])
        part.insert(0, "ts", stamps)
        frames.append(part.assign(id=int(item_id) if item_id.isdigit() else item_id))
    df = pd.concat(frames, ignore_index=True)
    duplicated = not exact and draw(st.integers(0, 7)) == 0
    if duplicated:
        df = pd.concat([df, df.iloc[[draw(st.integers(0, len(df) - 1))]]], ignore_index=True)
    df = df.iloc[draw(st.permutations(range(len(df))))]
    kwargs: dict = {"gaps": draw(st.sampled_from(["raise", "warn"]))}
    if layout == "long":
        kwargs |= {"id_col": "id", "time_col": "ts"}
    else:
        df = df.drop(columns="id")
        if draw(st.booleans()):
            df = df.set_index("ts")
        else:
            kwargs["time_col"] = "ts"
    declared = freq if exact else draw(st.sampled_from([None, freq, freq, FINER[freq]]))
    if declared is not None:
        kwargs["freq"] = declared
    columns = tuple(f"v{c}" for c in range(n_columns)) if layout == "wide" else ("v0",)
    return Case(df, kwargs, freq, declared, tz, rows, steps, columns, duplicated, far)


def read(case: Case) -> tuple[Panel | None, Exception | None, list[str]]:
    """``canonicalize`` the case: the panel or the error, and the warnings' texts."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            panel = canonicalize(case.df, **case.kwargs)
        except (ValueError, TypeError) as error:
            return None, error, [str(w.message) for w in caught]
    return panel, None, [str(w.message) for w in caught]


def check_panel(panel: Panel, case: Case) -> None:
    """The panel holds exactly the case's rows, on regular grids in the input's time zone."""
    assert panel.columns == case.columns and panel.item_ids == tuple(sorted(case.rows))
    if case.declared is not None:
        assert panel.freq == case.declared
    for series in panel.items:
        index, rows = series.index, case.rows[series.item_id]
        assert str(index.tz) == str(case.tz) and index.equals(pd.date_range(index[0], periods=len(index),
                                                                             freq=panel.freq))
        assert index[0] == min(rows) and index[-1] == max(rows)
        positions = index.get_indexer(list(rows))  # [n]
        assert (positions >= 0).all()
        given = np.array(list(rows.values()))  # [n, C]
        finite = np.isfinite(given)
        np.testing.assert_array_equal(series.observed[positions], finite)
        assert series.values.dtype == np.float64
        np.testing.assert_array_equal(series.values[positions][finite], given[finite])  # bit for bit
        assert np.isnan(series.values[~series.observed]).all()
        without_row = np.ones(len(index), dtype=bool)
        without_row[positions] = False
        assert not series.observed[without_row].any()


def check_windows(panel: Panel, case: Case, fit_fraction: float) -> None:
    """Training and prediction windows read the input's rows at the right timestamps, scaled into
    float32 exactly as ``(value - loc) / scale`` in float64; the only allowed error is a scaled
    value beyond float32 (values outside the range of the scaler's training part)."""
    context, horizon = 3, 2
    ends = [max(1, int(fit_fraction * len(s))) for s in panel.items]
    scaler = StandardScaler.fit([s.values for s in panel.items], [s.observed for s in panel.items], ends)
    assert np.isfinite(scaler.loc).all() and np.isfinite(scaler.scale).all()
    origins = [(context, max(context, len(s) - horizon + 1)) for s in panel.items]
    try:
        train = WindowDataset.from_panel(panel, scaler, context, horizon, origins)
    except ValueError as error:
        assert "beyond float32's range" in str(error)
        event("windows: beyond float32")
        return
    event(f"windows: {'some' if len(train) else 'none'}")
    expected = [expected_window_rows(case, panel, scaler, item) for item in range(len(panel.items))]
    for k in range(0, len(train), max(1, len(train) // 50)):  # about 50 windows, spread over all
        window = train[k]
        target, observed = expected[window["item"]]
        past, future = slice(window["origin"] - context, window["origin"]), slice(window["origin"], None)
        assert np.array_equal(window["past_target"].numpy(), target[past])
        assert np.array_equal(window["past_observed"].numpy(), observed[past])
        assert np.array_equal(window["future_target"].numpy(), target[future][:horizon])
        assert np.array_equal(window["future_observed"].numpy(), observed[future][:horizon])
    if all(len(s) >= context for s in panel.items):
        predict = WindowDataset.for_prediction(panel, scaler, context, horizon)
        for item, series in enumerate(panel.items):
            window, (target, observed) = predict[item], expected[item]
            assert np.array_equal(window["past_target"].numpy(), target[-context:])
            assert np.array_equal(window["past_observed"].numpy(), observed[-context:])
            future = future_index(max(case.rows[series.item_id]), panel.calendar, horizon)
            np.testing.assert_array_equal(window["future_time_feat"], time_features(future, panel.calendar))


def expected_window_rows(case: Case, panel: Panel, scaler: StandardScaler, item: int) -> tuple[np.ndarray, np.ndarray]:
    """What windows of ``panel.items[item]`` must read at its grid steps ``[T]``, built from the
    input rows: float32 ``(value - loc) / scale`` (0 where missing) and the 0/1 observed mask, both
    ``[T, C]``."""
    index = panel.items[item].index
    given = np.full((len(index), len(case.columns)), np.nan)  # [T, C]
    for stamp, values in case.rows[panel.items[item].item_id].items():
        given[index.get_loc(stamp)] = values
    finite = np.isfinite(given)
    scaled = ((given - scaler.loc[item]) / scaler.scale[item]).astype(np.float32)
    return np.where(finite, scaled, np.float32(0)), finite.astype(np.float32)


@SETTINGS
@given(cases(), st.sampled_from([0.5, 1.0]))
def test_random_frames_give_exactly_their_rows_or_a_clear_error(case, fit_fraction):
    panel, error, caught = read(case)
    if case.duplicated:
        assert isinstance(error, ValueError) and "duplicate timestamps" in str(error)
        return
    if error is not None:
        event(f"error: {' '.join(str(error).split()[:3])}")
        assert str(error) and (case.declared is None or case.declared == FINER[case.freq] or case.far
                               or "gaps='warn'" in str(error)), error
        return
    event(f"panel, {len(caught)} warnings")
    assert case.kwargs["gaps"] == "warn" or not caught
    check_panel(panel, case)
    check_windows(panel, case, fit_fraction)


def spacing_rule(positions: list[int], freq: str) -> list[str]:
    """The documented spacing rule, re-derived from one item's grid ``positions``: ``"gap"`` for a
    run of missing steps longer than 7 seasons of the median step, ``"empty"`` for a grid more than
    half empty apart from such gaps, or for rows (three or more) usually two or more steps apart."""
    steps = np.diff(positions)
    if not steps.size:
        return []
    long = steps - 1 > 7 * seasonality(Calendar.of(freq)) * np.median(steps)
    empty = (steps[~long] - 1).sum()
    finer = np.median(steps) >= 2 and len(positions) >= 3
    return ["gap"] * bool(long.any()) + ["empty"] * bool(empty > len(positions) or finer)


def kind(message: str) -> str:
    problem = message.split(";")[0]
    return "gap" if " has a gap" in problem else "empty" if " leaves " in problem else message


@SETTINGS
@given(cases(exact=True))
def test_frames_at_their_freq_are_refused_or_warned_only_by_the_spacing_rule(case):
    expected = [k for item in sorted(case.positions) for k in spacing_rule(case.positions[item], case.freq)]
    event(f"spacing problems: {expected}")
    panel, error, caught = read(case)
    if case.kwargs["gaps"] == "warn":
        assert error is None and [kind(w) for w in caught] == expected, (error, caught)
    elif expected:
        assert error is not None and kind(str(error)) == expected[0], error
        return
    else:
        assert error is None and not caught, (error, caught)
    check_panel(panel, case)


@SETTINGS
@given(cases())
def test_gaps_warn_warns_exactly_where_gaps_raise_raises(case):
    if case.duplicated:
        return
    raised = read(replace(case, kwargs=case.kwargs | {"gaps": "raise"}))[1]
    panel, error, caught = read(replace(case, kwargs=case.kwargs | {"gaps": "warn"}))
    if raised is None or "gaps='warn'" not in str(raised):  # no spacing problem: both modes agree
        assert not caught and type(error) is type(raised) and str(error) == str(raised)
        return
    assert caught and caught[0].split(";")[0] == str(raised).split(";")[0]
    if error is None:
        check_panel(panel, case)
    else:  # another item's error, after the warned one
        assert "gaps='warn'" not in str(error)


@SETTINGS
@given(st.floats(-1e12, 1e12), st.floats(1e-6, 1e6), st.integers(2, 50), st.integers(0, 2**32 - 1))
def test_scaler_is_float64_and_float32_keeps_the_swing(level, swing, length, seed):
    x = level + swing * np.random.default_rng(seed).standard_normal((length, 2))  # [T, C]
    size = np.abs(x).max()
    scaler = StandardScaler.fit([x], [np.ones_like(x, dtype=bool)])
    np.testing.assert_allclose(scaler.loc[0], x.mean(axis=0), rtol=0, atol=1e-14 * size)
    std = np.where(np.ptp(x, axis=0) > 0, x.std(axis=0), 1.0)  # a constant channel gets scale 1
    np.testing.assert_allclose(scaler.scale[0], std, rtol=1e-12, atol=1e-14 * size)
    scaled = scaler.transform(x, 0)
    assert scaled.dtype == np.float64
    np.testing.assert_allclose(scaler.inverse_transform(scaled, 0), x, rtol=0, atol=1e-15 * size)
    # rounding the scaled values to float32 costs ~1e-7 of the swing, not of the level
    error = np.abs(scaler.inverse_transform(scaled.astype(np.float32), 0) - x)
    assert (error <= 1e-7 * scaler.scale[0] * np.abs(scaled).max() + 1e-15 * size).all()

