"""GluonTS interoperability: converters between GluonTS datasets and tsrec frames, and models.

GluonTS side: an iterable of entries (``ListDataset``, ``PandasDataset``, or plain dicts), each with

- ``start``: a ``pd.Period`` (or, with ``freq=`` given, a ``pd.Timestamp`` or date string);
- ``target``: ``[T]`` (univariate) or ``[C, T]`` (multivariate), NaN where missing;
- ``item_id`` (optional). Other fields (covariates, static features) are not converted.

tsrec side (:mod:`tsrec.data.frame`): a *long* frame with columns ``item_id``, ``timestamp``,
``target`` (one univariate item per id), or a *wide* frame (``DatetimeIndex`` named ``timestamp``,
one column per variable: a single multivariate item).

Timestamps and periods: a tsrec timestamp belongs to the GluonTS period that contains it: ``'MS'`` and
``'ME'`` both give ``'M'``, quarters and years the period of the same span (``'QS-DEC'``, quarters
starting in December, give ``'Q-NOV'``; ``'YS-JUL'`` gives ``'Y-JUN'``), weeks the week that ends on
the offset's day (``'W-SUN'``: the weeks ending on Sundays, as pandas labels a week period). Back from
periods, timestamps are the periods' starts, except weeks, which keep the day they end (a ``'W-SUN'``
period becomes its Sunday, so that the frame's inferred ``freq`` is ``'W-SUN'`` again); with ``freq=``
they are the first step of ``freq`` inside each period (``freq='ME'``: month ends). A forecast's
``start_date`` is a period of the entry's own period frequency.

Models: :class:`TsrecEstimator` trains a tsrec model on a GluonTS dataset and returns a
:class:`TsrecPredictor`, which forecasts GluonTS datasets as GluonTS ``Forecast`` objects, so tsrec
models run in ``make_evaluation_predictions``, ``backtest_metrics`` and ``Evaluator`` (docs/gluonts.md).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from tsrec.config import DEFAULT_MODEL
from tsrec.conformal import band_levels
from tsrec.data.frame import Panel, Series, canonicalize
from tsrec.data.calendar import Calendar
from tsrec.data.time_features import MONTHS, future_index, normalize_freq
from tsrec._optional import quiet_gluonts_import
from tsrec.fitted import ForecastResult
from tsrec.forecaster import Forecaster
from tsrec.forecasting import forecast_next, steps_read
from tsrec.models.ensemble import AUTO

with quiet_gluonts_import():
    from gluonts.dataset.common import ListDataset
    from gluonts.evaluation import Evaluator
    from gluonts.model.estimator import Estimator
    from gluonts.model.forecast import Forecast, QuantileForecast, SampleForecast
    from gluonts.model.predictor import Predictor

__all__ = ["DEFAULT_NUM_SAMPLES", "QUANTILES", "TsrecEstimator", "TsrecPredictor", "from_tsrec_frame", "to_tsrec_frame"]

#: Sample paths per forecast of a distribution output when ``predict`` is given no ``num_samples``
#: (GluonTS's own default).
DEFAULT_NUM_SAMPLES = 100
#: The quantile levels of a calibrated model's forecasts when none are named: those GluonTS's
#: ``Evaluator`` scores by default (0.1, ..., 0.9; 0.5 is the mean).
QUANTILES: tuple[float, ...] = tuple(float(q) for q in Evaluator.default_quantiles)
_FRAME_COLUMNS = {"id_col": "item_id", "time_col": "timestamp", "target_col": "target"}  # to_tsrec_frame's
_FORECASTER_DIR = "tsrec-forecaster"  # where TsrecPredictor.serialize saves the Forecaster
_PREDICTOR_FILE = "tsrec-predictor.json"  # and the predictor's quantile levels
_ENTRIES_PER_CALL = 256  # dataset entries TsrecPredictor.predict reads at a time


class _Item(NamedTuple):
    """One dataset entry read: its id, ``[T]`` timestamps, ``[T]`` or ``[C, T]`` float64 target, step."""

    item_id: str
    index: pd.DatetimeIndex
    target: np.ndarray
    step: str  # the period frequency (freq=None) or the freq the timestamps step at
    period: str | None = None  # the frequency of the entry's pd.Period start (None: a timestamp start)


def to_tsrec_frame(
    dataset: Iterable[Mapping[str, Any]], *, freq: str | None = None, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """A GluonTS dataset as a tsrec frame.

    Univariate targets give a long frame with columns ``item_id`` (str; the entry's position when
    it has none), ``timestamp`` and ``target`` (float64, NaN kept), items in dataset order. One
    multivariate item (target ``[C, T]``) gives a wide frame ``[T, C]`` with a ``DatetimeIndex``
    named ``timestamp`` and columns ``columns`` (default ``"0"``, ..., ``"C-1"``).

    Args:
        dataset: iterable of entries with ``start``, ``target`` and optionally ``item_id``.
        freq: pandas offset alias of the timestamps. None: the periods' own frequency, each
            timestamp the start of its period; required when the starts are not ``pd.Period``.
        columns: the variable names of a multivariate target.

    Raises:
        TypeError: not a dataset of mappings.
        ValueError: no entry, a missing field, a ragged or >2-d target, a start off the ``freq``
            grid or periods of another frequency, repeated item ids, or several (or mixed)
            multivariate items.
    """
    items = _read_dataset(dataset, freq)
    ranks = {item.target.ndim for item in items}
    if ranks == {1}:
        if columns is not None:
            raise ValueError("columns names the variables of a multivariate target; this dataset is univariate")
        return _long_frame(items)
    if ranks == {2} and len(items) == 1:
        return _wide_frame(items[0].index, items[0].target, columns)
    if ranks == {2}:
        raise ValueError(
            f"got {len(items)} multivariate items; a tsrec wide frame holds one multivariate item: convert "
            "them one at a time (to_tsrec_frame([entry])), or split each target [C, T] into univariate items"
        )
    raise ValueError(
        "the dataset mixes univariate ([T]) and multivariate ([C, T]) targets; tsrec frames are either "
        "long (univariate items) or wide (one multivariate item): split the multivariate items into rows"
    )


def from_tsrec_frame(
    df: pd.DataFrame,
    *,
    id_col: Hashable | None = None,
    time_col: Hashable | None = None,
    target_col: Hashable | Sequence[Hashable] | None = None,
    freq: str | None = None,
) -> list[dict[str, Any]]:
    """A tsrec frame as a GluonTS ``ListDataset`` (a list of entries, usable by GluonTS's estimators).

    The frame is read as tsrec reads it (:func:`tsrec.data.frame.canonicalize`, same arguments and
    errors): long with ``id_col``, wide without. Each item becomes an entry with ``start`` (a
    ``pd.Period`` at the period frequency of ``freq``), ``target`` (float32, NaN at missing and
    absent grid steps) and ``item_id``. Long: one ``[T]`` entry per id, sorted by id (as str).
    Wide: one ``[C, T]`` entry with ``item_id`` ``"0"``, rows in column order; GluonTS keeps no
    column names: pass them back as ``to_tsrec_frame(dataset, columns=...)``.
    """
    panel = canonicalize(df, freq=freq, time_col=time_col, id_col=id_col, target_col=target_col)
    period_freq = _period_freq(panel.calendar)
    entries = [
        {
            "start": pd.Period(series.index[0], freq=period_freq),
            "target": series.values[:, 0] if panel.layout == "long" else series.values.T,
            "item_id": series.item_id,
        }
        for series in panel.items
    ]
    # GluonTS runs to_offset(freq): give it the Period's offset, as the alias "M" is deprecated there
    return ListDataset(entries, freq=entries[0]["start"].freq, one_dim_target=panel.layout == "long")


def _period_freq(calendar: Calendar) -> str:
    """The ``pd.Period`` frequency whose periods each hold one step of ``calendar`` (no session), of
    the same span: ``'MS'``, ``'ME'`` -> ``'M'``; ``'QS-DEC'`` (quarters from December) -> ``'Q-NOV'``;
    ``'YS-JUL'`` -> ``'Y-JUN'``; ``'W-SUN'`` -> ``'W-SUN'`` (the week ending on Sunday); ``'h'`` -> ``'h'``.
    Quarters are named on the ending month among October to December (as :func:`normalize_freq`)."""
    _require_no_session(calendar)
    offset = to_offset(calendar.step)
    if offset.n == 1 and isinstance(offset, (pd.offsets.QuarterBegin, pd.offsets.QuarterEnd)):
        last = offset.startingMonth - (1 if isinstance(offset, pd.offsets.QuarterBegin) else 0)  # the ending month
        return f"Q-{MONTHS[(last - 1) % 3 + 9]}"
    if offset.n == 1 and isinstance(offset, (pd.offsets.YearBegin, pd.offsets.YearEnd)):
        last = offset.month - (1 if isinstance(offset, pd.offsets.YearBegin) else 0)
        return f"Y-{MONTHS[(last - 1) % 12]}"
    # pandas' own for the rest: weeks keep their day (the period's end), months give 'M'
    return pd.date_range("2000-01-01", periods=1, freq=offset).to_period().freqstr


def _require_no_session(calendar: Calendar) -> None:
    """``ValueError`` for a session calendar (:mod:`tsrec.data.sessions`): GluonTS has none."""
    if calendar.session is not None:
        raise ValueError(
            f"freq {calendar.freq!r} is a session (open hours only); a GluonTS dataset's periods follow each other "
            "without closed hours, so sessions do not convert: forecast session data with tsrec's Forecaster on a frame "
            "(docs/data.md#sessions), or give GluonTS every step (closed hours as NaN) at the plain step"
        )


def _period_stamps(start: pd.Period, length: int) -> pd.DatetimeIndex:
    """The ``[length]`` timestamps of the periods from ``start``: their starts, a week's last day."""
    periods = pd.period_range(start, periods=length, freq=start.freq)
    if isinstance(start.freq, pd.offsets.Week):  # a week period is labelled by the day it ends
        return periods.to_timestamp(how="end").normalize()
    return periods.to_timestamp()


def _read_dataset(dataset: Iterable[Mapping[str, Any]], freq: str | None) -> list[_Item]:
    """Every entry of ``dataset``, validated: at least one, all at one frequency."""
    if isinstance(dataset, pd.DataFrame):
        raise TypeError(
            "to_tsrec_frame takes a GluonTS dataset (an iterable of entries), got a DataFrame; a "
            "DataFrame is already a tsrec frame, or wrap it with gluonts.dataset.pandas.PandasDataset"
        )
    if not isinstance(dataset, Iterable):
        raise TypeError(f"expected a GluonTS dataset (an iterable of entries), got {type(dataset).__name__}")
    freq = None if freq is None else normalize_freq(freq)
    if freq is not None:
        _require_no_session(Calendar.of(freq))
    items = [_read_entry(position, entry, freq) for position, entry in enumerate(dataset)]
    if not items:
        raise ValueError("the dataset has no entries; pass at least one series")
    _check_same_freq(items)
    return items


def _read_entry(position: int, entry: object, freq: str | None) -> _Item:
    """One dataset entry, validated."""
    if not isinstance(entry, Mapping):
        raise TypeError(
            f"entry {position} is a {type(entry).__name__}, not a mapping; a GluonTS entry is a dict "
            "with 'start', 'target' and optionally 'item_id'"
        )
    item_id = str(entry.get("item_id", position))
    label = f"entry {position} (item_id {item_id!r})"
    missing = [field for field in ("start", "target") if field not in entry]
    if missing:
        raise ValueError(f"{label} has no {missing} field; its fields are {sorted(map(str, entry))}")
    try:
        target = np.asarray(entry["target"], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"the target of {label} is ragged or not numeric ({error}); a multivariate target is a [C, T] "
            "array whose C rows have the same length"
        ) from None
    if target.ndim not in (1, 2):
        raise ValueError(f"the target of {label} has shape {target.shape}; expected [T] or [C, T]")
    start = entry["start"]
    period = start.freqstr if isinstance(start, pd.Period) else None
    step = period if freq is None and period is not None else str(freq)
    return _Item(item_id, _timestamps(label, start, target.shape[-1], freq), target, step, period)


def _timestamps(label: str, start: object, length: int, freq: str | None) -> pd.DatetimeIndex:
    """The ``[length]`` timestamps of an item starting at ``start`` (see the module docstring)."""
    if isinstance(start, pd.Period):
        if freq is None:
            return _period_stamps(start, length)
        offset = to_offset(freq)
        stamps = pd.date_range(offset.rollforward(start.start_time), periods=length, freq=offset)
        # freq matches when its steps fall one in each period (Q-NOV and Q-FEB periods are one grid)
        if not (stamps.to_period(start.freq) == pd.period_range(start, periods=length, freq=start.freq)).all():
            raise ValueError(
                f"{label} has periods of frequency {start.freqstr!r}, which freq={freq!r} does not match "
                f"(its periods are {_period_freq(Calendar.of(freq))!r}); pass a freq of the same period, or freq=None"
            )
        return stamps
    if freq is None:
        raise ValueError(
            f"{label} starts at a {type(start).__name__} ({start!r}), not a pandas Period; pass freq=... "
            "(e.g. freq='h') to place its timestamps"
        )
    try:
        first = pd.Timestamp(start)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the start {start!r} of {label} is not a timestamp ({error})") from None
    offset = to_offset(freq)
    if not offset.is_on_offset(first):
        raise ValueError(
            f"the start {first} of {label} is not a step of freq={freq!r}; pass the freq of the data, or "
            f"start the series at {offset.rollforward(first)}"
        )
    return pd.date_range(first, periods=length, freq=offset)


def _check_same_freq(items: Sequence[_Item]) -> None:
    """``ValueError`` unless every item steps at one frequency."""
    freqs = {item.step for item in items}
    if len(freqs) > 1:
        raise ValueError(
            f"the items have different frequencies {sorted(freqs)}; a tsrec frame has one frequency: "
            "resample the series to one frequency first"
        )


def _long_frame(items: Sequence[_Item]) -> pd.DataFrame:
    """Columns ``item_id``, ``timestamp``, ``target``, rows by item (dataset order), then time."""
    ids, indexes, targets = [i.item_id for i in items], [i.index for i in items], [i.target for i in items]
    id_index = pd.Index(ids)
    if id_index.has_duplicates:
        repeated = list(id_index[id_index.duplicated()].unique())
        raise ValueError(
            f"item ids {repeated[:5]} appear more than once; a long frame has one series per id: give "
            "each entry its own item_id"
        )
    return pd.DataFrame(
        {
            "item_id": np.repeat(np.array(ids, dtype=object), [len(index) for index in indexes]),
            "timestamp": indexes[0].append(list(indexes[1:])).rename(None),
            "target": np.concatenate(targets),
        }
    )


def _wide_frame(index: pd.DatetimeIndex, target: np.ndarray, columns: Sequence[str] | None) -> pd.DataFrame:
    """``[T, C]`` frame of a ``[C, T]`` target, index named ``timestamp``."""
    names = [str(c) for c in range(target.shape[0])] if columns is None else list(columns)
    if len(names) != target.shape[0]:
        raise ValueError(f"columns has {len(names)} names for a target of {target.shape[0]} variables ([C, T])")
    return pd.DataFrame(target.T, index=index.rename("timestamp"), columns=names)


# ---------------------------------------------------------------------------------------- models
class TsrecEstimator(Estimator):
    """A GluonTS ``Estimator`` that trains a tsrec model: ``train`` returns a :class:`TsrecPredictor`.

    Univariate only: every entry has a ``[T]`` target, one series per ``item_id`` (entries without
    one are named by their position, as :func:`to_tsrec_frame` names them).

    Args:
        model: a name from :func:`tsrec.list_models` (default ``"auto"``, the Forecaster's default:
            statistical models and, on data with enough windows, networks, scored on the end of the
            training series, their validation-weighted ensemble, calibrated at ``train``).
        prediction_length: steps to forecast.
        freq: pandas offset alias of the data. None: the frequency of the entries' ``pd.Period``
            starts; required when the starts are timestamps.
        context_length: past steps the model reads (default: the model's, see :class:`~tsrec.Forecaster`).
        quantiles: the quantile levels of a calibrated model's forecasts (``auto``'s, or any model's
            with ``conformal_windows=k``): default :data:`QUANTILES`, the levels GluonTS's
            ``Evaluator`` scores by default; pass your ``Evaluator(quantiles=...)``'s. Each pair
            ``q``, ``1 - q`` is the conformal interval of level ``100 (1 - 2q)`` percent around the
            mean (per item: each series' band is its own scale times the pooled scores,
            docs/intervals.md), and ``0.5`` is the mean.
        **options: the other :class:`~tsrec.Forecaster` arguments (``seed``, ``conformal_windows``,
            ``max_epochs``, ``batch_size``, ``val_windows``, ``trainer_kwargs``, model options, ...).
            A network named without ``conformal_windows`` gets ``output="quantile"`` unless
            ``output`` is given (its own quantiles, ``quantile_levels``: ``QuantileForecast``;
            ``"normal"`` or ``"studentt"``: ``SampleForecast``); ``output="point"`` without a
            calibration is refused: a forecast with a mean only has no quantiles, and GluonTS's
            ``Evaluator`` stops at it ("Forecast contains NaN values").

    Raises:
        TypeError: an unknown option (the message lists the known ones).
        ValueError: an invalid option, ``quantiles`` or ``freq``, or a model that would forecast
            points only (no calibration, no probabilistic output).
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, prediction_length: int, freq: str | None = None,
                 context_length: int | None = None, quantiles: Sequence[float] = QUANTILES, **options: Any) -> None:
        super().__init__(lead_time=0)
        forecaster = Forecaster(model, prediction_length=prediction_length, context_length=context_length,
                                freq=freq, **options)
        if forecaster.trainable and "output" not in options and not _calibrates(forecaster):
            forecaster.set_params(output="quantile")  # a network's own quantiles, where nothing calibrates it
        _require_quantiles(forecaster)
        if forecaster.freq is not None:
            _require_no_session(Calendar.of(forecaster.freq))
        self.forecaster = forecaster
        self.quantiles = _check_quantiles(quantiles)
        self.prediction_length = forecaster.prediction_length
        self.freq = forecaster.freq

    def train(self, training_data: Iterable[Mapping[str, Any]],
              validation_data: Iterable[Mapping[str, Any]] | None = None) -> TsrecPredictor:
        """Fit a new Forecaster on ``training_data`` and return its predictor.

        Without ``validation_data`` the Forecaster validates on the end of each training series
        (``auto``: its candidates and its calibration; a network: its ``val_windows``); with it (a
        named network only), on every window of ``validation_data`` (one entry per training
        ``item_id``, holding at least ``context_length`` steps before its targets), or on the last
        ``val_windows`` of each entry when that option is set.
        """
        forecaster = self.forecaster.unfitted_copy()
        if validation_data is not None and forecaster.model_name == AUTO:
            raise ValueError("TsrecEstimator('auto') validates its candidates (and calibrates its intervals) on the "
                             "end of each training series, so it takes no validation_data: train without it, or "
                             "name a network, e.g. TsrecEstimator('rsa_patchtst', ...)")
        val_df = None if validation_data is None else _univariate_frame(validation_data, self.freq, "validation_data")
        forecaster.fit(_univariate_frame(training_data, self.freq, "training_data"), val_df=val_df, **_FRAME_COLUMNS)
        return TsrecPredictor(forecaster, quantiles=self.quantiles)


class _Request(NamedTuple):
    """One entry to forecast: its own ``item_id`` (None without one), and the entry read, named
    by the fitted series it continues."""

    item_id: Any
    series: _Item


class TsrecPredictor(Predictor):
    """A GluonTS ``Predictor`` backed by a fitted :class:`~tsrec.Forecaster` with quantiles: a
    conformal calibration (``auto``'s, or ``conformal_windows=k``), else a probabilistic output.

    Made by :meth:`TsrecEstimator.train`, or around a Forecaster fitted on a long frame (one
    univariate series per id; any column names). ``quantiles``: the levels of a calibrated model's
    forecasts (:class:`TsrecEstimator`; default :data:`QUANTILES`).

    Each entry of a dataset given to :meth:`predict` continues a fitted series (tsrec scales each
    series with its statistics from fit): the one named by its ``item_id``. An entry without
    ``item_id`` is the fitted series at its position in the dataset, as in training; a model fitted
    on a single series takes every such entry as that series (so rolling windows of one series need
    no ids). Entries repeating an ``item_id`` (rolling windows, as ``generate_instances`` makes) are
    forecast separately.
    """

    def __init__(self, forecaster: Forecaster, *, quantiles: Sequence[float] = QUANTILES) -> None:
        if not isinstance(forecaster, Forecaster):
            raise TypeError(f"TsrecPredictor wraps a fitted tsrec Forecaster, got {type(forecaster).__name__}")
        if forecaster.model is None:
            raise ValueError("the Forecaster is not fitted: fit it first (or train a TsrecEstimator)")
        if forecaster.panel.layout != "long":
            raise ValueError(
                "the Forecaster was fitted on a wide frame (one multivariate series); TsrecPredictor forecasts "
                "univariate series: fit on a long frame (id_col, time_col, target_col), as TsrecEstimator does"
            )
        _require_quantiles(forecaster)
        _require_no_session(forecaster.panel.calendar)
        super().__init__(prediction_length=forecaster.prediction_length)
        self.forecaster = forecaster
        self.quantiles = _check_quantiles(quantiles)
        self.conformal = forecaster.calibration is not None  # the bands of predict(levels=...), else the model's own
        self.levels = band_levels(self.quantiles) if self.conformal else ()
        if self.conformal:
            forecaster.calibration.require_quantiles(self.quantiles)

    @property
    def freq(self) -> str:
        """The pandas frequency of the fitted data."""
        return self.forecaster.freq

    def predict(self, dataset: Iterable[Mapping[str, Any]], num_samples: int | None = None) -> Iterator[Forecast]:
        """One forecast of the ``prediction_length`` steps after each entry's target, in dataset order.

        A calibrated model gives a ``QuantileForecast`` with keys ``quantiles`` (its conformal
        bands; ``"0.5"`` the mean) and ``"mean"``; a quantile output a ``QuantileForecast`` with
        keys ``"0.1"``, ... (the model's ``quantile_levels``) and ``"mean"`` (``num_samples`` is not
        used by either); a distribution output a ``SampleForecast`` of ``num_samples`` (default
        :data:`DEFAULT_NUM_SAMPLES`) paths ``[S, H]``. ``start_date`` is the ``pd.Period`` of the
        first forecast step and ``item_id`` the entry's.

        Raises (while iterating) ``ValueError`` for a multivariate entry, an entry of another
        frequency, an ``item_id`` the model was not fitted on, or fewer steps than the model reads,
        and the errors of :func:`to_tsrec_frame` for malformed entries.
        """
        samples = self._num_samples(num_samples)
        entries = enumerate(dataset)
        while chunk := list(itertools.islice(entries, _ENTRIES_PER_CALL)):
            yield from self._forecast([self._request(position, entry) for position, entry in chunk], samples)

    def _num_samples(self, num_samples: int | None) -> int | None:
        """The sample paths to draw: None for quantile forecasts (a calibration's or a quantile output's)."""
        if self.conformal or self.forecaster.settings.network.output == "quantile":
            return None
        return DEFAULT_NUM_SAMPLES if num_samples is None else num_samples

    def _request(self, position: int, entry: Mapping[str, Any]) -> _Request:
        """``entry`` (at ``position`` in the dataset) read at the fitted frequency, checked
        univariate, cut to the steps the forecast reads (:func:`~tsrec.forecasting.steps_read`) and
        named by its ``item_id``, else by its position (the fitted series there, or a series new to
        the model past them; a model fitted on one series takes every entry without one as it)."""
        series = _read_entry(position, entry, self.freq)
        _require_univariate(position, series, "the dataset")
        fitted = self.forecaster.panel.item_ids
        if "item_id" not in entry:
            series = series._replace(item_id=fitted[0] if len(fitted) == 1 else str(position))
        last = steps_read(self.forecaster.fitted)
        if last is not None:
            series = series._replace(index=series.index[-last:], target=series.target[-last:])
        return _Request(entry.get("item_id"), series)

    def _forecast(self, requests: Sequence[_Request], num_samples: int | None) -> list[Forecast]:
        """The forecasts of ``requests``, in order: one :func:`~tsrec.forecasting.forecast_next` per round of
        entries with distinct series (the k-th entry of each series is in round k)."""
        rounds: dict[int, list[int]] = {}
        seen: dict[str, int] = {}
        for index, request in enumerate(requests):
            seen[request.series.item_id] = seen.get(request.series.item_id, -1) + 1
            rounds.setdefault(seen[request.series.item_id], []).append(index)
        forecasts: dict[int, Forecast] = {}
        # a calibrated model's quantiles are its conformal bands' ends (forecast_next reads them so)
        asked = self.quantiles if self.conformal else \
            self.forecaster.settings.network.quantile_levels if num_samples is None else None
        for indices in rounds.values():
            panel = self._panel([requests[i].series for i in indices])
            result = forecast_next(self.forecaster.fitted, panel, quantiles=asked, num_samples=num_samples)
            for k, i in enumerate(indices):
                forecasts[i] = self._to_forecast(result, k, panel.items[k].index[-1], requests[i])
        return [forecasts[i] for i in range(len(requests))]

    def _panel(self, series: list[_Item]) -> Panel:
        """Univariate entries with distinct ids (already on the fitted frequency's grid) as a panel."""
        items = []
        for item in series:
            values = np.where(np.isfinite(item.target), item.target, np.nan)[:, None]  # [T, 1]
            items.append(Series(item.item_id, item.index, values, np.isfinite(values)))
        fitted = self.forecaster.panel
        return Panel(calendar=fitted.calendar, layout="long", columns=fitted.columns, items=tuple(items))

    def _to_forecast(self, result: ForecastResult, k: int, last: pd.Timestamp, request: _Request) -> Forecast:
        """Window ``k`` of ``result`` (its series' last step ``last``) as a GluonTS ``Forecast`` of
        ``request``: ``start_date`` a period of the entry's own period frequency (the fitted one's
        for an entry with a timestamp start)."""
        calendar = self.forecaster.panel.calendar
        period = request.series.period or _period_freq(calendar)
        start = pd.Period(future_index(last, calendar, 1)[0], freq=period)
        item_id = request.item_id
        if result.samples is not None:
            return SampleForecast(result.samples[:, k, :, 0], start_date=start, item_id=item_id)  # [S, H]
        mean = result.mean[k, :, 0]  # [H]
        keys = [str(level) for level in result.levels] + ["mean"]
        return QuantileForecast(np.concatenate([result.quantiles[k, :, 0].T, mean[None]]), start_date=start,
                                forecast_keys=keys, item_id=item_id)  # [Q + 1, H]

    def serialize(self, path: Path) -> None:
        """Write the predictor into the existing folder ``path``: GluonTS's ``gluonts-config.json``,
        the quantile levels (``tsrec-predictor.json``) and the Forecaster (:meth:`~tsrec.Forecaster.save`)
        in ``path/tsrec-forecaster``."""
        super().serialize(Path(path))
        (Path(path) / _PREDICTOR_FILE).write_text(json.dumps({"quantiles": list(self.quantiles)}))
        self.forecaster.save(Path(path) / _FORECASTER_DIR)

    @classmethod
    def deserialize(cls, path: Path, device: str | None = None) -> TsrecPredictor:
        """A predictor written by :meth:`serialize` (also through ``Predictor.deserialize(path)``).

        ``device``: the Lightning accelerator that predicts (``"cpu"``, ``"cuda"``; default: the one
        the model was saved with, ``"auto"`` unless its ``trainer_kwargs`` named one).
        """
        overrides = None if device is None else {"accelerator": device}
        settings = json.loads((Path(path) / _PREDICTOR_FILE).read_text())
        return cls(Forecaster.load(Path(path) / _FORECASTER_DIR, trainer_kwargs=overrides), **settings)


def _calibrates(forecaster: Forecaster) -> bool:
    """Whether ``fit`` gives ``forecaster`` a conformal calibration (``auto`` by default; any model
    with ``conformal_windows=k``)."""
    windows = forecaster.settings.conformal.windows
    return windows != 0 if forecaster.model_name == AUTO else windows is not None and windows > 0


def _require_quantiles(forecaster: Forecaster) -> None:
    """``ValueError`` unless ``forecaster`` (fitted or not) has quantiles for GluonTS: a conformal
    calibration, or a probabilistic output."""
    calibrated = _calibrates(forecaster) if forecaster.fitted is None else forecaster.calibration is not None
    if calibrated or forecaster.settings.network.output != "point":
        return
    what = (f"{forecaster.model_name!r} is not trained" if not forecaster.trainable else
            "output='point' forecasts a mean only")
    raise ValueError(
        f"{what} and has no conformal calibration, so it has no quantiles for GluonTS's Evaluator (it stops at "
        "'Forecast contains NaN values'): pass conformal_windows=<k> (k rolling origins at the end of each series "
        "calibrate its bands; the default model, 'auto', calibrates by default), or, for a network, "
        "output='quantile', 'normal' or 'studentt'"
    )


def _check_quantiles(quantiles: Sequence[float]) -> tuple[float, ...]:
    """``quantiles`` as sorted distinct floats in (0, 1), else a ``ValueError`` naming the bad one."""
    try:
        values = tuple(sorted({float(q) for q in ([quantiles] if np.isscalar(quantiles) else quantiles)}))
    except (TypeError, ValueError):
        raise ValueError(f"quantiles must be numbers in (0, 1), e.g. (0.1, 0.5, 0.9); got {quantiles!r}") from None
    bad = [q for q in values if not 0.0 < q < 1.0]
    if bad or not values:
        raise ValueError(f"quantiles must be levels in (0, 1) such as 0.1 or 0.9 (percent intervals are 1 - 2q); "
                         f"got {list(quantiles) if not bad else bad[0]!r}")
    return values


def _require_univariate(position: int, item: _Item, role: str) -> None:
    """``ValueError`` for an entry (at ``position`` in ``role``) with a ``[C, T]`` target."""
    if item.target.ndim == 2:
        raise ValueError(
            f"entry {position} of {role} (item_id {item.item_id!r}) has a multivariate target of shape "
            f"{item.target.shape}; TsrecEstimator and TsrecPredictor forecast univariate series (target [T]): make "
            "one entry per row of the target, or fit tsrec's Forecaster on the wide frame to_tsrec_frame([entry])"
        )


def _univariate_frame(dataset: Iterable[Mapping[str, Any]], freq: str | None, role: str) -> pd.DataFrame:
    """A univariate GluonTS dataset (``role`` names it in errors) as a long tsrec frame."""
    items = _read_dataset(dataset, freq)
    for position, item in enumerate(items):
        _require_univariate(position, item, role)
    return _long_frame(items)
