"""statsforecast's automatic models as tsrec models: ``ets``, ``theta``, ``ces``, ``dynamic_theta``,
``arima`` and ``mstl`` (and, on this base, the intermittent-demand models of
:mod:`tsrec.models.intermittent`).

statsforecast is an optional extra (``pip install "tsrec[stats]"``), imported only when one of
these models is built or forecasts. They are what a statsforecast user runs:

- **Fitted once, at fit**: ``fit`` fits each series and channel on all its history
  (:meth:`StatsModel.fit_series`, one ``StatsForecast.fit`` call for all of them) and keeps only the
  parameters statsforecast's ``forward`` needs (:class:`~tsrec.models.parameters.Parameters`: ETS
  its ``m``, components and ``par``; Theta its ``m``, model type, initial level, alpha and theta;
  CES its ``m``, season type and alphas and betas; MSTL its seasons and its trend's ETS), saved
  with the model as tensors.
- **Carried forward**: ``forward(batch)`` applies each window's series' parameters to the window's
  history (statsforecast's ``forward(y, h)``), so that ``predict`` and a backtest's windows fit
  nothing: exactly ``StatsForecast.cross_validation(refit=False)``. A window is fitted again (on its
  own history, all such windows in one statsforecast call) only where the user asks
  (``predict(refit=True)``, :func:`refitting`), where its history is longer than
  :data:`~tsrec.models.parameters.REFIT_GROWTH` times the history its series was fitted on
  (:func:`~tsrec.models.parameters.refits`), where the carried forecast leaves the history faster
  than it ever moved (:func:`diverges`, with a warning), or where its series has no parameters (a model saved
  before they were kept, a series or channel with nothing observed at fit, a window built by hand
  without ``series``). ``arima`` keeps none and fits every window (:class:`ARIMA` says why).
- **The history, up to its last 2,500 steps**: each model reads every series whole
  (``ForecastModel.whole_history``) up to its last :data:`LOCAL_HISTORY` steps (why, there): its
  context is the longest series (or that cap), a shorter series' window starts with unobserved
  steps that are not its history and are left out. ``arima`` reads at most its last
  :attr:`ARIMA.max_history` steps, as its search costs seconds per series, and ``mstl`` all of
  them, as its seasons need two cycles each (a ``context_length`` set by the user caps every model
  the same way).
- **The calendar's season** (:func:`tsrec.models.naive.season_for`), confirmed or overruled by the
  data, given up only where the longest history cannot hold two seasons; ``mstl`` takes the
  calendar's several seasons (:func:`tsrec.models.naive.seasons_for`).
- **Original units**: the windows carry their scaler's statistics (``target_loc``,
  ``target_scale``), with which each history is unscaled before statsforecast sees it (a zero
  comes back as a zero, not as the round trip's 1e-16: :func:`unscaled`).
- **Missing values**: a history starts at its first observed step; a gap inside it is filled
  with the last observed value before it (statsforecast takes no NaN); a history whose last
  values are missing is forecast from its last observed step, ``gap + H`` steps ahead, and the
  last ``H`` of them are the forecast of the requested steps (``predict`` names such series in
  a warning). A history statsforecast cannot fit gets its last value, with a warning at the fit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import math
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from tsrec._checks import check_int
from tsrec.batch import ForecastBatch
from tsrec.config import DataFacts
from tsrec.models.base import ForecastModel
from tsrec.models.naive import SeasonalConfig, choose_seasons
from tsrec.models.parameters import (ETS_WIDTH, FITTED, LAST_VALUE, NONE, Parameters, ets_codes, ets_components,
                                     ets_count, ets_fit, ets_season, ets_valid, keeps_variant, refits)

__all__ = ["ARIMA", "CES", "ETS", "LOCAL_HISTORY", "MSTL", "STATS_EXTRA", "DynamicTheta", "diverges", "ces_state_radius",
           "MSTLConfig", "StatsConfig", "StatsModel", "Theta", "fill_context", "histories", "refitting",
           "require_statsforecast", "statsforecast_installed", "stl_jumps", "unscaled"]

#: The most steps of each series a statistical model reads (its last ones): AutoGluon's
#: ``max_ts_length`` for its local models. statsforecast's Theta costs about the square of the
#: steps (AutoTheta on one synthetic series: 2.6 CPU-s for 4,000 steps, 13.3 for 8,000; 56 on ETTh1's
#: 17,180), and on 18 long hourly columns of ETTh1, ETTh2 and WTH the cap lowered each model's MSE in the
#: geometric mean, 0.70x-0.95x, worse by more than 5% on 7 of 72 model-column pairs
#: (benchmarks/results/stats_history.md). MSTL reads all of it (:class:`MSTL`).
LOCAL_HISTORY = 2500

#: What installs statsforecast with tsrec.
STATS_EXTRA = 'pip install "tsrec[stats]"'
#: The registered models statsforecast fits.
STATS_MODELS = ("ets", "theta", "ces", "dynamic_theta", "arima", "mstl", "croston", "adida", "imapa", "tsb")


def statsforecast_installed() -> bool:
    """Whether statsforecast can be imported (without importing it)."""
    if "statsforecast" in sys.modules:
        return sys.modules["statsforecast"] is not None
    return importlib.util.find_spec("statsforecast") is not None


def require_statsforecast() -> ModuleType:
    """``statsforecast.models``, or a ``ModuleNotFoundError`` naming the extra that installs it."""
    try:
        importlib.import_module("statsforecast")
        return importlib.import_module("statsforecast.models")
    except ImportError as err:
        raise ModuleNotFoundError(f"the statistical models ({', '.join(STATS_MODELS)}; and backtest's ets/theta "
                                  f"baselines) need statsforecast, which is not installed: {STATS_EXTRA}") from err


@dataclass(frozen=True)
class StatsConfig(SeasonalConfig):
    """``season_length`` as :class:`~tsrec.models.naive.SeasonalConfig`, with two seasons needed in
    the history read (statsforecast fits a seasonal model only on at least two seasons)."""

    SEASONS_NEEDED: ClassVar[int] = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.revin:
            raise ValueError("the statistical models fit on each history's values as they are: RevIN does not apply "
                             "to them; leave revin out")
        if not statsforecast_installed():  # at Forecaster("ets", ...), before any data is read
            require_statsforecast()


@dataclass(frozen=True)
class MSTLConfig(StatsConfig):
    """``season_lengths``: MSTL's seasons (steps, each at least 2). None: the calendar's several
    seasons the history holds twice (:func:`~tsrec.models.naive.choose_seasons`: 24 and 168 for
    hourly data over two weeks), or ``(season_length,)`` where that is set; empty: no season (the
    trend forecaster alone)."""

    season_lengths: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.season_lengths is not None:
            object.__setattr__(self, "season_lengths",
                               tuple(sorted({check_int("each of season_lengths", m, 2) for m in self.season_lengths})))

    def unresolved(self) -> list[str]:
        return super().unresolved() + (["season_lengths"] if self.season_lengths is None else [])

    def resolved(self, data: DataFacts) -> MSTLConfig:
        config = super().resolved(data)
        seasons = config.season_lengths
        if seasons is None and config.context_length is not None:
            seasons = (() if self.season_length == 1 else (self.season_length,)) if self.season_length is not None \
                else choose_seasons(data.cycles, data.periods, config.context_length, self.SEASONS_NEEDED)
        return dataclasses.replace(config, season_lengths=seasons)


def fill_context(values: np.ndarray, observed: np.ndarray) -> np.ndarray | None:
    """``values`` ``[L]`` with each unobserved entry replaced by the last observed one before it
    (by the first observed one before any), as statsforecast takes no NaN; None when nothing is
    observed."""
    seen = np.flatnonzero(observed)
    if not len(seen):
        return None
    last = np.maximum.accumulate(np.where(observed, np.arange(len(values)), -1))  # [L] last observed position
    return values[np.where(last < 0, seen[0], last)]


def histories(values: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The histories statsforecast fits of the columns ``values``, ``observed`` ``[K, L]``: each from its
    first observed step to its last, gaps filled with the last observed value before them
    (:func:`fill_context`), laid end to end: ``y`` ``[sum n_k]``, the lengths ``n`` ``[K]`` (0 for a
    column with nothing observed) and each column's ``gap`` ``[K]``, the unobserved steps after its
    last observed one."""
    steps = np.arange(values.shape[1])
    last_seen = np.maximum.accumulate(np.where(observed, steps, -1), axis=1)  # [K, L]
    any_seen = observed.any(axis=1)  # [K]
    first = np.where(any_seen, np.argmax(observed, axis=1), values.shape[1])  # [K]
    last = last_seen[:, -1]  # [K], -1 where nothing is observed
    inside = (steps >= first[:, None]) & (steps <= last[:, None])  # [K, L]
    filled = np.take_along_axis(values, np.maximum(last_seen, 0), axis=1)  # [K, L]
    lengths = inside.sum(axis=1)
    return filled[inside], lengths, np.where(any_seen, values.shape[1] - 1 - last, 0)


def diverges(history: np.ndarray, forecast: np.ndarray, gap: int) -> bool:
    """Whether ``forecast`` ``[H]`` (the steps ``gap + 1 .. gap + H`` after ``history`` ``[n]``)
    leaves the history faster than it ever moved: a value that is not finite, or one ``h`` steps
    ahead beyond the history's range by more than ``h`` times its largest one-step change. Parameters
    fitted on a shorter history and carried forward can do this where a fit of the window's own
    history does not (statsforecast's AutoCES, fitted on weekly precipitation of range 0-128 and
    carried 26 and 39 weeks past its fit, forecast 5,871 and -16,314; fitted on those windows, 9-43)."""
    if not np.isfinite(forecast).all():
        return True
    low, high = history.min(), history.max()
    move = np.abs(np.diff(history)).max() if len(history) > 1 else 0.0
    move = max(move, 1e-6 * max(abs(low), abs(high), 1.0))  # a flat history: rounding is not a move
    reach = move * (gap + 1 + np.arange(len(forecast)))  # [H]
    return bool(((forecast < low - reach) | (forecast > high + reach)).any())


#: Unscaled values within this many units in the last place of the round trip's terms of 0 are 0.
ROUND_TRIP_ULPS = 16


def unscaled(scaled: np.ndarray, loc: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``scaled * scale + loc`` (float64, broadcast), with the values the scaler's round trip left a
    few units in the last place from 0 (:data:`ROUND_TRIP_ULPS` of ``|scaled * scale| + |loc|``) set to
    0 again: a zero demand must stay a zero for the intermittent-demand models, which count them."""
    spread = scaled * scale
    raw = spread + loc
    noise = ROUND_TRIP_ULPS * np.finfo(np.float64).eps * (np.abs(spread) + np.abs(loc))
    return np.where(np.abs(raw) <= noise, 0.0, raw)


@contextlib.contextmanager
def refitting(model: nn.Module) -> Iterator[None]:
    """Within it, every statistical model of ``model`` (itself, or an ensemble's members) fits
    each window's history again instead of carrying its fitted parameters forward
    (``Forecaster.predict(..., refit=True)``); the parameters are left as they are."""
    stats = [m for m in model.modules() if isinstance(m, StatsModel)]
    for m in stats:
        m.refit_all = True
    try:
        yield
    finally:
        for m in stats:
            m.refit_all = False


class _LastValue:
    """statsforecast's ``fallback_model`` for a history its model cannot fit: the last value; keeps
    the histories it was asked for, so that the model can say which and why."""

    alias = "LastValue"

    def __init__(self) -> None:
        self.failed: list[np.ndarray] = []

    def new(self) -> _LastValue:
        """A copy sharing the list of failures (``StatsForecast.fit`` takes one per series)."""
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other

    def fit(self, y: np.ndarray, X: Any = None) -> _LastValue:  # noqa: N803 - statsforecast's argument
        self.failed.append(np.array(y))
        return self

    def forecast(self, y: np.ndarray, h: int, **_: Any) -> dict[str, np.ndarray]:
        self.failed.append(np.array(y))
        return {"mean": np.full(h, y[-1])}

    def __repr__(self) -> str:
        return self.alias


class StatsModel(ForecastModel):
    """A statsforecast model fitted once per series and channel and carried forward over windows
    (see the module); nothing to train.

    ``forward(batch) -> [B, H, C]`` in the batch's scaled units: each window's channels are unscaled
    with the window's ``target_loc`` / ``target_scale`` (taken as they are without them), cut to
    their histories (:func:`histories`), forecast from their series' :class:`Parameters` (the
    batch's ``series``) or fitted again (:meth:`forecast_histories`), and scaled back.
    """

    config_class = StatsConfig
    trainable = False
    whole_history = True
    #: What the model does with a series whose last values are missing (``predict``'s warning).
    missing_tail: ClassVar[str] = ("the statistical models forecast each from its last observed step, the horizon "
                                   "lengthened by the gap, and give the requested steps (the end of that forecast)")
    #: The statsforecast class (``statsforecast.models.<name>``).
    statsforecast_name: ClassVar[str]
    #: Whether the model keeps its fitted parameters and carries them forward (:class:`ARIMA` and
    #: ``TSB`` do not): such a model packs a fit with :class:`~tsrec.models.parameters.Packing`'s
    #: ``encode`` and unpacks it with its ``decode``, which only it defines and only it is asked for.
    carries_parameters: ClassVar[bool] = True
    #: The last steps of each series read (:data:`LOCAL_HISTORY`; :class:`ARIMA` and :class:`MSTL` set their own).
    max_history = LOCAL_HISTORY
    #: Whether a fit may not forget the states it starts from (:meth:`forgets_start`; :class:`CES`).
    checks_start: ClassVar[bool] = False

    def __init__(self, config: StatsConfig) -> None:
        super().__init__(config)
        self._models = require_statsforecast()
        self.parameters = Parameters.empty(config.n_channels, self.code_width())
        #: Set by :func:`refitting`: every window is fitted on its own history.
        self.refit_all = False
        self._remembering: tuple[Parameters, np.ndarray] | None = None  # :meth:`_remembers_start`'s, per parameters

    def statsforecast_model(self) -> Any:
        """The statsforecast model fitted on every history."""
        return getattr(self._models, self.statsforecast_name)(season_length=self.config.season_length)

    # ------------------------------------------------------------------ the parameters
    def code_width(self) -> int:
        """How many codes (:class:`Parameters`) one fit of this model takes (none: it keeps no
        parameters; each model that carries them says how it packs them)."""
        return 0

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        """``[K]`` whether the codes ``[K, J]`` describe a fit of this model."""
        return np.zeros(len(codes), bool)

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        """``[K]`` the values a fit with these codes ``[K, J]`` has."""
        return np.zeros(len(codes), np.int64)

    def get_extra_state(self) -> dict[str, Tensor]:
        """The fitted :class:`Parameters` as tensors: what ``state_dict`` saves of them."""
        return self.parameters.tensors()

    def set_extra_state(self, state: Any) -> None:
        """Take the parameters ``state`` (:meth:`get_extra_state`'s), checked
        (:meth:`Parameters.from_tensors`: a ``ValueError`` naming what is wrong)."""
        self.parameters = Parameters.from_tensors(state, self, self.config.n_channels)

    def chosen_model(self, codes: np.ndarray) -> Any | None:
        """The statsforecast model restricted to the choices of a fit with ``codes`` ``[J]`` (ETS
        its components, Theta its model type, CES its season type): it fits only that variant's
        parameters. None where the model chooses nothing (this default)."""
        return None

    def forgets_start(self, codes: np.ndarray, values: np.ndarray) -> bool:
        """Whether a fit of ``codes`` ``[J]`` and ``values`` forgets the states a history starts it
        from, so that its parameters carried to another history forecast as they do on their own
        (True: this default, for every model whose :data:`checks_start` is False)."""
        return True

    def _remembers_start(self) -> np.ndarray:
        """``[N, C]`` bool: the fitted series and channels whose fit does not forget its start
        (:meth:`forgets_start`), worked out once per :attr:`parameters`."""
        fitted = self.parameters
        if self._remembering is None or self._remembering[0] is not fitted:
            remembers = np.zeros(fitted.status.shape, dtype=bool)
            for n, c in np.argwhere(fitted.status == FITTED):
                remembers[n, c] = not self.forgets_start(*fitted.entry(int(n), int(c)))
            self._remembering = (fitted, remembers)
        return self._remembering[1]

    def fit_series(self, values: Sequence[np.ndarray], observed: Sequence[np.ndarray],
                   like: ForecastModel | None = None) -> None:
        """Fit every series' channels on their histories (the last ``context_length`` steps of each,
        cut by :func:`histories`), all in one statsforecast call (:meth:`_fit_groups`), and keep
        their :class:`Parameters`; a history statsforecast cannot fit is kept as its last value,
        with a warning naming how many and why. ``like``: this model fitted already on the first
        steps of the same series (auto's validated candidate). A series that grew by at most
        :data:`~tsrec.models.parameters.VARIANT_GROWTH` since, every channel of it fitted there
        with a fit that forgets its start, keeps that fit whole (:meth:`_carried`: the parameters
        validation scored, carried forward as ``predict`` carries them); otherwise each
        series and channel it fitted keeps the variant it chose (:meth:`chosen_model`), its
        parameters fitted again (an earlier calibration block's shorter history too); one grown
        further, or whose variant cannot be fitted, is fitted by the full search."""
        if not self.carries_parameters:
            return
        cap, channels = self.config.context_length, self.config.n_channels
        parts, lengths, steps = [], [], []
        for x, seen in zip(values, observed):
            x, seen = np.asarray(x, dtype=np.float64)[-cap:], np.asarray(seen, dtype=bool)[-cap:]  # [T, C]
            y, n, _ = histories(x.T, seen.T)  # the channels' histories
            parts.append(y)
            lengths.append(n)
            steps.append(len(x))
        y, lengths = np.concatenate(parts), np.concatenate(lengths)  # [sum n], [N * C] channel fastest
        starts = np.r_[0, np.cumsum(lengths)[:-1]]
        status = np.full(len(lengths), NONE, np.int8)
        codes = np.zeros((len(lengths), self.code_width()), np.int64)
        fits: list[np.ndarray] = [np.zeros(0)] * len(lengths)
        steps = np.asarray(steps, np.int64)  # [N]
        carried = self._carried(like, steps)  # [N]
        read = steps.copy()  # [N] the steps each series' parameters are fitted on
        for n in np.flatnonzero(carried):
            read[n] = like.parameters.steps[n]
            for c in range(channels):
                k = n * channels + c
                status[k] = FITTED
                codes[k], fits[k] = like.parameters.entry(n, c)
        kept = np.flatnonzero((lengths > 0) & ~np.repeat(carried, channels))
        if kept.size:
            choices = self._choices(like, steps)
            for k, fitted in zip(kept, self._fit_chosen(y, starts[kept], lengths[kept],
                                                        None if choices is None else choices[kept])):
                if fitted is None:  # nothing to keep of this history: each window is fitted on its own
                    continue
                if isinstance(fitted, _LastValue) or type(fitted).__name__ == "Naive":  # AutoCES's on a flat one
                    status[k] = LAST_VALUE
                else:
                    code, fits[k] = self.encode(fitted)
                    status[k], codes[k] = FITTED, code
        self.parameters = Parameters(status.reshape(-1, channels), read, codes.reshape(len(steps), channels, -1),
                                     np.concatenate(fits), np.cumsum([len(f) for f in fits], dtype=np.int64))

    def _carried(self, like: ForecastModel | None, steps: np.ndarray) -> np.ndarray:
        """``[N]`` whether each series, now of ``steps`` ``[N]`` steps, keeps ``like``'s fit whole:
        ``like`` is this model fitted on the series' first steps, every channel of the series was
        fitted there and forgets its start (:meth:`forgets_start`: a CES fit whose state map grows
        would be fitted again on every longer history, at every ``predict``; it is fitted again here,
        once), and the series is at least as long now and at most
        :data:`~tsrec.models.parameters.VARIANT_GROWTH` times longer
        (:func:`~tsrec.models.parameters.keeps_variant`). Its ``steps`` stay the fitted ones, which
        :func:`~tsrec.models.parameters.refits` measures later growth against."""
        if (fitted := self._fitted_like(like, len(steps))) is None:
            return np.zeros(len(steps), bool)
        whole = (fitted.status == FITTED) & ~like._remembers_start()  # [N, C]
        return whole.all(axis=1) & (steps >= fitted.steps) & keeps_variant(steps, fitted.steps)

    def _fitted_like(self, like: ForecastModel | None, series: int) -> Parameters | None:
        """``like``'s parameters where it is this model fitted on the same ``series`` series (auto's
        validated candidate), else None."""
        if not isinstance(like, StatsModel) or type(like) is not type(self) \
                or like.parameters.status.shape != (series, self.config.n_channels):
            return None
        return like.parameters

    def _choices(self, like: ForecastModel | None, steps: np.ndarray) -> np.ndarray | None:
        """``[N * C, J]`` the codes of ``like``'s fit of each series' channels (series-major, channel
        fastest) where the series, now of ``steps`` ``[N]`` steps, keeps that variant
        (:func:`~tsrec.models.parameters.keeps_variant`), rows of -1 where not or where ``like``
        fitted none; None without ``like``, or where it is another model or fitted other series."""
        width = self.code_width()
        if width == 0 or (fitted := self._fitted_like(like, len(steps))) is None:  # no choice kept
            return None
        codes = fitted.codes.reshape(len(steps) * self.config.n_channels, width).copy()  # [N * C, J]
        kept = (fitted.status == FITTED) & keeps_variant(steps, fitted.steps)[:, None]  # [N, C]
        codes[~kept.ravel()] = -1
        return codes

    def _fit_chosen(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                    choices: np.ndarray | None) -> list[Any]:
        """:meth:`_fit_groups` of the histories (``starts``, ``lengths`` ``[K]`` into ``y``), those with
        ``choices`` (``[K, J]`` codes, rows of -1 for none) fitted as the variant chosen there, one
        statsforecast call per variant; a history that variant cannot fit, by the full search."""
        out: list[Any] = [None] * len(lengths)
        searched = np.ones(len(lengths), bool)  # [K] those left to the full search
        if choices is not None:
            variants, which = np.unique(choices, axis=0, return_inverse=True)
            for v, codes in enumerate(variants):
                model = self.chosen_model(codes) if (codes >= 0).all() else None
                if model is None:
                    continue
                group = np.flatnonzero(which.ravel() == v)
                for k, fitted in zip(group, self._statsforecast_fit(model, y, starts[group], lengths[group],
                                                                    report=False)):
                    if not isinstance(fitted, _LastValue):
                        out[k], searched[k] = fitted, False
        rest = np.flatnonzero(searched)
        if rest.size:
            for k, fitted in zip(rest, self._fit_groups(y, starts[rest], lengths[rest])):
                out[k] = fitted
        return out

    def _fit_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[Any]:
        """The statsforecast fits (or :class:`_LastValue`, or None where the model keeps nothing of a
        history: its windows are fitted on their own) of the histories (``starts``, ``lengths``
        ``[K]`` into ``y``), in order."""
        return self._statsforecast_fit(self.statsforecast_model(), y, starts, lengths)

    # ------------------------------------------------------------------ forecasting
    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']`` values, every one observed and taken as they are -> ``[B, H, C', 1]``
        (each window fitted on its own history: there is no ``series``). The Forecaster calls
        :meth:`forward`, which also reads the windows' observed masks, series and scaler statistics."""
        return self.forward({"past_target": past_target}).unsqueeze(-1)

    def forward(self, batch: ForecastBatch) -> Tensor:
        past = batch["past_target"].double().cpu().numpy()  # [B, Lc, C]
        size, length, channels = past.shape
        observed = batch["past_observed"].cpu().numpy() > 0 if "past_observed" in batch else np.ones(past.shape, bool)
        if "target_loc" in batch:  # the Forecaster's windows: scaled values and their scaler's statistics
            loc = batch["target_loc"].double().cpu().numpy()[:, None, :]  # [B, 1, C]
            scale = batch["target_scale"].double().cpu().numpy()[:, None, :]
        else:  # a batch built by hand: its values as they are
            loc, scale = np.zeros((size, 1, channels)), np.ones((size, 1, channels))
        raw = unscaled(past, loc, scale)  # [B, Lc, C]
        columns = raw.transpose(0, 2, 1).reshape(size * channels, length)  # [B*C, Lc], channel fastest
        seen = observed.transpose(0, 2, 1).reshape(size * channels, length)
        y, lengths, gaps = histories(columns, seen)
        rows = batch["series"].cpu().numpy() if "series" in batch else None  # [B]
        origin = batch["origin"].cpu().numpy() if "origin" in batch else np.full(size, length)  # [B] steps before
        read = np.minimum(origin, length)
        out = self._forecast_windows(y, lengths, gaps, self._plan(rows, read, origin, channels), rows, channels)
        out = out.reshape(size, channels, -1).transpose(0, 2, 1)  # [B, H, C]
        scaled = (out - loc) / scale
        return torch.from_numpy(scaled).to(batch["past_target"].dtype).to(batch["past_target"].device)

    def _plan(self, rows: np.ndarray | None, read: np.ndarray, origin: np.ndarray, channels: int) -> np.ndarray:
        """``[B * C]`` (channel fastest) what each channel of the windows of series ``rows`` ``[B]``
        (None: a batch without them), which read ``read`` ``[B]`` steps of the ``origin`` ``[B]``
        before them, is forecast from: its
        series' :data:`FITTED` parameters, its :data:`LAST_VALUE`, or :data:`NONE` (fitted again on
        the window: asked for, no parameters, :func:`refits`, or a fit that does not forget its
        start on another history than its own, :meth:`forgets_start`)."""
        plan = np.full((len(read), channels), NONE, np.int8)  # [B, C]
        fitted = self.parameters
        if self.refit_all or rows is None or not len(fitted.steps):
            return plan.ravel()
        carried = (rows >= 0) & (rows < len(fitted.steps))  # [B] series with parameters
        carried[carried] = ~refits(read[carried], fitted.steps[rows[carried]])
        plan[carried] = fitted.status[rows[carried]]
        if self.checks_start:  # its own history gives the fit's forecast; another starts it elsewhere
            # (a series longer than the steps a fit reads is read from another start at every origin)
            moved = np.flatnonzero(carried)[origin[carried] != fitted.steps[rows[carried]]]  # [b]
            plan[moved] = np.where(self._remembers_start()[rows[moved]], NONE, plan[moved])
        return plan.ravel()

    def _forecast_windows(self, y: np.ndarray, lengths: np.ndarray, gaps: np.ndarray, plan: np.ndarray,
                          rows: np.ndarray | None, channels: int) -> np.ndarray:
        """The forecasts ``[K, H]`` of the ``K = B * C`` histories laid end to end in ``y``
        (``lengths`` ``[K]``; NaN rows for the empty ones) of the windows of series ``rows`` ``[B]``
        by ``plan`` (:meth:`_plan`): the fitted parameters' ``forward``, the last value, or one
        statsforecast fit of all the others; each the last ``H`` of ``gaps[k] + H`` steps after its
        history. A fit whose ``forward`` fails on a window is fitted again on it, with a warning."""
        horizon = self.config.prediction_length
        out = np.full((len(lengths), horizon), np.nan)
        starts = np.r_[0, np.cumsum(lengths)[:-1]]  # [K] each history's first value in y
        kept = lengths > 0
        last = np.flatnonzero(kept & (plan == LAST_VALUE))
        out[last] = y[starts[last] + lengths[last] - 1, None]
        again = kept & (plan == NONE)
        failed: list[str] = []
        diverged: list[float] = []
        carried = np.flatnonzero(kept & (plan == FITTED))
        if carried.size:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)  # statsforecast's own on flat series
                for k in carried.tolist():
                    history, gap = y[starts[k]:starts[k] + lengths[k]], int(gaps[k])
                    try:
                        model = self.decode(*self.parameters.entry(int(rows[k // channels]), k % channels))
                        out[k] = model.forward(y=history, h=gap + horizon)["mean"][gap:]
                    except Exception as err:  # noqa: BLE001 - statsforecast raises many kinds; fitted again
                        again[k] = True
                        failed.append(f"{type(err).__name__}: {err}")
                        continue
                    if diverges(history, out[k], gap):
                        again[k] = True
                        diverged.append(float(np.max(np.abs(out[k]))))
        if failed:
            warnings.warn(f"{self.statsforecast_name}'s fitted parameters could not be applied to {len(failed)} "
                          f"window(s) ({failed[0]}); they were fitted on their own history", UserWarning,
                          stacklevel=4)
        if diverged:
            warnings.warn(f"{self.statsforecast_name}'s fitted parameters forecast {len(diverged)} window(s) away from "
                          f"their history faster than it ever moved (up to {max(diverged):.4g} in absolute value); "
                          "they were fitted on their own history", UserWarning, stacklevel=4)
        if again.any():
            out[again] = self.forecast_histories(y, starts[again], lengths[again], gaps[again], horizon)
        return out

    def forecast_histories(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray, gaps: np.ndarray,
                           horizon: int) -> np.ndarray:
        """The forecasts ``[K, horizon]`` of the ``K`` histories (``starts``, ``lengths`` ``[K]`` into
        ``y``, none empty) fitted on themselves, each the last ``horizon`` of ``gaps[k] + horizon``
        steps after its history: one statsforecast call (:meth:`_forecast_groups` groups them
        where the model needs to)."""
        ahead = horizon + int(gaps.max())
        forecasts = self._forecast_groups(y, starts, lengths, ahead)  # [K, ahead]
        steps = gaps[:, None] + np.arange(horizon)  # [K, H] the requested steps of each
        return np.take_along_axis(forecasts, steps, axis=1)

    def _forecast_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray, ahead: int) -> np.ndarray:
        """``ahead`` steps after each history (``starts``, ``lengths`` ``[K]`` into ``y``): ``[K, ahead]``."""
        return self._statsforecast(self.statsforecast_model(), y, starts, lengths, ahead)

    # ------------------------------------------------------------------ statsforecast's calls
    @staticmethod
    def _long_frame(y: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Any:
        """The histories (``starts``, ``lengths`` ``[K]`` into ``y``) as statsforecast's long frame:
        ``unique_id`` ``0..K-1`` (in order), ``ds`` the step, ``y``."""
        import pandas as pd

        offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)  # [sum n] each value's history's first place
        steps = np.arange(int(lengths.sum())) - offsets  # [sum n] the value's step in its history
        return pd.DataFrame({"unique_id": np.repeat(np.arange(len(lengths)), lengths), "ds": steps,
                             "y": y[np.repeat(starts, lengths) + steps]})

    def _statsforecast_fit(self, model: Any, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray, *,
                           report: bool = True) -> list[Any]:
        """``StatsForecast(models=[model], freq=1, n_jobs=1).fit`` on the histories: the fitted
        models, in order (:class:`_LastValue` where statsforecast could not fit, with a warning
        where ``report``)."""
        from statsforecast import StatsForecast

        fallback = _LastValue()
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            fitted = StatsForecast(models=[model], freq=1, n_jobs=1, fallback_model=fallback).fit(
                df=self._long_frame(y, starts, lengths)).fitted_[:, 0]
        if fallback.failed and report:
            self._report_failed(model, fallback.failed, len(lengths))
        return list(fitted)

    def _statsforecast(self, model: Any, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                       ahead: int) -> np.ndarray:
        """``StatsForecast(models=[model], freq=1, n_jobs=1).forecast`` of ``ahead`` steps on the
        histories (``starts``, ``lengths`` ``[K]`` into ``y``), as a statsforecast user calls it on a
        long frame: ``[K, ahead]``. statsforecast's own numerical warnings (flat series) are kept
        from the user; a history it cannot fit gets its last value and a warning."""
        from statsforecast import StatsForecast

        fallback = _LastValue()
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            result = StatsForecast(models=[model], freq=1, n_jobs=1, fallback_model=fallback).forecast(
                df=self._long_frame(y, starts, lengths), h=ahead)
        result = result.sort_values(["unique_id", "ds"])
        if fallback.failed:
            self._report_failed(model, fallback.failed, len(lengths))
        return result[repr(model)].to_numpy(np.float64).reshape(len(lengths), ahead)

    def _report_failed(self, model: Any, failed: list[np.ndarray], total: int) -> None:
        """Warn that ``model`` could not be fitted on the histories ``failed`` (of ``total``), with
        the error the shortest raises."""
        shortest = min(failed, key=len)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                model.forecast(y=shortest, h=1)
            reason = ""
        except Exception as err:  # noqa: BLE001 - statsforecast raises many kinds; its message is the reason
            reason = f" ({type(err).__name__}: {err})"
        warnings.warn(f"{repr(model)} could not be fitted on {len(failed)} of {total} histories (the shortest of "
                      f"{len(shortest)} steps{reason}); they get their last value", UserWarning, stacklevel=5)


#: statsforecast's Theta model types (``modeltype``) and the parameters ``forward_theta`` reads.
_THETA_TYPES = ("STM", "OTM", "DSTM", "DOTM")
_THETA_PAR = ("initial_smoothed", "alpha", "theta")
#: statsforecast's CES season types (``seasontype``) and the parameters ``forward_ces`` reads.
_CES_TYPES = ("N", "S", "P", "F")
_CES_PAR = ("alpha_0", "alpha_1", "beta_0", "beta_1")


class ETS(StatsModel):
    """statsforecast's ``AutoETS`` (exponential smoothing, the error, trend and season components
    chosen by AICc; Hyndman et al. 2008). statsforecast fits no seasonal component for a season
    over 24 steps (weekly data's 52, hourly data's week), as R's ``ets``: such a season is not given
    to it (:func:`~tsrec.models.parameters.ets_season`), which chooses among the same models at a
    fraction of the cost. Keeps ``m``, the components, ``n_params`` and ``par`` (smoothing
    parameters and initial states) of each fit."""

    statsforecast_name = "AutoETS"

    def statsforecast_model(self) -> Any:
        return self._models.AutoETS(season_length=ets_season(self.config.season_length))

    def code_width(self) -> int:
        return ETS_WIDTH

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        return ets_valid(codes)

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return ets_count(codes)

    def encode(self, fitted: Any) -> tuple[list[int], np.ndarray]:
        return ets_codes(fitted.model_)

    def decode(self, codes: np.ndarray, values: np.ndarray) -> Any:
        model = self._models.AutoETS(season_length=int(codes[0]))
        model.model_ = ets_fit(codes, values)
        return model

    def chosen_model(self, codes: np.ndarray) -> Any:
        components = ets_components(codes)
        return self._models.AutoETS(season_length=int(codes[0]), model=components[:3], damped=components[3] == "D")


class Theta(StatsModel):
    """statsforecast's ``AutoTheta`` (the Theta method's variants chosen by in-sample MSE, with a
    seasonal decomposition when a seasonality test finds one; Fiorucci et al. 2016). Keeps ``m``,
    the model type, the initial level, alpha and theta of each fit (its ``forward`` tests the
    window for a season again, as statsforecast's does)."""

    statsforecast_name = "AutoTheta"

    def code_width(self) -> int:
        """``m`` and the model type (among statsforecast's four)."""
        return 2

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        return (codes[:, 0] >= 1) & (codes[:, 1] >= 0) & (codes[:, 1] < len(_THETA_TYPES))

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return np.full(len(codes), len(_THETA_PAR))

    def encode(self, fitted: Any) -> tuple[list[int], np.ndarray]:
        fit = fitted.model_
        return [int(fit["m"]), _THETA_TYPES.index(fit["modeltype"])], np.array([fit["par"][k] for k in _THETA_PAR])

    def decode(self, codes: np.ndarray, values: np.ndarray) -> Any:
        model = getattr(self._models, self.statsforecast_name)(season_length=int(codes[0]))
        model.model_ = {"m": int(codes[0]), "modeltype": _THETA_TYPES[int(codes[1])],
                        "par": dict(zip(_THETA_PAR, values.tolist()))}
        return model

    def chosen_model(self, codes: np.ndarray) -> Any:
        return self._models.AutoTheta(season_length=int(codes[0]), model=_THETA_TYPES[int(codes[1])])


def ces_state_radius(m: int, season: str, par: dict[str, float]) -> float:
    """The spectral radius of the linear map statsforecast's CES filter applies to its states with
    the observations at 0 (how much a difference in the states it starts from is carried per step:
    below 1 it dies out along a history, above 1 it grows). ``m``: the season length; ``season``:
    the season type (``"N"``, ``"S"``, ``"P"``, ``"F"``); ``par``: ``alpha_0``, ``alpha_1``,
    ``beta_0``, ``beta_1``.

    The recursion (Svetunkov and Kourentzes's state space, as statsforecast's ``cesupdate``): the
    error ``e = y - l - p`` reads the level ``l`` one step back (``m`` back for ``"S"``, whose level
    is seasonal) and the seasonal ``p`` ``m`` back (``"P"``, ``"F"``); the level pair ``(l, c)``
    becomes ``(l - (1 - a1) c + (a0 - a1) e, l + (1 - a0) c + (a0 + a1) e)``, the seasonal pair
    ``(p, q)`` of ``"F"`` likewise with the betas, and ``"P"``'s ``p`` becomes ``p + b0 e``. Its
    companion matrix holds the states the next step reads: the level pair of the last step (of the
    last ``m`` for ``"S"``) and the seasonal states of the last ``m`` (``2 + m`` rows for ``"P"``,
    ``2 + 2 m`` for ``"F"``)."""
    a0, a1, b0, b1 = (float(par[name]) for name in _CES_PAR)
    k = {"N": 2, "S": 2, "P": 3, "F": 4}[season]
    gain = np.zeros(k)  # [k] each state's weight on the error
    gain[:2] = a0 - a1, a0 + a1
    base = np.zeros((k, k))  # [k, k] the new states on the level pair's step (one back, m back for "S")
    base[:2, :2] = [[1.0, a1 - 1.0], [1.0, 1.0 - a0]]
    seasonal = np.zeros((k, k))  # [k, k] on the states m back
    if season == "P":
        seasonal[2, 2], gain[2] = 1.0, b0
    elif season == "F":
        seasonal[2:, 2:] = [[1.0, b1 - 1.0], [1.0, 1.0 - b0]]
        gain[2:] = b0 - b1, b0 + b1
    error_on_base, error_on_seasonal = np.zeros(k), np.zeros(k)  # e = -l (- p) with y at 0
    error_on_base[0] = -1.0
    if season in ("P", "F"):
        error_on_seasonal[2] = -1.0
    base += np.outer(gain, error_on_base)
    seasonal += np.outer(gain, error_on_seasonal)
    if season == "N":
        return float(np.abs(np.linalg.eigvals(base)).max())
    if season == "S":  # the level pair itself is seasonal: the pairs of steps t - m .. t - 1, oldest first
        companion = np.zeros((2 * m, 2 * m))
        companion[:-2, 2:] = np.eye(2 * m - 2)  # every pair moves one step older
        companion[-2:, :2] = base[:2, :2]  # the new pair reads the one m back
        return float(np.abs(np.linalg.eigvals(companion)).max())
    # "P", "F": the level pair of step t - 1, then the seasonal states of steps t - m .. t - 1, oldest first
    j = k - 2  # seasonal states per step
    size = 2 + j * m
    companion = np.zeros((size, size))
    companion[:2, :2] = base[:2, :2]  # the new level pair on the last one
    companion[:2, 2:2 + j] = seasonal[:2, 2:]  # and on the seasonal states m back (through the error)
    companion[2:-j, 2 + j:] = np.eye(j * (m - 1))  # the seasonal states move one step older
    companion[-j:, :2] = base[2:, :2]  # the new seasonal states on the last level pair (through the error)
    companion[-j:, 2:2 + j] = seasonal[2:, 2:]  # and on those m back
    return float(np.abs(np.linalg.eigvals(companion)).max())


class CES(StatsModel):
    """statsforecast's ``AutoCES`` (complex exponential smoothing, its seasonal variant chosen by
    AIC; Svetunkov and Kourentzes 2016). Keeps ``m``, the season type and the alphas and betas of
    each fit (a flat history, which AutoCES fits as its last value, as its last value)."""

    statsforecast_name = "AutoCES"
    checks_start = True

    def code_width(self) -> int:
        """``m`` and the season type (among statsforecast's four)."""
        return 2

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        return (codes[:, 0] >= 1) & (codes[:, 1] >= 0) & (codes[:, 1] < len(_CES_TYPES))

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return np.full(len(codes), len(_CES_PAR))

    def encode(self, fitted: Any) -> tuple[list[int], np.ndarray]:
        fit = fitted.model_
        return [int(fit["m"]), _CES_TYPES.index(fit["seasontype"])], np.array([fit["par"][k] for k in _CES_PAR])

    def decode(self, codes: np.ndarray, values: np.ndarray) -> Any:
        model = self._models.AutoCES(season_length=int(codes[0]))
        model.model_ = {"m": int(codes[0]), "seasontype": _CES_TYPES[int(codes[1])],
                        "par": dict(zip(_CES_PAR, values.tolist())), "distribution": "normal"}
        return model

    def chosen_model(self, codes: np.ndarray) -> Any:
        return self._models.AutoCES(season_length=int(codes[0]), model=_CES_TYPES[int(codes[1])])

    def forgets_start(self, codes: np.ndarray, values: np.ndarray) -> bool:
        """Whether the fit's state map shrinks (:func:`ces_state_radius` at most 1, and 1e-9 for
        rounding): statsforecast's AutoCES often fits parameters outside CES's admissible region,
        whose filter carries a difference in its starting states along the whole history."""
        return ces_state_radius(int(codes[0]), _CES_TYPES[int(codes[1])], dict(zip(_CES_PAR, values.tolist()))) \
            <= 1.0 + 1e-9


class DynamicTheta(Theta):
    """statsforecast's ``DynamicOptimizedTheta`` (the Theta method with its theta and smoothing
    optimised and its coefficients updated over time; Fiorucci et al. 2016). Keeps what
    :class:`Theta` keeps."""

    statsforecast_name = "DynamicOptimizedTheta"

    def chosen_model(self, codes: np.ndarray) -> None:
        """None: the dynamic optimised Theta is one variant."""
        return None


class ARIMA(StatsModel):
    """statsforecast's ``AutoARIMA`` (Hyndman and Khandakar's stepwise search over seasonal ARIMA
    orders). Its search costs seconds per series: 6.4 and 3.8 CPU-s on one monthly series of 300
    and 1,000 steps with season 12, 32x and 7x AutoETS on the same (one measurement, statsforecast
    2.1.1): it reads at most the last :attr:`max_history` steps of each series, and ``auto``
    leaves it out unless named.

    It keeps no parameters and is fitted on every window (``carries_parameters`` False): what
    statsforecast's ARIMA ``forward`` applies is not a handful of numbers but the fitted series
    itself (the drift regressor is fitted again from the fit's ``x`` and ``xreg`` by least
    squares, and the coefficients enter a full likelihood pass over the new series), so carrying
    it forward would save each series' history beside the model. ``predict`` fits it once per
    series, as before the other models carried theirs."""

    statsforecast_name = "AutoARIMA"
    max_history = 1000
    carries_parameters = False


def stl_jumps(seasons: Sequence[int]) -> dict[str, int]:
    """The STL arguments with which MSTL smooths its trend and its low-pass filter at every tenth of
    their windows and interpolates linearly between: R's ``stl`` defaults (``t.jump =
    ceiling(t.window / 10)``, ``l.jump = ceiling(l.window / 10)``), which R's ``forecast::mstl``
    and so statsforecast's MSTL follow in all else, and within STL's own advice (10%-20% of the
    window). statsmodels smooths at every step, at a cost of steps x window: for a week of
    five-minute steps (2,016) one fit of 17,280 steps took 40 CPU-s, and 1.9 with these jumps,
    its forecasts within 0.1% of the series' spread; on six long hourly to ten-minute columns the
    backtest's MSE is the same (ratios 1.000-1.001) at 0.06x-0.29x the CPU
    (benchmarks/results/mstl_jumps.md). statsforecast passes one set of STL arguments to every season, so the
    jumps are the shortest season's (for longer ones finer than R's). The seasonal smoother keeps
    statsmodels' every-cycle step: it is a small part of the cost.

    ``seasons``: MSTL's season lengths (each at least 2)."""
    shortest, seasonal = min(seasons), 11  # statsforecast's seasonal window for it (R's: 7 + 4 x 1)
    trend = math.ceil(1.5 * shortest / (1 - 1.5 / seasonal))  # statsmodels' trend window
    low_pass = shortest + 1
    return {"trend_jump": math.ceil((trend + (trend % 2 == 0)) / 10),
            "low_pass_jump": math.ceil((low_pass + (low_pass % 2 == 0)) / 10)}


class MSTL(StatsModel):
    """statsforecast's ``MSTL`` (the series decomposed by STL into several seasons, a trend and a
    remainder; the seasons forecast by seasonal naive, the trend and remainder by ``AutoETS`` of a
    non-seasonal model, statsforecast's default trend forecaster), STL's trend and low-pass smoothers
    evaluated every tenth of their windows (:func:`stl_jumps`, R's ``stl``). A history holds the seasons
    of ``season_lengths`` it holds twice (STL's need): a shorter one is fitted with fewer, and
    one that holds none by the trend forecaster alone. Keeps each fit's seasons and its trend's
    ETS fit (its ``forward`` decomposes the window again, as statsforecast's does)."""

    config_class = MSTLConfig
    statsforecast_name = "MSTL"
    forecast_refits = True
    #: All the history: its seasons need two cycles each (a week of five-minute steps: 4,032 steps).
    max_history = None

    def statsforecast_model(self, seasons: tuple[int, ...] | None = None) -> Any:
        """MSTL with ``seasons`` (default the config's) and :func:`stl_jumps`, or the trend
        forecaster alone without any."""
        seasons = self.config.season_lengths if seasons is None else seasons
        trend = self._models.AutoETS(model="ZZN")
        return self._models.MSTL(season_length=list(seasons), trend_forecaster=trend,
                                 stl_kwargs=stl_jumps(seasons)) if seasons else trend

    def code_width(self) -> int:
        """The number of seasons, each season (0 past that number), and the trend's ETS codes."""
        return 1 + len(self.config.season_lengths) + ETS_WIDTH

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        most = len(self.config.season_lengths)
        count, seasons = codes[:, 0], codes[:, 1:1 + most]  # [K], [K, S]
        held = np.arange(most) < count[:, None]  # [K, S]
        return (count >= 0) & (count <= most) & np.where(held, seasons >= 2, seasons == 0).all(axis=1) \
            & ets_valid(codes[:, 1 + most:])

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return ets_count(codes[:, 1 + len(self.config.season_lengths):])

    def encode(self, fitted: Any) -> tuple[list[int], np.ndarray]:
        most = len(self.config.season_lengths)
        seasons = list(fitted.season_length) if isinstance(fitted, self._models.MSTL) else []
        trend = fitted.trend_forecaster if seasons else fitted
        codes, values = ets_codes(trend.model_)
        return [len(seasons), *seasons, *[0] * (most - len(seasons)), *codes], values

    def decode(self, codes: np.ndarray, values: np.ndarray) -> Any:
        count = int(codes[0])
        model = self.statsforecast_model(tuple(int(m) for m in codes[1:1 + count]))
        (model.trend_forecaster if count else model).model_ = ets_fit(codes[1 + len(self.config.season_lengths):],
                                                                        values)
        return model

    def _held(self, lengths: np.ndarray) -> np.ndarray:
        """``[K]`` how many of the shortest seasons each history of ``lengths`` ``[K]`` holds twice."""
        seasons = np.asarray(self.config.season_lengths, dtype=np.int64)  # [S]
        return (2 * seasons[None, :] <= lengths[:, None]).sum(axis=1)

    def _fit_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[Any]:
        """One statsforecast fit per set of seasons the histories hold twice."""
        held, out = self._held(lengths), [None] * len(lengths)
        for count in np.unique(held):
            group = np.flatnonzero(held == count)
            model = self.statsforecast_model(tuple(int(m) for m in self.config.season_lengths[:count]))
            for k, fitted in zip(group, self._statsforecast_fit(model, y, starts[group], lengths[group])):
                out[k] = fitted
        return out

    def _forecast_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray, ahead: int) -> np.ndarray:
        """One statsforecast call per set of seasons the histories hold twice (at most one more
        than there are seasons)."""
        held, out = self._held(lengths), np.empty((len(lengths), ahead))
        for count in np.unique(held):
            group = np.flatnonzero(held == count)
            model = self.statsforecast_model(tuple(int(m) for m in self.config.season_lengths[:count]))
            out[group] = self._statsforecast(model, y, starts[group], lengths[group], ahead)
        return out
