"""Sessions: data recorded only within the same hours of the day (opening or trading hours), on
every day or on some weekdays only.

A session calendar is a step shorter than a day, the hours of each session day and the weekdays
that have one. tsrec spells it as its ``freq``: the step, the hours (start included, end excluded,
wall clock) and, unless every day is open, the weekdays:

- ``"h 06:00-22:00"``: hourly steps 06:00, 07:00, ..., 21:00 every day (16 steps a day);
- ``"5min 07:00-21:00"``: 5-minute steps 07:00, ..., 20:55 every day;
- ``"h 09:00-17:00 Mon-Fri"``: hourly steps 09:00, ..., 16:00 on weekdays;
- ``"5min 00:00-24:00 Mon-Fri"``: whole weekdays, weekends closed; ``"h 10:00-18:00 Mon-Thu,Sat"``;
- ``"h 18:00-02:00 Mon-Fri"``: a session across midnight, from 18:00 to 02:00 the next morning; its
  weekdays are the days it opens (``"h 17:00-17:00 Sun-Thu"``: 24 hours from 17:00, Sunday to Friday).

Its grid is the open steps alone, in order: the step after a session day's last one is the next
open day's first. So the grid of the data, the backtest's origins, the time features and every
forecast's timestamps skip the closed hours and days, and a missing session day (a holiday) is
missing values, as a missing step is at any ``freq``. Times are wall-clock times in the data's time
zone (a session opening at 09:00 opens at 09:00 local time on both sides of a daylight-saving change).

:func:`detect` recognises a session from the rows (:func:`tsrec.data.frame.canonicalize` asks it
for every step shorter than a day). pandas' ``BusinessHour`` / ``CustomBusinessHour`` (``"bh"``,
``"cbh"``) are read as the session of their hours and weekmask (hourly steps only; holidays are not
kept: a holiday is a missing session day).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

__all__ = ["Session", "session_of", "detect", "suggest", "holding", "closed_early", "wall_clock",
           "SESSION_EVIDENCE"]

DAY = pd.Timedelta(days=1)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ALL_DAYS = tuple(range(7))
_EPOCH = np.datetime64("1970-01-01", "D")  # where session days are counted from
_SPELLING = re.compile(r"^\s*(?P<step>\S+)\s+(?P<start>\d{1,2}:\d\d(?::\d\d)?)\s*-\s*(?P<end>\d{1,2}:\d\d(?::\d\d)?)"
                       r"(?:\s+(?P<days>\S+))?\s*$")
_EXAMPLE = "freq='h 09:00-17:00 Mon-Fri' (hourly 09:00-16:00 on weekdays) or freq='5min 07:00-21:00' (every day)"


@dataclass(frozen=True)
class Session:
    """A session calendar: steps of ``step`` from ``start`` to ``end`` (excluded) of each open day.

    step:  pandas alias of a fixed step shorter than a day (``"h"``, ``"5min"``).
    start: time of day of each session day's first step.
    end:   end of the session hours (excluded), at most 24:00; at or before ``start``: the next day
           (a session across midnight).
    days:  the weekdays on which a session opens (0 = Monday), sorted, at least one.
    """

    step: str
    start: pd.Timedelta
    end: pd.Timedelta
    days: tuple[int, ...] = ALL_DAYS

    @property
    def step_duration(self) -> pd.Timedelta:
        return pd.Timedelta(to_offset(self.step))

    @property
    def length(self) -> pd.Timedelta:
        """How long a session lasts: ``end - start``, a day later when it crosses midnight."""
        return (self.end - self.start) % DAY or DAY

    @property
    def steps_per_day(self) -> int:
        """Steps of one session day: the season of session data (16 for hourly 06:00-22:00)."""
        return int(self.length // self.step_duration)

    @property
    def weekmask(self) -> str:
        """numpy's weekmask of the open days (``"1111100"`` for Mon-Fri)."""
        return "".join("1" if day in self.days else "0" for day in range(7))

    @property
    def trivial(self) -> bool:
        """Whether nothing is closed: every hour of every day (the plain ``step``)."""
        return self.length == DAY and self.days == ALL_DAYS

    @property
    def alias(self) -> str:
        """tsrec's spelling (module docstring); the plain step when nothing is closed."""
        if self.trivial:
            return self.step
        hours = f"{self.step} {_clock(self.start)}-{_clock(self.end)}"
        return hours if self.days == ALL_DAYS else f"{hours} {_spell_days(self.days)}"

    def describe(self) -> str:
        """The session in words, for messages: ``"hourly steps 09:00-17:00 on Mon-Fri"``."""
        days = "every day" if self.days == ALL_DAYS else f"on {_spell_days(self.days)}"
        return f"steps of {self.step!r} from {_clock(self.start)} to {_clock(self.end)} {days}"

    def positions(self, stamps: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
        """``[n]`` int64 position of each timestamp on the session grid (counted from the first
        open day on or after 1970-01-01; negative before it), and ``[n]`` bool: off the grid (a
        closed day, outside the hours, or between steps). Wall clock in the stamps' zone."""
        shifted = wall_clock(stamps) - self.start  # [n] the time since the session day's start time
        days = shifted.normalize()
        offset = (shifted - days).asi8  # [n] ns into the session day
        dates = days.values.astype("M8[D]")  # [n] the day each session opened
        step = self.step_duration.value
        off = ~np.is_busday(dates, weekmask=self.weekmask) | (offset >= self.length.value) | (offset % step != 0)
        day = np.busday_count(_EPOCH, dates, weekmask=self.weekmask)  # [n] open days before each date
        return day * self.steps_per_day + offset // step, off

    def stamps(self, positions: np.ndarray, tz: object = None) -> pd.DatetimeIndex:
        """The timestamps ``[n]`` at session-grid ``positions`` ``[n]`` (:meth:`positions`' inverse),
        in the zone ``tz``."""
        positions = np.asarray(positions, dtype=np.int64)
        day, step = np.divmod(positions, self.steps_per_day)  # [n], [n]
        dates = np.busday_offset(_EPOCH, day, roll="forward", weekmask=self.weekmask)  # [n] datetime64[D]
        times = dates.astype("M8[ns]").astype(np.int64) + self.start.value + step * self.step_duration.value
        index = pd.DatetimeIndex(times.view("M8[ns]"))
        if tz is None:
            return index
        local = index.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
        if local.hasnans:  # a wall-clock step the zone skips or repeats: a daylight-saving change in open hours
            raise ValueError(self._across_clock_change(index[np.asarray(local.isna())][0], tz))
        return local

    def _across_clock_change(self, wall: pd.Timestamp, tz: object) -> str:
        """The error for a session open at the wall-clock time ``wall``, which the zone ``tz``
        skips or repeats (a daylight-saving change), with the fix: the timestamps in UTC, where the
        session's hours move by the change and :meth:`utc` holds both sides."""
        noon = wall.normalize() + pd.Timedelta(hours=12)
        offsets = [pd.Timestamp(noon + k * DAY).tz_localize(tz).utcoffset() for k in (-1, 1)]
        skipped = offsets[1] > offsets[0]
        utc = self.utc(min(offsets), max(offsets))
        declared = f", or declare freq={utc.alias!r} (the session in UTC, both sides of the change)" if utc else ""
        when = "does not exist there (the clocks skip it)" if skipped else "happens twice there"
        return (f"the session {self.alias!r} ({self.describe()}) is open at {wall} in {tz}, a wall-clock time that "
                f"{when}: a daylight-saving "
                f"change falls in its open hours, which a session's wall-clock steps cannot hold. Give the timestamps "
                f"in UTC (the time column's .dt.tz_convert('UTC'), or df.index.tz_convert('UTC') for a frame indexed "
                f"by time) and leave freq unset: the session is read from the rows{declared}")

    def utc(self, low: pd.Timedelta, high: pd.Timedelta) -> Session | None:
        """The session in UTC of a zone whose offset from UTC is ``low`` or ``high`` (standard and
        summer time): hours from the earlier UTC start to the later UTC end (one step missing each day
        on either side of the change), weekdays moved with the start; None where that is no
        session (the hours no longer fit a day whole, or a step)."""
        start = self.start - high  # may leave [0, 1 day): the session day moves too
        length = self.length + (high - low)
        shift = int(start // DAY)
        days = tuple(sorted((d + shift) % 7 for d in self.days))
        if length > DAY or length % self.step_duration:
            return None
        end = (start + length) % DAY
        return Session(self.step, start % DAY, DAY if end == start % DAY == pd.Timedelta(0) else end, days)


def wall_clock(stamps: pd.DatetimeIndex) -> pd.DatetimeIndex:
    """``stamps`` as naive wall-clock times in nanoseconds."""
    return (stamps if stamps.tz is None else stamps.tz_localize(None)).as_unit("ns")


def _clock(time: pd.Timedelta) -> str:
    """``HH:MM`` (``HH:MM:SS`` with seconds) of a time of day; 24:00 for the end of the day."""
    seconds = int(time.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


def _spell_days(days: tuple[int, ...]) -> str:
    """``"Mon-Fri"``, ``"Mon-Thu,Sun"``, ``"Mon,Wed"``: runs of three or more days as ranges."""
    runs: list[list[int]] = []
    for day in days:
        if runs and day == runs[-1][-1] + 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    parts = []
    for run in runs:
        parts += [f"{WEEKDAYS[run[0]]}-{WEEKDAYS[run[-1]]}"] if len(run) >= 3 else [WEEKDAYS[d] for d in run]
    return ",".join(parts)


def _parse_days(text: str, freq: object) -> tuple[int, ...]:
    """The weekdays of ``"Mon-Fri"``, ``"Sun-Thu"`` (a range may wrap), ``"Mon,Wed,Fri"``."""
    names = {name.lower(): k for k, name in enumerate(WEEKDAYS)}
    days: set[int] = set()
    for part in text.split(","):
        ends = [p.strip().lower()[:3] for p in part.split("-")]
        if not ends or len(ends) > 2 or any(e not in names for e in ends):
            raise ValueError(
                f"invalid session days {text!r} in freq {freq!r}: name weekdays as Mon, Tue, ..., Sun, ranges "
                "as Mon-Fri, lists as Mon,Wed,Fri"
            )
        first, last = names[ends[0]], names[ends[-1]]
        days.update((first + k) % 7 for k in range((last - first) % 7 + 1))
    return tuple(sorted(days))  # at least one: the text names a day


def _time_of_day(text: str, freq: object) -> pd.Timedelta:
    parts = [int(p) for p in text.split(":")]
    time = pd.Timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2] if len(parts) > 2 else 0)
    if parts[1] >= 60 or (len(parts) > 2 and parts[2] >= 60) or time > DAY:
        raise ValueError(f"invalid time of day {text!r} in freq {freq!r}: use HH:MM from 00:00 to 24:00")
    return time


def session_of(freq: object) -> Session | None:
    """The :class:`Session` that ``freq`` spells (module docstring): a session string, a pandas
    ``BusinessHour`` / ``CustomBusinessHour`` (or ``"bh"`` / ``"cbh"``); None for any other freq.
    ``ValueError`` naming what is wrong with a session that cannot be one."""
    if isinstance(freq, str):
        return _parsed(freq)
    if isinstance(freq, (pd.offsets.BusinessHour, pd.offsets.CustomBusinessHour)):
        return _from_business_hour(freq)
    return None


@functools.lru_cache(maxsize=256)
def _parsed(freq: str) -> Session | None:
    match = _SPELLING.match(freq)
    if match is None:
        if freq.strip().lower() in ("bh", "cbh"):
            return _from_business_hour(to_offset(freq))
        if _meant_as_session(freq):
            raise ValueError(
                f"invalid session freq {freq!r}: a session is spelt '<step> <HH:MM>-<HH:MM> [<days>]', the step a "
                f"pandas alias shorter than a day, the hours as 09:00-17:00 (start included, end excluded), the days "
                f"as Mon-Fri or Mon,Wed,Fri (every day without); e.g. {_EXAMPLE}"
            )
        return None
    step = match["step"]
    try:
        offset = to_offset(step)
    except (TypeError, ValueError):
        offset = None
    if not isinstance(offset, pd.offsets.Tick) or offset.n <= 0 or pd.Timedelta(offset) >= DAY:
        raise ValueError(
            f"invalid session freq {freq!r}: its step {step!r} must be a positive fixed step shorter than a "
            f"day (such as 'h', '30min', '5min'); e.g. {_EXAMPLE}"
        )
    start, end = _time_of_day(match["start"], freq), _time_of_day(match["end"], freq)
    days = ALL_DAYS if match["days"] is None else _parse_days(match["days"], freq)
    end = DAY if end % DAY == start == pd.Timedelta(0) else end % DAY  # whole days from midnight: 00:00-24:00
    session = Session(offset.freqstr, start % DAY, end, days)
    if start == DAY or session.length % pd.Timedelta(offset):
        raise ValueError(
            f"invalid session freq {freq!r}: the hours {_clock(start)}-{_clock(end)} must start before 24:00 and "
            f"hold a whole number of {offset.freqstr!r} steps; e.g. {_EXAMPLE}"
        )
    return session


def _meant_as_session(freq: str) -> bool:
    """Whether ``freq``, which is no session as spelt, names a time of day or a weekday (as a
    session would) and is no pandas alias either: a session spelt wrong, which deserves a
    session's error rather than a plain alias's."""
    words = re.split(r"[^a-z]+", freq.lower())
    if ":" not in freq and not any(word[:3] in _DAY_NAMES and word in _DAY_WORDS for word in words):
        return False
    try:
        to_offset(freq)
    except (TypeError, ValueError):
        return True
    return False


_DAY_NAMES = {name.lower() for name in WEEKDAYS}
_DAY_WORDS = _DAY_NAMES | {name.lower() for name in DAY_NAMES} | {"tues", "thur", "thurs", "weds"}


def _from_business_hour(offset: pd.offsets.BusinessHour) -> Session:
    """The session of pandas' business hours (one span a day, hourly steps, no holidays)."""
    if len(offset.start) != 1 or offset.n != 1 or getattr(offset, "holidays", None):
        raise ValueError(
            f"freq {offset!r} has several spans a day, a multiple or holidays, which a tsrec session does not "
            f"keep; spell the session as tsrec's freq, e.g. {_EXAMPLE} (a holiday is a missing session day)"
        )
    start = pd.Timedelta(str(offset.start[0]))
    end = pd.Timedelta(str(offset.end[0]))
    mask = str(getattr(offset, "weekmask", None) or "Mon Tue Wed Thu Fri")  # names, or seven digits
    days = tuple(k for k, name in enumerate(WEEKDAYS)
                 if (mask[k] == "1" if mask.isdigit() and len(mask) == 7 else name in mask.split()))
    if not days or (end - start) % DAY % pd.Timedelta(hours=1):
        raise ValueError(f"freq {offset!r} has no open weekday or hours that are no whole number of hours")
    return Session("h", start, end, days)


def detect(stamps: pd.DatetimeIndex, first: np.ndarray, step: str) -> Session | None:
    """The session the rows follow at ``step``, or None where they do not show one.

    ``stamps`` ``[R]`` sorted by item, then time, item ``i`` starting at row ``first[i]``; ``step``
    a fixed step that divides a day. Only rows usually (the median) one step apart show a session.
    The closed hours are the widest stretch of the day (around midnight or not) without a row; the
    open weekdays are those on which a session with rows opens. Each is
    kept only where :data:`SESSION_DAYS` (3) session days are at least half full of rows, and the rows
    pass over it often enough (twice at least, a week apart at most) that at their rate in the open
    steps it would have held at least :data:`SESSION_EVIDENCE` (10) rows: a month of hourly
    06:00-22:00 rows passes over 29 nights of 8 steps (232 rows); a day without rows at some hours,
    or a mistyped far timestamp, is no session. None when nothing is closed.
    """
    duration = _day_step(step)
    if duration is None or len(stamps) < 3:
        return None
    step = to_offset(step).freqstr
    within = np.ones(len(stamps) - 1, dtype=bool)  # [R - 1] whether row k + 1 continues row k's item
    within[np.asarray(first[1:]) - 1] = False
    if not within.any() or (np.diff(stamps.as_unit("ns").asi8)[within] == duration).all():
        return None  # every row one step after the last (the common case, checked first): nothing closed
    wall = wall_clock(stamps)
    time = wall.asi8 % DAY.value  # [R] ns since midnight
    weekday = (wall.asi8 // DAY.value + 3) % 7  # [R] 0 = Monday (1970-01-01 was a Thursday)
    if np.bincount(time // duration, minlength=DAY.value // duration).all() and np.bincount(weekday, minlength=7).all():
        return None  # rows at every step of the day and on every weekday (regular data with gaps): nothing closed
    if ((time - time.min()) % duration).any():
        return None  # rows between steps: the plain grid's off-grid error names them
    spacing = np.diff(wall.asi8)[within]  # [P] between consecutive rows of an item
    if np.median(spacing) != duration:
        return None  # rows usually further apart than a step: a freq finer than the data's, not a session
    hours = _hours(time, step)
    if hours.length == DAY or not _shown(hours, wall, within, Session(step, pd.Timedelta(0), DAY)):
        hours = Session(step, pd.Timedelta(0), DAY)
    session = _with_days(hours, wall)
    if session.days != ALL_DAYS and not _shown(session, wall, within, hours):
        session = hours
    return None if session.trivial else session


def _day_step(step: str) -> int | None:
    """Nanoseconds of ``step`` where it is a fixed step shorter than a day that divides a day; None otherwise."""
    offset = to_offset(step)
    duration = pd.Timedelta(offset).value if isinstance(offset, pd.offsets.Tick) else DAY.value
    return duration if duration < DAY.value and DAY.value % duration == 0 else None


def _shown(session: Session, wall: pd.DatetimeIndex, within: np.ndarray, without: Session) -> bool:
    """Whether the rows ``wall`` ``[R]`` show what ``session`` closes beyond ``without`` (the same
    calendar with those hours or days open): :data:`SESSION_DAYS` session days at least half full,
    and :data:`SESSION_EVIDENCE` rows missed in the hours or days it closes."""
    positions, _ = session.positions(wall)
    _, rows = np.unique(positions // session.steps_per_day, return_counts=True)  # [D] rows per session day
    if (2 * rows >= session.steps_per_day).sum() < SESSION_DAYS:
        return False
    return _missed(session, wall, within) - _missed(without, wall, within) >= SESSION_EVIDENCE


def _common(keys: np.ndarray, stray: bool = False) -> np.ndarray:
    """The distinct values of ``keys`` ``[R]`` (times of day, weekdays) that are not stray: held by
    at least :data:`STRAY_SHARE` as many rows as the median value is (one row on a Saturday among
    weeks of weekday rows is a stray row, not a Saturday session), sorted; every one with ``stray``."""
    values, counts = np.unique(keys, return_counts=True)
    return values if stray else values[counts >= STRAY_SHARE * np.median(counts)]


def _hours(time: np.ndarray, step: str, stray: bool = False) -> Session:
    """Every day open in the hours outside the widest stretch of the day (around midnight or not)
    without one of the times of day ``time`` ``[R]`` (ns since midnight, on one grid of ``step``)
    that is not stray (:func:`_common`; every one with ``stray``)."""
    duration = pd.Timedelta(to_offset(step)).value
    times = _common(time, stray)  # [U] sorted
    gaps = np.diff(np.r_[times, times[0] + DAY.value])  # [U] from each to the next (around midnight)
    widest = int(gaps.argmax())  # the closed hours follow the time of day times[widest]
    if gaps[widest] == duration:
        return Session(step, pd.Timedelta(0), DAY)
    return Session(step, pd.Timedelta(int(times[(widest + 1) % len(times)])), pd.Timedelta(int(times[widest]) + duration))


def _with_days(hours: Session, wall: pd.DatetimeIndex, stray: bool = False) -> Session:
    """``hours`` open on the weekdays on which the sessions of the rows ``wall`` ``[R]`` open (those
    that are not stray, :func:`_common`; every one with ``stray``)."""
    opened = np.asarray((wall - hours.start).normalize().dayofweek)  # [R]
    return Session(hours.step, hours.start, hours.end, tuple(int(d) for d in _common(opened, stray)))


def holding(index: pd.DatetimeIndex, step: str) -> str:
    """The session that holds every row of ``index`` ``[n]`` (one item's, sorted, on one grid of
    ``step``), stray ones included: its hours leave out the widest stretch of the day without a row,
    its days the weekdays without one; the plain ``step`` where nothing is left out. What a row
    outside the session :func:`detect` read from the others needs to be kept."""
    wall = wall_clock(index)
    session = _with_days(_hours(wall.asi8 % DAY.value, step, stray=True), wall, stray=True)
    return session.step if session.trivial else session.alias


def suggest(index: pd.DatetimeIndex, step: str) -> str | None:
    """The session that one item's rows (``index`` ``[n]``, sorted) would fit at ``step`` (a plain
    fixed step that divides a day), for an error about rows too sparse for :func:`detect`: its
    hours leave out the widest stretch of the day without a row, its days the weekdays without one
    (when the rows span two weeks); None where no hour or day is empty, or the rows are off that grid."""
    if session_of(step) is not None or len(index) < 3 or (duration := _day_step(step)) is None:
        return None
    wall = wall_clock(index)
    time = wall.asi8 % DAY.value  # [n] ns since midnight
    if ((time - time.min()) % duration).any():
        return None
    session = _hours(time, to_offset(step).freqstr)
    if int(wall.asi8[-1]) - int(wall.asi8[0]) >= 14 * DAY.value:  # Python ints: no overflow for far typos
        session = _with_days(session, wall)
    return None if session.trivial else session.alias


def closed_early(session: Session, stamps: pd.DatetimeIndex, first: np.ndarray, where: list[str]) -> list[str]:
    """What the rows ``stamps`` ``[R]`` (sorted by item, then time, item ``i`` from row ``first[i]``,
    named ``where[i]``; every row a step of ``session``) show of sessions that close early, for a
    warning each: a session has one set of hours, so steps after an early close are missing values
    and get forecasts.

    A session day closes early where its rows hold every step from the open to its last one and
    two or more steps are left after it (rows missing at random do not make one).

    - A weekday whose session days (:data:`SESSION_DAYS` at least, a series' last day aside) close
      early in three in four or more, where the other weekdays' do in one in four at most: a short
      day every week (Saturdays 09:00-13:00 beside weekdays to 17:00),
      whose closed hours every forecast over such a day steps into.
    - Series whose last session day closes early at the step at which an earlier day of the data
      closed early too (a half day seen before): the forecast starts in what may be closed hours of
      that day.
    """
    if len(stamps) == 0:
        return []
    steps = session.steps_per_day
    positions, _ = session.positions(stamps)  # [R]
    item = np.repeat(np.arange(len(first)), np.diff(np.r_[first, len(stamps)]))  # [R]
    day = positions // steps  # [R]
    starts = np.flatnonzero(np.r_[True, (day[1:] != day[:-1]) | (item[1:] != item[:-1])])  # [G] each session day
    ends = np.r_[starts[1:], len(stamps)] - 1  # [G] its last row
    last_step = positions[ends] % steps  # [G]
    final = np.r_[item[starts[1:]] != item[starts[:-1]], True]  # [G] an item's last session day
    weekday = np.asarray((wall_clock(stamps[starts]) - session.start).normalize().dayofweek)  # [G]
    # a day that closes early: every step from the open to its last row held, and two or more left out
    # after it (rows missing at random do not make one)
    whole = (positions[starts] % steps == 0) & (ends - starts == last_step)  # [G]
    stops = whole & (last_step < steps - 2)  # [G]
    early = stops & ~final  # [G]
    said, regular = [], set()
    for w in session.days:
        days, others = ~final & (weekday == w), ~final & (weekday != w)
        if days.sum() >= SESSION_DAYS and 4 * early[days].sum() >= 3 * days.sum() \
                and 4 * early[others].sum() <= others.sum() and others.any():
            close = session.start + (int(last_step[days].max()) + 1) * session.step_duration  # the latest they hold
            name = DAY_NAMES[w]
            regular.add(w)
            drop = (f", e.g. forecast[~((forecast['timestamp'].dt.dayofweek == {w}) & "
                    f"(forecast['timestamp'].dt.strftime('%H:%M') >= '{_clock(close % DAY)}'))]"
                    if session.start + session.length <= DAY else "")
            said.append(f"the rows hold {name} sessions up to {_clock(close % DAY)} only ({int(early[days].sum())} of "
                        f"{int(days.sum())} {name}s end before {_clock(session.end)}, the session's close on the other "
                        f"days): a session has one set of hours, so {name}s' steps from {_clock(close % DAY)} are "
                        f"missing values, and every forecast over a {name} gives values there; drop those forecast "
                        f"rows (closed hours){drop}")
    halves = set(last_step[early].tolist())  # the steps at which earlier session days ended early
    short = [g for g in np.flatnonzero(final & stops) if int(last_step[g]) in halves and int(weekday[g]) not in regular]
    if short:
        g = short[0]
        seen = stamps[ends[early & (last_step == last_step[g])]]
        named = ", ".join(f"{where[item[h]]} (last row {stamps[ends[h]]})" for h in short[:3])
        before, more = ", ".join(str(t) for t in seen[:2]), " ..." if len(short) > 3 else ""
        said.append(f"{len(short)} series end early in their last session day, at the step at which earlier days of "
                    f"the data closed early (e.g. {before}): {named}{more}; their forecasts "
                    f"start at the next step of that day, in the session's hours ({_clock(session.start)}-"
                    f"{_clock(session.end)}). If the session closed early that day, add rows for its closed steps "
                    "with missing values (NaN) up to the close, so that the forecast starts at the next session")
    return said


#: Rows that closed hours or days would have held at the rows' rate in the open steps, for
#: :func:`detect` to take them as closed.
SESSION_EVIDENCE = 10
#: Session days at least half full of rows that :func:`detect` needs to see.
SESSION_DAYS = 3
#: The share of the median's rows below which a time of day or a weekday holds stray rows, not a
#: session (:func:`detect`): a row typed on a Saturday, an hour logged late.
STRAY_SHARE = 0.25


def _missed(session: Session, wall: pd.DatetimeIndex, within: np.ndarray) -> float:
    """The rows that the steps ``session`` closes would have held between consecutive rows of an
    item (``wall`` ``[R]`` naive wall clock, ``within`` ``[R - 1]``), at the rate at which the rows
    fill the open steps: (closed steps passed over) x (rows / open steps spanned)."""
    positions, _ = session.positions(wall)
    steps = np.diff(wall.asi8)[within] // session.step_duration.value  # [P] wall-clock steps between rows
    open_steps = np.diff(positions)[within]  # [P] open steps between them
    week = 7 * DAY.value // session.step_duration.value
    passed = np.where(steps <= week, steps - open_steps, 0)  # [P] closed steps between them; a longer gap is a gap
    if (passed > 0).sum() < 2:
        return 0.0  # a single pass shows no calendar
    rate = (len(open_steps) + 1) / max(int(open_steps.sum()) + 1, 1)
    return float(passed.sum()) * min(rate, 1.0)
