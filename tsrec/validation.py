"""``auto``'s validation, as arrays: which windows each series holds out, the scale its errors are
divided by, every candidate's scores on them, and the ensemble's weights; what nothing here fits
or forecasts (:func:`tsrec.auto.fit_auto` does, and hands the forecasts in)::

    validation_windows, validation_stride    how many horizons each series holds out, origins how far apart
    Validation.of(panel, ends, ...)          their items, origins and truth  [W], [W], [W, H, C]
    Scores.add(name, forecast)               a candidate's score on the metric  (scaled [W * H * C])
    Scores.repeats(names, scores)            which candidates repeat another's forecasts
    Scores.weights(names, scores, repeats)   greedy_weights, then shrunk_weights toward the blend of
                                             the best few distinct forecasts
    calibration_blocks(validation)           earlier blocks of windows the bands also read
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from tsrec.calibrating import window_values
from tsrec.conformal import TARGET_RESIDUALS
from tsrec.data.frame import Panel
from tsrec.fitted import ForecastResult
from tsrec.forecasting import window_origins
from tsrec.models.intermittent import Intermittency
from tsrec.models.parameters import VARIANT_GROWTH

__all__ = ["BLEND_SIZE", "CALIBRATION_EVIDENCE", "HALVING_FACTOR", "MAX_CALIBRATION_BLOCKS", "MIN_VAL_WINDOWS",
           "PRIOR_WINDOWS", "ROUNDS", "SHORT_SHARE", "Scores", "VAL_WINDOWS_RULE", "Validation", "calibration_blocks",
           "entry_losses", "eval_metric_for", "greedy_weights", "repeated_forecasts", "series_scales",
           "shrunk_weights", "validation_stride", "validation_windows"]

#: Rounds of greedy ensemble selection (weights are multiples of 1 / ROUNDS).
ROUNDS = 20
#: A network whose validation score is more than this many times the leader's stops at its rung; the
#: blend the weights shrink toward takes candidates within it of the best (:func:`shrunk_weights`).
HALVING_FACTOR = 1.5
#: The blend the weights shrink toward: the equal weights of this many best candidates.
BLEND_SIZE = 3
#: The validation windows the equal blend is worth (:func:`shrunk_weights`): with as many independent
#: windows scored, the greedy weights and the blend count half each.
PRIOR_WINDOWS = 30
#: The share of the series, the shortest, that do not set the validation windows (a rule fixed
#: before any benchmark: a few products launched late in a panel are validated on none, as
#: AutoGluon leaves series too short for its windows out, rather than cut every series' windows to
#: theirs; AutoGluon sets its windows by the median series, which would leave half of them out).
SHORT_SHARE = 0.1
#: The AutoGluon rule (series fewer than, windows): else :data:`MIN_VAL_WINDOWS`.
VAL_WINDOWS_RULE = ((20, 5), (100, 3))
MIN_VAL_WINDOWS = 2
#: Independent windows (series x channels x windows one horizon apart) auto's conformal bands are
#: calibrated on where the history allows: where its validation windows hold fewer, blocks of as
#: many windows before them are forecast too (:func:`calibration_blocks`). A rule fixed before any
#: benchmark: the residuals per step :func:`~tsrec.conformal.default_windows` aims at.
CALIBRATION_EVIDENCE = TARGET_RESIDUALS
#: The most such blocks (each costs one more fit of the chosen members, on a slice of the history).
MAX_CALIBRATION_BLOCKS = 3


def eval_metric_for(named: str | None, found: Intermittency) -> str:
    """The metric auto scores by: the one the user ``named``; else ``"rmsse"`` for intermittent data
    (``found``, :func:`~tsrec.models.intermittent.intermittency`: absolute errors reward forecasting
    the zeros that most steps hold, squared ones the mean demand, which is what stock is planned
    from; the M5 competition's point metric), ``"mase"`` for any other."""
    if named is not None:
        return named
    return "rmsse" if found.detected else "mase"


def validation_windows(n_series: int, shortest: int, horizon: int) -> int:
    """Validation windows per series: 5 under 20 series, 3 under 100, else 2 (AutoGluon-TimeSeries's
    rule, sized for models fitted again at every window; auto's are fitted once and carried
    forward); more where the series are few and long: as many as give :data:`PRIOR_WINDOWS`
    independent windows (series x windows: the evidence at which the greedy weights and the blend
    count equally, :func:`shrunk_weights`) while the windows span at most the share of the
    ``shortest`` series over which a validated variant is kept (:data:`~tsrec.models.parameters.
    VARIANT_GROWTH`: a fifth, so that every choice is read off at least four fifths of the history);
    as many as half of the ``shortest`` series holds, and at least one."""
    wanted = next((windows for below, windows in VAL_WINDOWS_RULE if n_series < below), MIN_VAL_WINDOWS)
    within = int(shortest - shortest / VARIANT_GROWTH + 1e-9) // horizon  # windows in a fifth of the shortest
    wanted = max(wanted, min(math.ceil(PRIOR_WINDOWS / max(1, n_series)), within))
    return max(1, min(wanted, shortest // 2 // horizon))


def entry_losses(metric: str, forecast: np.ndarray, truth: np.ndarray, levels: np.ndarray | None = None) -> np.ndarray:
    """The per-entry losses of ``forecast`` ``[..., E]`` against ``truth`` ``[E]``, both divided by
    their series' scale (:attr:`Validation.scale`): squared errors for ``"mse"`` and ``"rmsse"``,
    absolute errors for ``"mae"`` and ``"mase"``, sMAPE's ``200 |f - y| / (|f| + |y|)`` for ``"smape"`` (which no
    positive per-series scale changes; 0 where both are 0), and for ``"wql"`` twice the pinball loss
    ``2 max(q (y - f), (1 - q) (f - y))`` of each entry's quantile level ``q`` (``levels`` ``[E]``;
    None: 0.5, a point forecast, where it is ``|f - y|``)."""
    error = forecast - truth
    if metric in ("mse", "rmsse"):
        return error ** 2
    if metric == "wql":
        q = 0.5 if levels is None else levels
        return 2.0 * np.maximum(-q * error, (1.0 - q) * error)
    if metric == "smape":
        total = np.abs(forecast) + np.abs(truth)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, 200.0 * np.abs(error) / total, 0.0)
    return np.abs(error)


def greedy_weights(truth: np.ndarray, forecasts: np.ndarray, rounds: int = ROUNDS, metric: str = "mse",
                   levels: np.ndarray | None = None) -> np.ndarray:
    """Greedy ensemble selection with replacement: ``forecasts`` ``[M, E]`` of ``M`` candidates over
    ``E`` entries with true values ``truth`` ``[E]`` (``levels`` ``[E]``: each entry's quantile level,
    for ``"wql"``) -> weights ``[M]`` summing to 1: every round adds the candidate whose addition
    gives the lowest mean loss (:func:`entry_losses` of ``metric``), and the weights are those of the
    round with the lowest loss (the earliest among equals; see the module). Quantiles are averaged
    level by level, as the ensemble averages its members'."""
    counts = np.zeros(len(forecasts))
    total = np.zeros_like(truth)
    best, best_counts = math.inf, counts
    for r in range(rounds):
        errors = entry_losses(metric, (total + forecasts) / (r + 1), truth, levels).mean(axis=1)  # [M]
        choice = int(np.argmin(errors))
        counts[choice] += 1
        total = total + forecasts[choice]
        if errors[choice] < best * (1 - 1e-12):  # ties and float noise keep the simpler ensemble
            best, best_counts = float(errors[choice]), counts.copy()
    return best_counts / best_counts.sum()


def shrunk_weights(greedy: np.ndarray, scores: np.ndarray, evidence: int,
                   repeats: np.ndarray | None = None) -> np.ndarray:
    """``greedy`` ``[M]`` weights shrunk toward the equal blend of the best few candidates by their
    validation ``scores`` ``[M]`` (lower is better): the :data:`BLEND_SIZE` best within
    :data:`HALVING_FACTOR` of the best. ``evidence``: the independent validation windows scored (series
    x channels x windows one horizon apart); the greedy weights get ``evidence / (evidence +
    PRIOR_WINDOWS)`` of the total, the blend the rest (:data:`PRIOR_WINDOWS`): a rule fixed before any
    benchmark, so that two to five windows of a few series cannot hand one candidate everything.
    ``repeats`` ``[M]`` int64 (default none): for each candidate whose forecasts repeat a
    better-ranked one's, that one's index, else -1 (:func:`repeated_forecasts`); a repeat is left
    out of the blend, which takes each forecast once."""
    best = float(np.min(scores))
    repeats = np.full(len(scores), -1) if repeats is None else repeats
    order = [int(m) for m in np.argsort(scores, kind="stable")
             if scores[m] <= HALVING_FACTOR * best and repeats[m] < 0]
    blend = np.zeros_like(greedy)
    blend[order[:BLEND_SIZE]] = 1.0 / len(order[:BLEND_SIZE])
    trust = evidence / (evidence + PRIOR_WINDOWS)
    return trust * greedy + (1.0 - trust) * blend


def repeated_forecasts(forecasts: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``[M]`` int64: for each candidate whose ``forecasts`` ``[M, E]`` equal those of one ranked
    before it by ``scores`` ``[M]`` (the earlier among equal scores), that one's index, else -1; as
    seasonal naive without a season (yearly data) repeats naive."""
    order = np.argsort(scores, kind="stable")
    repeats = np.full(len(scores), -1, dtype=np.int64)
    for rank, m in enumerate(order):
        repeats[m] = next((int(k) for k in order[:rank]
                           if repeats[k] < 0 and np.array_equal(forecasts[m], forecasts[k], equal_nan=True)), -1)
    return repeats


@dataclass(frozen=True)
class Validation:
    """The validation windows every candidate forecasts, as arrays in
    :func:`~tsrec.forecasting.window_origins`' order (``W`` windows, ``I`` series, ``C`` channels).

    Attributes:
        first: ``[I]`` int64, each series' first held-out step (grid position): the candidates are
            fitted on the steps before it (all of a series' observed steps where it is not validated).
        count: ``[I]`` int64, origins per series, ``stride`` apart, the last one's window ending at
            the series' last observed step; 0 for a series too short to validate (:meth:`of`).
        stride: steps between origins (a divisor of the horizon: on short data the windows overlap,
            and every one is scored).
        horizons: windows per series one horizon apart (the independent evidence).
        items, origins: ``[W]`` int64, each window's series and first forecast step.
        truth: ``[W, H, C]`` float64, the held-out values (NaN where unobserved).
        metric: the ``eval_metric`` (:data:`~tsrec.models.ensemble.EVAL_METRICS`).
        scale: ``[I, C]`` float64, what each series' errors are divided by
            (:func:`series_scales`): its in-sample seasonal naive MAE for ``"mase"``, the root mean
            square of its one-step changes for ``"rmsse"``, its standard deviation for ``"mse"`` and
            ``"mae"``, each over its history before ``first`` (the scale the field's test scores
            use; over its steps from its first nonzero value on where that is 0 or undefined); ones
            for ``"smape"`` and ``"wql"`` (whose score divides by the windows' total ``|y|``).
        levels: the quantile levels each forecast is scored at (``"wql"`` of quantile forecasts,
            ``output="quantile"``); empty: the point forecasts (``"wql"`` at level 0.5).
    """

    first: np.ndarray
    count: np.ndarray
    stride: int
    horizons: int
    items: np.ndarray
    origins: np.ndarray
    truth: np.ndarray
    metric: str
    scale: np.ndarray
    levels: tuple[float, ...] = ()

    @classmethod
    def of(cls, panel: Panel, ends: np.ndarray, windows: int, horizon: int, stride: int, metric: str,
           season: int, validated: np.ndarray | None = None, levels: tuple[float, ...] = ()) -> Validation:
        """``windows`` horizons held out before each series' observed end ``ends`` ``[I]`` of
        ``panel``, forecast from origins ``stride`` apart, scored by ``metric`` (``season``: MASE's;
        ``levels``: the quantile levels scored, empty for point forecasts); ``validated`` ``[I]``
        bool (None: all): the series that are, the others hold out nothing."""
        validated = np.ones(len(ends), dtype=bool) if validated is None else validated
        first = np.where(validated, ends - windows * horizon, ends)  # [I]
        count = np.where(validated, (windows - 1) * horizon // stride + 1, 0).astype(np.int64)  # [I]
        items, origins = window_origins(first, count, stride)  # [W] each
        truth, seen = window_values(panel, items, origins, horizon)  # [W, H, C] each
        return cls(first, count, stride, windows, items, origins, np.where(seen, truth, np.nan), metric,
                   series_scales(panel, first, metric, season), tuple(levels))

    @property
    def windows(self) -> int:
        """Origins per series (the calibration's windows)."""
        return int(self.count.max())

    @property
    def validated(self) -> np.ndarray:
        """``[I]`` bool: the series that hold validation windows."""
        return self.count > 0

    @property
    def evidence(self) -> int:
        """Independent windows scored: validated series x channels x windows one horizon apart."""
        return int(np.count_nonzero(self.validated) * self.truth.shape[2] * self.horizons)

    @property
    def independent(self) -> np.ndarray:
        """``[I * horizons]`` the indices of the windows one horizon apart (each series' first origin
        and every horizon after it), in window order: the independent evidence."""
        horizon = self.truth.shape[1]
        return np.flatnonzero((self.origins - self.first[self.items]) % horizon == 0)

    def scaled(self, values: np.ndarray, windows: np.ndarray | None = None) -> np.ndarray:
        """``[w * H * C]`` ``values`` ``[w, H, C]`` of the windows ``windows`` ``[w]`` (indices; None:
        all ``W``) divided by each window's series' scale, flattened; ``[w * H * C * Q]`` for
        quantiles ``[w, H, C, Q]``."""
        items = self.items if windows is None else self.items[windows]
        scale = self.scale[items][:, None, :]  # [w, 1, C]
        return (values / (scale if values.ndim == 3 else scale[..., None])).ravel()

    def entries(self, windows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The scaled truth of the windows ``windows`` ``[w]`` (indices; None: all) as :meth:`scaled`
        lays out the forecasts scored (``[w * H * C]``, each entry repeated per quantile level), and
        each entry's quantile level (None: point forecasts)."""
        truth = self.truth if windows is None else self.truth[windows]  # [w, H, C]
        if not self.levels:
            return self.scaled(truth, windows), None
        repeated = np.repeat(truth[..., None], len(self.levels), axis=-1)  # [w, H, C, Q]
        return self.scaled(repeated, windows), np.tile(np.asarray(self.levels, dtype=np.float64), truth.size)


def series_scales(panel: Panel, first: np.ndarray, metric: str, season: int) -> np.ndarray:
    """``[I, C]`` each series' and channel's scale over its observed steps before ``first`` ``[I]``:
    for ``"mase"`` the mean ``|y[t] - y[t - m]|`` at ``m = season`` (at 1 where the history holds no
    more than a season), for ``"rmsse"`` the root of the mean ``(y[t] - y[t - 1]) ** 2`` from the
    series' first nonzero value on (the M5 competition's scale: the zeros before a product's first
    sale are no history of its demand), for ``"mse"`` and ``"mae"`` the population standard
    deviation; ones for ``"smape"`` and ``"wql"``. Where that is 0 or undefined (a product launched inside the
    validation windows, zero or empty before them), the same scale over all its observed steps from
    its first nonzero value on (its own changes since its launch, not the jump from zero): in the
    data's units its errors would outweigh every other series' scaled ones, and choose for the whole
    panel alone; 1 where that is 0 or undefined too (a series that never moved)."""
    channels = len(panel.columns) if panel.layout == "wide" else 1
    scale = np.ones((len(panel.items), channels))
    if metric in ("smape", "wql"):
        return scale
    for i, (item, end) in enumerate(zip(panel.items, first.tolist())):
        y = np.where(item.observed, item.values, np.nan)  # [T, C]
        value = _scale(y[:end], metric, season)
        usable = np.isfinite(value) & (value > 0)
        for c in np.flatnonzero(~usable):  # from its first nonzero value on: the jump from zero is no change of its own
            start = int(np.argmax(np.nan_to_num(y[:, c]) != 0))
            value[c] = _scale(y[start:, c:c + 1], metric, season)[0]
        scale[i] = np.where(np.isfinite(value) & (value > 0), value, 1.0)
    return scale


def _scale(y: np.ndarray, metric: str, season: int) -> np.ndarray:
    """``[C]`` :func:`series_scales`' scale of ``metric`` over the steps ``y`` ``[T, C]`` (NaN: not
    observed); NaN where it has no steps to read."""
    end, channels = y.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a channel with nothing observed
        if metric == "mase":
            m = season if end > season else 1
            return np.nanmean(np.abs(y[m:] - y[:-m]), axis=0) if end > m else np.full(channels, np.nan)
        if metric == "rmsse":
            started = np.maximum.accumulate(np.nan_to_num(y) != 0, axis=0)  # [T, C] from the first nonzero value
            changes = np.where(started[1:] & started[:-1], y[1:] - y[:-1], np.nan)  # [T - 1, C]
            return np.sqrt(np.nanmean(changes ** 2, axis=0)) if end > 1 else np.full(channels, np.nan)
        return np.nanstd(y, axis=0)


@dataclass
class Scores:
    """Every scored candidate's validation forecasts: ``means`` ``[W, H, C]`` in the data's units
    (the ensemble's calibration reads them) and ``scaled`` ``[E]`` (divided by their series' scale,
    :meth:`Validation.scaled`; ``E = W * H * C``, times ``Q`` where quantiles are scored: the
    choice reads them)."""

    validation: Validation
    truth: np.ndarray = field(init=False)  # [E] scaled
    levels: np.ndarray | None = field(init=False)  # [E] each entry's quantile level; None: point forecasts
    means: dict[str, np.ndarray] = field(default_factory=dict)
    scaled: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.truth, self.levels = self.validation.entries()

    def add(self, name: str, result: ForecastResult) -> float:
        """Keep ``result`` (the candidate's forecasts of the validation windows) under ``name``;
        returns its score (:meth:`_score`)."""
        self.check(name, result)
        self.means[name] = result.mean
        self.scaled[name] = self.validation.scaled(self._scored(result))
        return self._score(self.scaled[name], self.truth, self.levels)

    def check(self, name: str, result: ForecastResult, windows: np.ndarray | None = None) -> None:
        """``RuntimeError`` unless ``result`` forecasts the validation windows ``windows`` ``[w]``
        (indices; None: all of them), in their order."""
        items, origins = self.validation.items, self.validation.origins
        if windows is not None:
            items, origins = items[windows], origins[windows]
        if not (np.array_equal(result.items, items) and np.array_equal(result.origins, origins)):
            raise RuntimeError(f"auto: {name}'s validation windows differ from the other candidates'")

    def score_on(self, windows: np.ndarray, result: ForecastResult) -> float:
        """The score of ``result``, the forecasts of the validation windows ``windows`` ``[w]``
        (indices), as :meth:`add` scores all of them."""
        return self._score(self.validation.scaled(self._scored(result), windows), *self.validation.entries(windows))

    def leader_on(self, windows: np.ndarray) -> tuple[str, float] | None:
        """The candidate kept so far with the best score on the validation windows ``windows`` ``[w]``
        (indices), and that score; None where none has one."""
        truth, levels = self.validation.entries(windows)
        rows = len(self.validation.items)
        found = [(score, name) for name, scaled in self.scaled.items()
                 if math.isfinite(score := self._score(scaled.reshape(rows, -1)[windows].ravel(), truth, levels))]
        return None if not found else min(found)[::-1]

    def _scored(self, result: ForecastResult) -> np.ndarray:
        """What is scored of ``result``: its quantiles at the validation's levels ``[W, H, C, Q]``, or its
        point forecasts ``[W, H, C]``."""
        if not self.validation.levels:
            return result.mean
        if tuple(result.levels) != self.validation.levels or result.quantiles is None:
            raise RuntimeError(f"auto: a candidate forecast quantiles {result.levels}, not the levels scored, "
                               f"{self.validation.levels}")
        return result.quantiles

    def _score(self, forecast: np.ndarray, truth: np.ndarray, levels: np.ndarray | None) -> float:
        """The mean loss of scaled ``forecast`` ``[E]`` over the entries where it and ``truth`` ``[E]`` are
        finite (``levels`` ``[E]``: their quantile levels, or None): for ``"rmsse"`` its root, for
        ``"wql"`` over the mean ``|y|`` of those entries (the weighted quantile loss: the pinball
        losses' total over the total ``|y|``, averaged over the levels; where every ``|y|`` is 0,
        the mean loss itself); NaN where no entry is finite."""
        metric = self.validation.metric
        entries = np.isfinite(truth) & np.isfinite(forecast)
        if not entries.any():
            return math.nan
        score = float(entry_losses(metric, forecast[entries], truth[entries],
                                   None if levels is None else levels[entries]).mean())
        if metric == "wql":
            total = float(np.abs(truth[entries]).mean())
            return score / total if total > 0 else score
        return math.sqrt(score) if metric == "rmsse" else score

    def drop(self, name: str) -> None:
        self.means.pop(name, None)
        self.scaled.pop(name, None)

    def weights(self, names: list[str], scores: list[float], repeats: np.ndarray) -> np.ndarray:
        """``[M]`` the weights of ``names`` (validation ``scores`` ``[M]``): the greedy weights over the
        entries with a true value and every one's forecast, shrunk toward the blend of the best
        few distinct forecasts (:func:`shrunk_weights`; ``repeats``: :meth:`repeats`)."""
        stacked = np.stack([self.scaled[name] for name in names])  # [M, E]
        common = np.isfinite(self.truth) & np.isfinite(stacked).all(axis=0)
        if not common.any():
            raise ValueError("auto: no validation entry has a true value and every candidate's forecast")
        greedy = greedy_weights(self.truth[common], stacked[:, common], metric=self.validation.metric,
                                levels=None if self.levels is None else self.levels[common])
        return shrunk_weights(greedy, np.asarray(scores), self.validation.evidence, repeats)

    def repeats(self, names: list[str], scores: list[float]) -> np.ndarray:
        """``[M]`` :func:`repeated_forecasts` of ``names`` (validation ``scores`` ``[M]``)."""
        return repeated_forecasts(np.stack([self.scaled[name] for name in names]), np.asarray(scores))


def validation_stride(horizon: int, windows: int, wanted: int) -> int:
    """The validation forecasts' stride: the divisor of ``horizon`` whose origins per series over
    the ``windows`` horizons of the validation span (``windows`` at the horizon itself) are nearest
    ``wanted`` in ratio, the more origins among equals: a horizon with few divisors (13 weeks) no
    longer scores every one of its steps where the windows alone nearly give ``wanted``."""
    def off(d: int) -> tuple[float, int]:  # how far its origins are from wanted, in ratio; ties: more origins
        return abs(math.log(((windows - 1) * horizon // d + 1) / max(1, wanted))), d
    return min((d for d in range(1, horizon + 1) if horizon % d == 0), key=off)


def calibration_blocks(validation: Validation, starts: np.ndarray | None = None) -> int:
    """Blocks of calibration windows auto forecasts before its validation windows, each the
    validation's windows moved one validation span earlier and forecast by the chosen members
    fitted on the history before it: as many as bring the independent windows to
    :data:`CALIBRATION_EVIDENCE` (none where the validation holds that many), at most
    :data:`MAX_CALIBRATION_BLOCKS`, and only while every validated series keeps at least half the
    history its validation fit had, from its first observed step ``starts`` ``[I]`` (default: its
    first step) on (a model fitted on much less would forecast worse than the one calibrated)."""
    wanted = math.ceil(CALIBRATION_EVIDENCE / max(1, validation.evidence)) - 1
    span = validation.horizons * validation.truth.shape[1]  # steps per block
    history = validation.first - (0 if starts is None else starts)  # [I] observed steps before the windows
    # blocks that leave each validated series half its history
    room = int((history[validation.validated] // 2 // span).min())
    return max(0, min(wanted, MAX_CALIBRATION_BLOCKS, room))
