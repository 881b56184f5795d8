"""Which columns of a user frame are what, declared once.

``Forecaster.fit``'s column arguments become a :class:`Schema`; it is kept with the fitted model
(:class:`tsrec.fitted.FittedState`) and saved with it. Reading is not the schema's:
:func:`tsrec.data.source.read` reads a frame or Parquet data with a schema (``fit``, ``predict``,
``backtest``, the auto model's validation and the refits of ``backtest(refit_every=...)``); the
CLI, the GluonTS predictor and the Ray and Spark workers reach it through ``predict`` and
``backtest``.

A long frame in the column names users bring from other tools (:data:`CONVENTIONS`: AutoGluon's
``item_id``, ``timestamp``, ``target``, tsrec's own forecast names too, and Nixtla's ``unique_id``,
``ds``, ``y``) is read without naming its columns: :meth:`Schema.conventional` fills the roles left
unnamed, and the names given always win.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pandas.api.types import is_datetime64_any_dtype, is_numeric_dtype

from tsrec.config import CovariateConfig

__all__ = ["CONVENTIONS", "Schema"]

#: The long-frame column conventions read without column arguments: tool -> (id, time, target) columns.
CONVENTIONS: dict[str, tuple[str, str, str]] = {
    "AutoGluon": ("item_id", "timestamp", "target"),
    "Nixtla": ("unique_id", "ds", "y"),
}


@dataclass(frozen=True)
class Schema:
    """The roles of a frame's columns.

    time_col:   the timestamps' column (None: the frame's ``DatetimeIndex``).
    id_col:     the series id's column; makes the frame long (None: wide, one multivariate series).
    target_col: the column(s) to forecast (None: inferred, :func:`~tsrec.data.canonicalize`).
    covariates: the columns the model reads but does not forecast.
    convention: the tool whose column names (:data:`CONVENTIONS`) filled the roles not named
                (None: every role as given); see :meth:`conventional`.
    """

    time_col: Hashable | None = None
    id_col: Hashable | None = None
    target_col: Any = None
    covariates: CovariateConfig = field(default_factory=CovariateConfig)
    convention: str | None = field(default=None, compare=False)

    def conventional(self, columns: Sequence[Hashable]) -> Schema:
        """This schema for a frame with ``columns``: where the frame holds a convention's id column (or
        ``id_col`` names it: AutoGluon's ``id_column="item_id"``) and target column (the target unless
        ``target_col`` is named), a long frame's schema with the roles not named filled from that
        convention (the time column when the frame has it and ``time_col`` is not named; else the
        frame's index), :attr:`convention` naming it. Otherwise (an id column of another name, a wide
        frame) this schema. ``ValueError`` when the frame fits two conventions."""
        names = set(columns)
        fits = {tool: roles for tool, roles in CONVENTIONS.items()
                if (roles[0] in names if self.id_col is None else self.id_col == roles[0])
                and (self.target_col is not None or roles[2] in names)}
        if len(fits) > 1:
            raise ValueError(
                f"the frame has the columns of both {' and '.join(fits)}'s long-frame conventions "
                f"({', '.join(map(repr, sorted(c for roles in fits.values() for c in roles if c in names)))}); "
                "name its columns: id_col=..., time_col=..., target_col=...")
        if not fits:
            return self
        (tool, (id_col, time_col, target_col)), = fits.items()
        time = self.time_col if self.time_col is not None else time_col if time_col in names else None
        target = self.target_col if self.target_col is not None else target_col
        if (time, target) == (self.time_col, self.target_col) and self.id_col is not None:
            return self  # every role named: no convention read
        return dataclasses.replace(self, id_col=id_col, time_col=time, target_col=target, convention=tool)

    @property
    def note(self) -> str | None:
        """One line saying which convention named the columns (None when they were all given)."""
        if self.convention is None:
            return None
        return (f"read as a long frame in {self.convention}'s column names: id_col={self.id_col!r}, "
                f"time_col={self.time_col!r}, target_col={self.target_col!r} (name the columns to read others)")

    @property
    def columns(self) -> dict[str, Any]:
        """``time_col``, ``id_col`` and ``target_col`` as keyword arguments."""
        return {"time_col": self.time_col, "id_col": self.id_col, "target_col": self.target_col}

    def unread_note(self, columns: Sequence[Hashable], targets: Sequence[str]) -> str | None:
        """What ``fit`` warns of a frame with ``columns`` where some column has no role, so that
        nothing reads it (not the time or id column, not one of ``targets``, the target columns
        read, as text, not a covariate): its name and how to give it one; None where every column
        is read."""
        used = {str(c) for c in (self.time_col, self.id_col) if c is not None}
        used |= set(targets) | set(self.covariates.columns)
        unread = [c for c in columns if str(c) not in used]
        if not unread:
            return None
        many = len(unread) > 1
        return (f"the frame's column{'s' if many else ''} {unread} {'are' if many else 'is'} not read by the model: "
                "name a column it should read as a covariate (past_covariates=[...]: known up to the forecast origin; "
                "future_covariates=[...]: known over the horizon too; static_covariates=[...]: one value per series), "
                "or drop it")

    def require_layout(self, df: pd.DataFrame, targets: Sequence[str]) -> None:
        """``ValueError`` when ``df`` is not in the layout this schema reads, with the reshaping
        that makes it so; for a frame given where the schema is fixed (``predict``), whose
        column arguments cannot be passed again. ``targets`` are the fitted target columns (as
        text): a wide frame must hold them all (in any order), a long frame its id column."""
        if self.id_col is not None:
            if self.id_col not in df.columns:
                keep = "ignore_index=False" if self.time_col is None else f"id_vars=[{self.time_col!r}]"
                raise ValueError(
                    f"the model was fitted on a long frame (one row per series and time step, series id in "
                    f"column {self.id_col!r}) but this frame has no column {self.id_col!r} (columns "
                    f"{list(df.columns)}); melt a wide frame into that layout first, e.g. df.melt({keep}, "
                    f"var_name={self.id_col!r}, value_name={targets[0]!r})"
                )
            self._require_time(df)
            return
        given = {str(c) for c in df.columns}
        missing = [c for c in targets if c not in given]
        if not missing:
            self._require_time(df)
            return
        times = [c for c in df.columns if c == self.time_col or is_datetime64_any_dtype(df[c].dtype)]
        text = [c for c in df.columns if c not in times and not is_numeric_dtype(df[c].dtype)]
        if text:  # a long frame: its id column holds text
            values = [c for c in df.columns if c not in times and c not in text]
            index = "" if isinstance(df.index, pd.DatetimeIndex) else f"index={self._time_name(df)!r}, "
            value = values[0] if len(values) == 1 else "<value column>"
            back = "" if self.time_col is None else ".reset_index()"
            raise ValueError(
                f"the model was fitted on a wide frame (one column per series: {list(targets)}) but this frame "
                f"looks long (text column {text[0]!r}, no column {missing[0]!r}); pivot it to one column per "
                f"series first, e.g. df.pivot({index}columns={text[0]!r}, values={value!r}){back}"
            )
        raise ValueError(
            f"columns differ from the fitted frame: it lacks the target columns {missing} (it has "
            f"{list(df.columns)}); pass a frame "
            f"with every column the model was fitted on: {list(targets)} (in any order)"
        )

    def _require_time(self, df: pd.DataFrame) -> None:
        """``ValueError`` when ``df`` holds its timestamps elsewhere than the schema says."""
        if self.time_col is None and not isinstance(df.index, pd.DatetimeIndex):
            found = self._time_name(df)
            raise ValueError(
                f"the model was fitted on a frame indexed by its timestamps (a DatetimeIndex) but this frame has a "
                f"{type(df.index).__name__}; set its timestamps as the index first, e.g. df.set_index({found!r})"
            )
        if self.time_col is not None and self.time_col not in df.columns:
            index = "its index" if isinstance(df.index, pd.DatetimeIndex) else "no column of it"
            raise ValueError(
                f"the model was fitted on a frame with its timestamps in column {self.time_col!r}, which this "
                f"frame lacks (timestamps in {index}); name them so first, e.g. "
                f"df.rename_axis({self.time_col!r}).reset_index()"
            )

    def _time_name(self, df: pd.DataFrame) -> Hashable:
        """How a reshaping hint names ``df``'s timestamps: the schema's time column, else the first
        datetime column of ``df``, else a placeholder."""
        if self.time_col is not None:
            return self.time_col
        found = [c for c in df.columns if is_datetime64_any_dtype(df[c].dtype)]
        return found[0] if found else "<time column>"
