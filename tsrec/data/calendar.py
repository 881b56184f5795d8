"""The calendar of a panel: its step and, for data recorded only in opening hours, its session.

tsrec spells a calendar as one ``freq`` string (``"h"``, ``"W-SUN"``, ``"h 09:00-17:00 Mon-Fri"``:
:mod:`tsrec.data.sessions`), which is what users pass and what a saved model and the settings
hold. Inside, the string is read once, where the data are read (or where a saved model or the
settings hand one over), into a :class:`Calendar`: the panel carries it, and the code that
depends on whether the steps skip closed hours asks ``calendar.session`` instead of parsing the
string again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tsrec.data.sessions import Session, session_of

__all__ = ["Calendar"]


@dataclass(frozen=True)
class Calendar:
    """A panel's grid of steps.

    step:    pandas alias of one step (``"h"``, ``"15min"``, ``"W-SUN"``, ``"QE-DEC"``); a session's step.
    session: the hours and weekdays the steps are open (:class:`~tsrec.data.sessions.Session`: its
             grid skips the closed ones), or None: every step of ``step`` is on the grid.
    """

    step: str
    session: Session | None = None

    def __post_init__(self) -> None:
        if self.session is not None and (self.session.step != self.step or self.session.trivial):
            raise ValueError(f"a calendar of step {self.step!r} cannot hold the session {self.session.alias!r}: "
                             "build it with Calendar.of(freq)")

    @classmethod
    def of(cls, freq: str) -> Calendar:
        """The calendar that ``freq`` spells, in tsrec's canonical spelling
        (:func:`tsrec.data.time_features.normalize_freq`'s, as the data were read and a model saved);
        ``ValueError`` for a session spelt wrong (:func:`~tsrec.data.sessions.session_of`)."""
        return _calendar_of(freq)

    @property
    def freq(self) -> str:
        """tsrec's spelling of the calendar: the session's (``"h 09:00-17:00 Mon-Fri"``) or the step."""
        return self.step if self.session is None else self.session.alias

    def __str__(self) -> str:
        return self.freq


@functools.lru_cache(maxsize=256)
def _calendar_of(freq: str) -> Calendar:
    session = session_of(freq)
    if session is None:
        return Calendar(freq)
    return Calendar(session.step) if session.trivial else Calendar(session.step, session)  # trivial: nothing closed
