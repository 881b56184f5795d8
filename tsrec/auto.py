"""``Forecaster("auto")``, the default: statistical candidates first, networks only where the data
have the windows for them and within a budget that grows with the data, then a validation-weighted
ensemble. A fitter on the value chain: one :class:`~tsrec.data.source.Read` in, a
:class:`~tsrec.fitting.Fit` of the ensemble's :class:`~tsrec.fitted.FittedState` out; no frame is
read again, no Forecaster is built::

    fit_auto(read, settings)
      Validation.of(read, ...)        each series' last k horizons held out, as arrays [W, H, C]
      fit_state(read.before(first))   every candidate, on each series' history before its windows
      forecast_origins(state, ...)    its forecasts of the validation windows          [W, H, C]
      greedy_weights(...)             the weights, from the z-scored arrays
      fit_state(read, prefitted=...)  the ensemble of the fitted members, handed over as modules
      calibrating.calibration_of(...) its conformal bands, from the same validation forecasts

The validation's windows, scores and weights, as arrays, are :mod:`tsrec.validation`'s; fitting
and forecasting one candidate, :mod:`tsrec.candidates`'; the networks' successive halving,
:mod:`tsrec.halving`'s; this module puts them together.

1. **Validation.** Each series' last ``k`` horizons are held out (:func:`~tsrec.validation.validation_windows`:
   AutoGluon's rule, 5 windows under 20 series, 3 under 100, else 2; more on few long series, up to
   :data:`~tsrec.validation.PRIOR_WINDOWS` independent windows within a fifth of the shortest series; at most half of
   the shortest series), forecast from every origin a stride that divides the horizon apart
   (:func:`~tsrec.validation.validation_stride`: on short data the windows overlap, and every one is scored). A series whose
   last values are missing is validated on windows ending at its last observed step, with a
   warning naming it (a forecast from a filled-in tail is never scored); one of fewer than
   ``2 H + 1`` steps from its first observed value, however short, is not validated, nor one too
   short for the windows and as long a history before them where it is among the shortest tenth
   of the series, which do not set the windows (:func:`_validated`: the ensemble chosen on the
   others forecasts it, with a warning naming it).
   Every candidate is fitted on each series' steps before its held-out ones (:meth:`Read.before
   <tsrec.data.source.Read.before>`, a slice of the arrays read) and forecasts them
   (:func:`~tsrec.forecasting.forecast_origins`).
2. **Scores** on ``eval_metric`` (:data:`~tsrec.models.ensemble.EVAL_METRICS`; not named,
   :func:`~tsrec.validation.eval_metric_for`: ``"rmsse"`` for intermittent data, ``"mase"`` for any other), each
   series' errors divided by its scale over its history before the validation windows
   (:func:`~tsrec.validation.series_scales`), over the entries every candidate forecast
   (:func:`~tsrec.validation.entry_losses`); ``"wql"`` scores the quantiles of ``output="quantile"``
   at its levels and point forecasts at 0.5.
3. **Statistical candidates first** (those with nothing to train: ``ets``, ``theta``, ``ces``,
   ``dynamic_theta``, ``mstl`` where the data show two calendar seasons (then in place of ``ets``,
   ``theta`` and ``dynamic_theta``, which take one of them out, :data:`ONE_SEASON`; scored last: its every
   forecast costs about a fit, so it forecasts the independent windows first and goes on to every origin only
   within :data:`~tsrec.validation.HALVING_FACTOR` of the leader's score on them,
   :meth:`~tsrec.candidates.Candidates.validation_forecasts`), the intermittent-demand models
   ``croston``, ``adida``, ``imapa`` and ``tsb`` where the data are intermittent
   (:func:`~tsrec.models.intermittent.intermittency`, said in their notes), ``seasonal_naive``,
   ``naive``, ``drift``): each is the registered model, fitted once per
   series on its history before the validation windows and carried forward over them
   (statsforecast's ``cross_validation(refit=False)``, :mod:`tsrec.models.stats`); the members
   chosen are fitted once on all the history, a series that grew by at most
   :data:`~tsrec.models.parameters.VARIANT_GROWTH` since its validation keeping the variant it was
   validated with (ETS its components, Theta its model type, CES its season type: only their
   parameters are estimated again, at a fraction of the search's cost), and ``predict`` carries
   them forward in turn. The model scored is the model that forecasts. With them, whatever the data's size, ``ridge``: one
   ridge regression shared by every series on each window's lags and known-future features
   (:mod:`tsrec.models.ridge`), fitted in closed form on the windows before the validation ones,
   and on all of them when chosen, and ``gbm``, gradient-boosted trees shared by every series on
   each window's lags and covariates (:mod:`tsrec.models.gbm`), fitted on the same windows. The
   rules on each window (``seasonal_naive``, ``naive``, ``drift``) are scored first; once the fit has
   spent the user's ``time_limit``, the candidates after are skipped.
4. **Networks** (the trainable candidates), only when the steps before the validation windows hold
   at least :data:`~tsrec.halving.MIN_NETWORK_WINDOWS` training windows (counted at a context of twice the
   horizon), by successive halving: every network trains for the first rung's share of its step
   budget (:data:`~tsrec.halving.RUNGS`), is scored, and goes on to the next rung only if it is among the better
   half of the networks still training and within :data:`~tsrec.validation.HALVING_FACTOR` of the leader's score
   (the leader may be a statistical model). The first rung spends :func:`~tsrec.halving.network_budget` CPU
   seconds (it grows with the observations, and stays within a few times what the statistical
   candidates cost; where ``time_limit`` caps the fit, what they left of it instead), each run the
   share of what is left that its steps are of those still planned; a network halving keeps is
   never stopped for that budget alone (:func:`~tsrec.halving.fit_networks`). Rungs continue the
   same run from its checkpoint (``resume=True``), so a network that reaches the last rung has
   cost one training run. Networks are not refitted on the validation windows: the validated run
   is the member (AutoGluon's default, ``refit_full=False``); its RevIN makes it indifferent to the
   ensemble's scaler, which is fitted on all the history. A member without RevIN is refitted.
5. **Choice.** Greedy ensemble selection with replacement (Caruana et al., ICML 2004): for
   :data:`~tsrec.validation.ROUNDS` rounds, add the candidate that most lowers the validation score of the
   equal-weighted average of those chosen so far (one may be chosen again), and keep the rounds'
   best ensemble; then shrink those weights toward the equal blend of the best few by the
   evidence (:func:`~tsrec.validation.shrunk_weights`). Running every round instead of stopping at the first round
   that does not improve lets a second candidate enter at a small weight (1/3, 1/4, ...) once the
   leader has been chosen a few times, where entering at 1/2 would not have helped.
6. **Intervals.** The chosen ensemble's weighted forecast of every validation origin calibrates
   its conformal intervals through the one calibration path,
   :func:`tsrec.calibrating.calibration_of` (``conformal_windows=0``: none). Where the validation
   holds fewer than :data:`~tsrec.validation.CALIBRATION_EVIDENCE` independent windows, up to
   :data:`~tsrec.validation.MAX_CALIBRATION_BLOCKS` blocks of as many windows before them are forecast too, by the
   chosen members fitted again before each (:func:`~tsrec.validation.calibration_blocks`; not where a member
   would cost more than a fit per block: a network, which would train again, or MSTL, fitted again at every
   origin); the leaderboard's ``attrs["calibration"]`` says which.
7. **Covariates.** The candidates that read covariates (the networks, ``ridge`` and ``gbm``) are fitted and
   scored with those given to ``fit``; the statistical ones on the targets alone
   (:meth:`Read.targets <tsrec.data.source.Read.targets>`). A network member with covariates is
   refitted on all the history. Covariates no chosen member reads are named in a warning.

The leaderboard lists every candidate: its validation score (``val_score``), weight, wall and CPU seconds, a note
(the rungs a network trained for, why it stopped, or why it was skipped) and the covariates it
read (``covariates``). On a terminal each candidate prints one progress line on stderr.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np
import pandas as pd

from tsrec.calibrating import calibration_of
from tsrec.candidates import Candidates, Clock, Row, join_note, progress, progress_line
from tsrec.conformal import Calibration, default_windows, observed_ends, observed_starts
from tsrec.data.frame import Panel
from tsrec.data.launches import launch_note
from tsrec.data.periods import dominant_periods
from tsrec.data.scaling import StandardScaler
from tsrec.data.time_features import calendar_cycles, metric_season
from tsrec.data.windows import far_as_missing
from tsrec.data.source import Read
from tsrec.fitted import FittedState
from tsrec.fitting import Fit, Prefitted, fit_state, require_observed, resolve_far_values
from tsrec.halving import fit_networks
from tsrec.models.base import ForecastModel
from tsrec.models.ensemble import AUTO, with_members
from tsrec.models.intermittent import INTERMITTENT_MODELS, Intermittency, intermittency
from tsrec.models.naive import MATCH_TOLERANCE, WindowRule, choose_seasons
from tsrec.models.registry import model_spec
from tsrec.models.stats import STATS_EXTRA, MSTLConfig, StatsConfig, statsforecast_installed
from tsrec.settings import ForecasterSettings
from tsrec.validation import (CALIBRATION_EVIDENCE, SHORT_SHARE, Scores, Validation, calibration_blocks,
                              eval_metric_for, validation_stride, validation_windows)

__all__ = ["AUTO", "LEADERBOARD_COLUMNS", "fit_auto"]

#: The leaderboard's columns.
LEADERBOARD_COLUMNS = ["model", "val_score", "weight", "fit_seconds", "cpu_seconds", "note", "covariates"]


def _candidates(settings: ForecasterSettings) -> list[str]:
    """The candidates that can run here, those with nothing to train first: trainable ones only for
    a quantile output; statsforecast's only with it installed (a warning says when they are left out)."""
    network = settings.network
    names = []
    for name in network.candidates:
        spec = model_spec(name)  # an unknown name: ValueError listing the known ones
        if network.output != "point" and not spec.model_class.trainable:
            continue
        if issubclass(spec.model_class.config_class, StatsConfig) and not statsforecast_installed():
            warnings.warn(f"auto leaves out {name}: statsforecast is not installed ({STATS_EXTRA})", UserWarning,
                          stacklevel=5)
            continue
        names.append(name)
    if not names:
        raise ValueError(f"no candidate of {list(network.candidates)} can forecast output={network.output!r}: "
                         "name trainable models in candidates")
    return sorted(names, key=lambda name: model_spec(name).model_class.trainable)  # stable: statistical first


def _warn_missing_tails(panel: Panel, ends: np.ndarray) -> None:
    """Warn naming the series whose last values are missing (the first five, and how many more)."""
    tails = [(panel.item_label(i), len(item) - end, item.index[end - 1]) for i, (item, end) in
             enumerate(zip(panel.items, ends.tolist())) if end < len(item)]
    if not tails:
        return
    named = "; ".join(f"{label}: its last {n} step(s) after {stamp}" for label, n, stamp in tails[:5])
    more = f" and {len(tails) - 5} more series" if len(tails) > 5 else ""
    warnings.warn(f"auto: the last values of {len(tails)} series are missing ({named}{more}). The candidates are "
                  "validated on windows ending at each series' last observed step, so that none is credited for "
                  "forecasting from a filled-in tail; the forecast after the frame's end still reads the missing "
                  "steps as the model fills them (missing_context). Drop the missing rows to forecast from the "
                  "last observation", UserWarning, stacklevel=5)


def _validated(panel: Panel, spans: np.ndarray, horizon: int, channels: int) -> tuple[np.ndarray, int]:
    """``[I]`` bool: the series of ``panel`` (``spans`` ``[I]``: their steps from the first observed
    one to the last) that are validated, and their windows per series
    (:func:`~tsrec.validation.validation_windows`, ``channels`` per series). The windows are those
    the shortest series allows once a tenth of the series at most, the shortest, are set aside
    (:data:`~tsrec.validation.SHORT_SHARE`: a few new products do not cut every series' windows
    to theirs); a series is validated where it holds them and as long a history before them (or,
    on one window, ``H + 1`` steps: ``2 H + 1`` in all, ``H``: ``horizon``). A shorter one is not
    validated: the candidates are fitted on all of it, however short (a statistical model that
    cannot fit so few steps gives its last value, a windowed one reads it padded), and the members
    forecast it (as AutoGluon leaves such series out of its validation), with a warning naming it;
    ``ValueError`` where no series holds ``2 H + 1`` steps."""
    validated = spans >= 2 * horizon + 1
    if not validated.any():
        longest = int(np.argmax(spans))
        feasible = (int(spans[longest]) - 1) // 2  # the longest horizon the longest series can be validated on
        shorter = (f"Use prediction_length <= {feasible}, or fit" if feasible >= 1 else
                   "No prediction_length can be validated on fewer than 3 steps: fit")
        raise ValueError(
            f"no series holds {2 * horizon + 1} steps from its first observed value to its last (the longest, "
            f"{panel.item_label(longest)}, has {spans[longest]}{launch_note(panel.items[longest])}): auto validates "
            "its candidates on each series' last "
            f"prediction_length={horizon} steps and fits them on the steps before, which must hold at least "
            f"prediction_length + 1 = {horizon + 1}. {shorter} a statistical model by name, which is not validated "
            f"(Forecaster('ets', prediction_length={horizon}))")
    kept = spans[validated]
    shortest = int(np.quantile(kept, SHORT_SHARE, method="lower"))  # the shortest once a tenth is set aside
    windows = validation_windows(int((kept >= shortest).sum()) * channels, shortest, horizon)
    need = max(2 * windows * horizon, 2 * horizon + 1)  # the windows and as long a history before them
    validated = spans >= need
    if (unvalidated := np.flatnonzero(~validated)).size:
        named = panel.items_with_steps(unvalidated, spans[unvalidated])
        warnings.warn(f"auto: {len(unvalidated)} series hold fewer than {need} steps ({named}), too few for "
                      f"{windows} validation window(s) of prediction_length={horizon} and as long a history before "
                      f"them: they are not validated, and the ensemble chosen on the other {int(validated.sum())} "
                      "forecasts them", UserWarning, stacklevel=5)
    return validated, windows


def _require_columns_before(panel: Panel, validation: Validation) -> None:
    """``ValueError`` naming a wide frame's first column with no observed value before the
    validation windows (a product launched inside them): its series is validated with the frame's
    other columns, so no candidate could be fitted on its history before them. A long frame's
    series counts from its first observed value (:func:`_validated`)."""
    for position, item in enumerate(panel.items):
        first = int(validation.first[position])
        never = ~item.observed[:first].any(axis=0)  # [C]
        if validation.validated[position] and never.any():
            channel = int(np.argmax(never))
            stamps = panel.stamps[panel.offsets[position]:panel.offsets[position + 1]]
            start = int(np.argmax(item.observed[:, channel]))
            raise ValueError(
                f"{panel.channel_label(position, channel)} is first observed at {stamps[start]}"
                f"{launch_note(item, channel)}, after auto's "
                f"validation windows begin ({stamps[first]}, the same for every column of a wide frame): no candidate "
                "can be fitted on its history before them. Fit a long frame, where each series is validated on the "
                "steps it holds (df.rename_axis('timestamp').melt(ignore_index=False, var_name='item_id', "
                "value_name='target').reset_index()), or drop the column")


def _seasons_kept(spans: np.ndarray, validated: np.ndarray, span: int, season: int) -> np.ndarray:
    """``[I]`` bool: the ``validated`` series (``spans`` ``[I]``: their observed spans) whose history before
    their validation windows (``span`` steps) holds two seasons of ``season`` steps wherever all of it
    does; all of ``validated`` where that would keep none. On another series a statistical candidate
    would be validated without the season it forecasts with (statsforecast fits one on two seasons),
    and seasonal naive, which needs one, would lead there for that alone: on 1,000 synthetic monthly
    series of 3 to 6 years with a yearly cycle it had 0.47-0.93 of the weight, and the test MAE was
    9.52 where it is 8.32 with them left out (seeds 0-2, benchmarks/results/short_seasons.md). The
    others are fitted on all their steps and forecast by the ensemble chosen on these, as a series
    too short to validate is."""
    kept = validated & ((spans - span >= 2 * season) | (spans < 2 * season))
    return kept if kept.any() else validated


#: The statistical candidates not tried where MSTL is (:func:`_unsuited`), and how each differs from
#: MSTL: it takes out one of the seasons MSTL takes out, and forecasts the rest by a model of the
#: AutoETS that MSTL forecasts the rest with.
_SMOOTHED = "takes one out and forecasts the rest by exponential smoothing with a drift"
ONE_SEASON = {"ets": "ETS alone fits one", "theta": f"Theta {_SMOOTHED}",
              "dynamic_theta": f"DynamicOptimizedTheta {_SMOOTHED}"}


def _unsuited(name: str, found: Intermittency, seasons: tuple[int, ...], why_not_mstl: str | None) -> str | None:
    """Why candidate ``name`` is not tried (the leaderboard's note), or None, on data whose
    intermittency is ``found`` and whose history before the validation windows shows the calendar
    ``seasons`` where MSTL is tried (``why_not_mstl`` None, :func:`_mstl_unsuited`; else why it is
    not). The intermittent-demand models (:data:`~tsrec.models.intermittent.INTERMITTENT_MODELS`)
    need intermittent data (:func:`~tsrec.models.intermittent.intermittency`); ``mstl`` a second
    season the data show. Where MSTL is tried, the models that take one season out are not
    (:data:`ONE_SEASON`): MSTL takes both out and forecasts what is left with statsforecast's
    AutoETS, where ETS fits one of them, and Theta and DynamicOptimizedTheta take one out by a
    classical decomposition and forecast the rest by simple exponential smoothing with a drift
    (Hyndman and Billah, 2003): Holt's method with its slope's smoothing at 0, a model of AutoETS's
    space. Their fits cost the most there, for no weight (benchmarks/results/competition_hourly.md,
    benchmarks/results/theta_mstl.md)."""
    if name in INTERMITTENT_MODELS:
        return None if found.detected else f"skipped: the data are {found.describe()}"
    if name == "mstl":
        return why_not_mstl
    if name in ONE_SEASON and why_not_mstl is None:
        return (f"skipped: the data show {len(seasons)} calendar seasons ({', '.join(map(str, seasons))} steps), "
                f"which MSTL takes out before its own ETS forecasts the rest; {ONE_SEASON[name]}")
    return None


def _mstl_unsuited(before: Panel) -> tuple[tuple[int, ...], str | None]:
    """The calendar seasons that the longest history of ``before`` (the data before the validation
    windows) holds twice, and None where MSTL is tried on them, else why not (the leaderboard's note):
    MSTL needs a second season, a longer calendar season than the shortest that the data show (a
    line of their spectrum, :func:`dominant_periods`, at it: a week of hourly data with a weekly
    cycle). With one season it is a seasonal decomposition that ``ets`` and ``theta`` already are,
    and a second season the data do not show is noise that costs MSTL's decompositions (its
    validation windows cost more than all of auto's networks on the quickstart's hourly data, which
    have a daily cycle only)."""
    longest = max(len(item) for item in before.items)
    seasons = tuple(choose_seasons(calendar_cycles(before.calendar), (), longest, MSTLConfig.SEASONS_NEEDED))
    if len(seasons) < 2:
        return seasons, (f"skipped: {len(seasons)} calendar season(s) that {longest} steps hold twice (MSTL is tried "
                         "where there are two, e.g. a day and a week of hourly data)")
    periods = dominant_periods([item.values for item in before.items], [item.observed for item in before.items])
    if any(abs(period - season) <= MATCH_TOLERANCE * season for season in seasons[1:] for period in periods):
        return seasons, None
    lines = ", ".join(f"{period:g}" for period in periods) or "none"
    return seasons, (f"skipped: the data show no cycle at the longer calendar season(s) "
                     f"{', '.join(map(str, seasons[1:]))} (their spectrum's lines, in steps: {lines}); MSTL is tried "
                     "where they show a second season, e.g. a weekly cycle of hourly data")


def _warn_unread_covariates(candidates: Candidates, chosen: list[str], rows: dict[str, Row]) -> None:
    """Warn when covariates were given and no chosen member reads them, saying why (the networks
    that read them were skipped, or scored worse) and what reads them."""
    columns = list(candidates.covariates.columns)
    if not columns or any(candidates.reads(name) for name in chosen):
        return
    readers = [row for row in rows.values() if candidates.reads(row.model)]
    if not readers:
        why = "no candidate reads covariates (the statistical models cannot)"
    elif all(row.note.startswith("skipped") for row in readers):
        why = f"the networks, which read them, were skipped ({readers[0].note})"
    else:
        why = "the candidates that read them scored worse on validation (see the leaderboard)"
    warnings.warn(f"auto: the covariates {columns} are read by none of the members chosen ({', '.join(chosen)}): "
                  f"{why}. The forecast does not depend on them (predict still takes their values, as the fitted "
                  "schema names them). To forecast from them, fit a network by name, e.g. "
                  "Forecaster('rsa_patchtst', ...), or the ridge or the trees (Forecaster('ridge', ...), "
                  "Forecaster('gbm', ...)), or name candidates that read them", UserWarning, stacklevel=5)


def _scored(panel: Panel, robust: bool) -> tuple[Panel, np.ndarray]:
    """What the validation scores the candidates against: ``panel`` with the values a robust scaler
    fitted on all of it reads as missing (:func:`~tsrec.data.windows.far_as_missing`: a typo of 1e9,
    ``-9999``, as every model reads them with ``far_values="missing"``), so that no candidate is
    ranked by its error on a typo, and ``[I]`` each series' length up to its last observed step that
    is not in a run of placeholder values at its end, so that no validation window ends on them
    (:meth:`~tsrec.data.scaling.StandardScaler.placeholders`; one or two far values at the very end
    stay isolated, and unscored); ``panel`` and :func:`~tsrec.conformal.observed_ends` where the
    scaler keeps far values."""
    ends = observed_ends(panel)
    if not robust:
        return panel, ends
    scaler = StandardScaler.fences_of(panel)
    for i, item in enumerate(panel.items):
        steps = len(item.values)
        placeholders = scaler.placeholders(item.values, item.observed, np.full(steps, i), np.zeros(steps, np.int64))
        if placeholders.any():
            seen = np.flatnonzero((item.observed & ~placeholders).any(axis=1))
            ends[i] = int(seen[-1]) + 1 if len(seen) else 0
    return far_as_missing(panel, scaler), ends


def fit_auto(read: Read, settings: ForecasterSettings, *, val: Read | None = None, resume: bool = False) -> Fit:
    """The fitted ensemble of ``settings`` (an auto model's) on ``read``: its candidates scored on
    the end of every series, the weights chosen, the members put together and calibrated (see the
    module). What ``Forecaster("auto").fit`` calls."""
    refused = [what for what, given in (("val_df", val is not None), ("resume=True", resume)) if given]
    if refused:
        raise ValueError(f"Forecaster('auto') takes no {', '.join(refused)}: it validates its candidates on the "
                         "end of the fit frame; fit a model by name for these")
    started = time.process_time()
    given = settings  # the ensemble's fit decides far_values="auto" again on all of it, and says why
    settings, _ = resolve_far_values(settings, read)  # every candidate reads far values as the ensemble does
    panel, horizon = read.panel, settings.window.prediction_length
    scored, ends = _scored(panel, settings.window.robust)  # [I]
    if (empty := np.flatnonzero(ends == 0)).size:
        raise ValueError(f"{panel.item_label(int(empty[0]))} has no observed value: drop it, or fit on a frame "
                         "where it has data")
    require_observed(panel, ends)  # a wide frame's column: once here, not once per candidate
    _warn_missing_tails(panel, ends)
    channels = len(panel.columns) if panel.layout == "wide" else 1
    # each series' observed span: one whose first values are missing (a product launched late in a
    # frame of NaN before it) is as long as what it holds
    starts = observed_starts(panel)  # [I]
    spans = ends - starts  # [I]
    validated, windows = _validated(panel, spans, horizon, channels)  # [I], windows per series
    calibrating = settings.conformal.windows != 0
    wanted = settings.conformal.windows or default_windows(len(panel.items) * channels)
    stride = validation_stride(horizon, windows, wanted)
    season = metric_season(panel.calendar)
    with_seasons = _seasons_kept(spans, validated, windows * horizon, season)
    left_out, validated = int(validated.sum() - with_seasons.sum()), with_seasons
    observed = read.before(ends)
    found = intermittency([item.values for item in panel.items], [item.observed for item in panel.items])
    metric = eval_metric_for(settings.network.eval_metric, found)
    settings = dataclasses.replace(settings, network=dataclasses.replace(settings.network, eval_metric=metric))
    network = settings.network  # wql scores quantile forecasts level by level; points at their one level, 0.5
    levels = network.quantile_levels if metric == "wql" and network.output == "quantile" else ()
    validation = Validation.of(scored.head(ends), ends, windows, horizon, stride, metric, season, validated, levels)
    _require_columns_before(panel, validation)
    candidates = Candidates(settings, validation, observed, read.schema.covariates)
    history = scored.head(validation.first)  # what the candidates are validated from, as they read it
    scores = Scores(validation)
    names = _candidates(settings)
    rows = {name: Row(name) for name in names}
    # the rules on each window first (they cost almost nothing: a time_limit never skips them); those
    # whose every forecast costs a fit last, to be compared with the others on their first windows
    statistical = sorted((name for name in names if not model_spec(name).model_class.trainable),
                         key=lambda name: (model_spec(name).model_class.forecast_refits,
                                           not issubclass(model_spec(name).model_class, WindowRule)))
    time_limit = settings.training.time_limit
    variants = _score_statistical(statistical, rows, candidates, scores, history, found, started, time_limit)
    validated: dict[str, FittedState] = {}
    networks = [name for name in names if name not in statistical]
    if networks:
        for name in networks:
            rows[name].covariates = candidates.described if candidates.reads(name) else candidates.unused
        observations = int(sum(item.observed.sum() for item in panel.items))
        fit_networks(networks, rows, validated, scores, candidates, lengths=spans, channels=channels, windows=windows,
                     observations=observations, spent_before=time.process_time() - started)
    kept = [name for name in names if name in scores.scaled]
    if not kept:
        output = settings.network.output
        fix = (f"; output={output!r} scores the trainable candidates alone: fit the default output, whose "
               "conformal bands give quantiles (predict(levels=[80, 90])), or name a network, e.g. "
               f"Forecaster('dlinear', output={output!r})") if output != "point" else ""
        raise ValueError("auto: no candidate was scored on the fit frame: " +
                         "; ".join(f"{r.model} {r.note}" for r in rows.values()) + fix)
    val_scores = [rows[name].val_score for name in kept]
    repeats = scores.repeats(kept, val_scores)  # [M] the candidate each repeats, -1 where none
    weights = scores.weights(kept, val_scores, repeats)
    for name, first in zip(kept, repeats.tolist()):
        if first >= 0:
            rows[name].note = join_note(rows[name].note, f"the same forecasts as {kept[first]}: blended once")
    chosen = [(name, float(w)) for name, w in zip(kept, weights) if w > 0]
    _warn_unread_covariates(candidates, [name for name, _ in chosen], rows)
    members = [_member(name, validated.get(name), variants.get(name), candidates, read, rows[name])
               for name, _ in chosen]
    leaderboard = _leaderboard(rows, dict(zip(kept, weights)), metric, found.describe())
    leaderboard.attrs["validation"] = _validation_note(validation, left_out, season)
    refit = {name: why for name, _ in chosen if (why := _block_cost(name)) is not None}
    network = with_members(settings.network, [(name, member.resolved.network) for (name, _), member in
                                              zip(chosen, members)],
                           [w for _, w in chosen], [rows[name].val_score if name in rows else math.nan
                                                    for name in settings.network.candidates])
    prefitted = Prefitted(network, tuple(member.model for member in members),
                          max(member.resolved.window.context_length for member in members),
                          leaderboard.sort_values("val_score", na_position="last", ignore_index=True))
    fit = fit_state(read, given, prefitted=prefitted)
    if not calibrating:
        return fit
    ensemble = sum(weight * scores.means[name] for name, weight in chosen)  # [W, H, C] the ensemble's
    items, origins, mean, windows, note = _calibration_windows(
        candidates, chosen, variants, refit, ensemble, starts,
        cost=sum(rows[name].cpu_seconds for name, _ in chosen),
        deadline=None if time_limit is None else started + time_limit)
    fit.state.leaderboard.attrs["calibration"] = note
    calibration = calibration_of(fit.state, panel, items, origins, mean, windows, stride,
                                 settings.conformal.resolved_for(auto=True), time.process_time() - started)
    _warn_fewer_calibration_windows(settings.conformal.windows, calibration, horizon)
    return dataclasses.replace(fit, state=dataclasses.replace(fit.state, calibration=calibration))


def _score_statistical(names: list[str], rows: dict[str, Row], candidates: Candidates, scores: Scores,
                       history: Panel, found: Intermittency, started: float,
                       time_limit: float | None) -> dict[str, ForecastModel]:
    """Fit and score the statistical candidates ``names`` in order (each on every series' history
    before its validation windows, carried forward over them), filling their ``rows``: a candidate
    :func:`_unsuited` to ``history`` (the data before the windows, as the candidates read them) and
    ``found`` (their intermittency) is skipped, and so is every candidate once one was scored and the
    fit (the CPU clock read ``started`` at its start) has spent the user's ``time_limit`` (None: none). Returns
    each scored candidate's fitted model (its variants per series, which its member keeps)."""
    variants: dict[str, ForecastModel] = {}
    seasons, why_not_mstl = _mstl_unsuited(history) if "mstl" in names else ((), "not a candidate")
    for name in names:
        row = rows[name]
        row.covariates = candidates.described if candidates.reads(name) else candidates.unused
        if (why := _unsuited(name, found, seasons, why_not_mstl)) is not None:
            row.note = why
        elif time_limit is not None and scores.scaled and time.process_time() - started > time_limit:
            row.note = f"skipped: the fit had spent its time_limit of {time_limit:g} CPU-s on those before"
        else:
            if name in INTERMITTENT_MODELS:
                row.note = f"tried: the data are {found.describe()}"
            clock = Clock()
            try:
                fit = candidates.fit(name, candidates.validation.first)
                result, stopped = candidates.validation_forecasts(name, fit, scores)
                if result is None:
                    row.note = join_note(row.note, stopped)
                else:
                    row.val_score = scores.add(name, result)
                    variants[name] = fit.state.model
            except (ValueError, RuntimeError) as err:
                row.note = f"failed: {err}"
            clock.add_to(row)
        progress(progress_line(row))
    return variants


def _leaderboard(rows: dict[str, Row], weights: dict[str, float], metric: str, intermittency: str) -> pd.DataFrame:
    """Every candidate's row (:data:`LEADERBOARD_COLUMNS`), its ensemble weight from ``weights`` (0 where
    absent), in the order tried; ``attrs``: ``metric``, the eval_metric the scores are on, and what the
    data's ``intermittency`` was found to be."""
    leaderboard = pd.DataFrame([{"model": r.model, "val_score": r.val_score, "weight": float(weights.get(r.model, 0.0)),
                                 "fit_seconds": r.fit_seconds, "cpu_seconds": r.cpu_seconds, "note": r.note,
                                 "covariates": r.covariates} for r in rows.values()], columns=LEADERBOARD_COLUMNS)
    leaderboard.attrs["eval_metric"] = metric
    leaderboard.attrs["intermittency"] = intermittency
    return leaderboard


def _warn_fewer_calibration_windows(asked: int | None, calibration: Calibration, horizon: int) -> None:
    """Say so where ``conformal_windows=asked`` asked for more calibration origins per series than
    auto's validation windows (and calibration blocks) give on this history: what its bands then reach."""
    if asked is None or asked <= calibration.windows:
        return
    warnings.warn(f"conformal_windows={asked}: auto calibrates its intervals on its validation windows, and this "
                  f"history holds {calibration.windows} origins per series ({calibration.stride} step(s) apart, "
                  f"prediction_length={horizon}), so the bands reach levels up to {calibration.max_level():.1f}%; "
                  "fit on a longer history for more", UserWarning, stacklevel=5)


def _block_cost(name: str) -> str | None:
    """Why an earlier calibration block would cost member ``name`` more than the one fit a block is
    planned at (:data:`~tsrec.validation.MAX_CALIBRATION_BLOCKS`), or None: a network would train
    again, and a model whose every forecast costs a fit (MSTL) would be fitted again at every
    origin of the block."""
    model_class = model_spec(name).model_class
    if model_class.trainable:
        return "would train again"
    if model_class.forecast_refits:
        return "would be fitted again at every origin"
    return None


def _calibration_windows(candidates: Candidates, chosen: list[tuple[str, float]], variants: dict[str, ForecastModel],
                         refit: dict[str, str], ensemble: np.ndarray, starts: np.ndarray, *, cost: float,
                         deadline: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, str]:
    """The windows the ensemble's bands are calibrated on: the validation's, whose forecasts are
    ``ensemble`` ``[W, H, C]``, and the earlier blocks :func:`~tsrec.validation.calibration_blocks`
    asks for (none where a member of ``refit`` would cost more than a fit per block: its name -> why,
    :func:`_block_cost`), each forecast by the ``chosen`` members fitted on the history before it
    (statistical ones keeping their ``variants``; ``starts`` ``[I]``: each series' first observed
    step, where the history a block leaves it is counted from); a block a member cannot fit ends them there, and
    so does one that would end past ``deadline`` (the CPU clock's reading where the user's
    ``time_limit`` runs out; None: none), a block costing about ``cost`` CPU seconds (the chosen
    members' validation), then what the last one cost. Returns their items and origins ``[W']``,
    forecasts ``[W', H, C]``, origins per series and the leaderboard's note."""
    validation = candidates.validation
    items, origins, mean = validation.items, validation.origins, ensemble
    blocks, stopped = 0, ""
    for block in range(1, (0 if refit else calibration_blocks(validation, starts)) + 1):
        if deadline is not None and time.process_time() + cost > deadline:
            stopped = f"the time_limit leaves too little for block {block}, about {cost:.1f} CPU-s"
            break
        started = time.process_time()
        span = validation.horizons * validation.truth.shape[1]  # steps per block
        # [I] each validated series a span earlier; one not validated forecasts no window (its count is 0)
        first = np.where(validation.validated, validation.first - block * span, validation.first)
        try:
            results = [(weight, candidates.forecast(name, first, like=variants.get(name))[1])
                       for name, weight in chosen]
        except (ValueError, RuntimeError) as err:  # a member the shorter history cannot fit: no earlier block
            stopped = f"block {block} failed: {err}"
            break
        items, origins = np.concatenate([results[0][1].items, items]), np.concatenate([results[0][1].origins, origins])
        mean = np.concatenate([sum(weight * result.mean for weight, result in results), mean])
        blocks, cost = block, time.process_time() - started
    note = _calibration_note(validation, blocks, refit, stopped)
    return items, origins, mean, validation.windows * (blocks + 1), note


def _calibration_note(validation: Validation, blocks: int, refit: dict[str, str], stopped: str) -> str:
    """What the leaderboard says of the calibration: its windows and why there are no more
    (``refit``: the members an earlier block would cost more than a fit, and why; ``stopped``: why
    the blocks wanted were not all forecast)."""
    evidence = validation.evidence * (blocks + 1)
    note = (f"{validation.windows * (blocks + 1)} windows per series, {evidence} independent (series x windows one "
            f"horizon apart)")
    if stopped:
        return f"{note}: the validation's and {blocks} block(s) before them ({stopped})" if blocks else \
            f"{note}: the validation's alone ({stopped})"
    if blocks:
        return f"{note}: the validation's and {blocks} block(s) before them, the members fitted before each"
    if evidence >= CALIBRATION_EVIDENCE:
        return f"{note}: the validation's"
    if refit:
        reasons = {why: [name for name in refit if refit[name] == why] for why in refit.values()}
        said = " and ".join(f"{', '.join(names)} {why}" for why, names in reasons.items())
        return f"{note}: the validation's alone, as {said} for earlier windows ({CALIBRATION_EVIDENCE} wanted)"
    return f"{note}: the validation's alone, as the history is too short for earlier ones ({CALIBRATION_EVIDENCE} wanted)"


def _validation_note(validation: Validation, left_out: int, season: int) -> str:
    """What the leaderboard says of the validation: its windows, and the series it left out as
    :func:`_seasons_kept` does (``left_out`` of them, ``season``: the calendar's)."""
    validated = int(np.count_nonzero(validation.validated))
    note = (f"{validated} of {len(validation.first)} series validated, {validation.horizons} window(s) of "
            f"{validation.truth.shape[1]} steps each")
    if left_out:
        note += (f"; {left_out} left out, as the history before their windows holds fewer than two seasons of "
                 f"{season} steps where all of it holds two")
    return note


def _member(name: str, validated: FittedState | None, variants: ForecastModel | None, candidates: Candidates,
            read: Read, row: Row) -> FittedState:
    """The fitted member ``name``: a statistical model on all of ``read``'s targets, each series
    keeping its validated fit ``variants`` where it grew at most
    :data:`~tsrec.models.parameters.VARIANT_GROWTH` since (the parameters validation scored, which
    ``predict`` carries forward) and fitted again otherwise
    (:meth:`~tsrec.models.stats.StatsModel.fit_series`), the ridge or the trees fitted on all of ``read``
    (with its covariates), a network's validated run (RevIN makes it indifferent to the ensemble's scaler),
    or a network without RevIN, or with covariates, refitted on all of ``read`` (its seconds added
    to ``row``): a network's covariates are scaled with the statistics of its own training part,
    which must be the ensemble's (fitted on all of ``read``)."""
    reads = candidates.reads(name)
    if validated is not None and getattr(validated.resolved.network, "revin", False) and not reads:
        return validated
    clock = Clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        member = fit_state(read if reads else read.targets(), candidates.settings_of(name), like=variants).state
    if validated is not None:
        clock.add_to(row)
        why = "its covariates scaled as the ensemble's" if reads else "no RevIN"
        row.note = join_note(row.note, f"refitted on all the history ({why})")
    return member
