"""tsrec on Spark: forecasts and backtests of a saved model over a Spark DataFrame of many series,
and training through ``pyspark.ml.torch.distributor.TorchDistributor``.

Prediction and backtests group the rows into ``partitions`` groups of whole series (the group of a
series is ``pmod(hash(id), partitions)``) and run :func:`tsrec.distributed.partitions.predict_part`
or :func:`~tsrec.distributed.partitions.backtest_part` on each group with ``applyInPandas``: every
Python worker loads the saved model once and forecasts many series per call (a call costs about
25-50 ms of fixed work on top of under 1 ms per series, so one group per series would be many times
slower). Training runs :meth:`Forecaster.fit <tsrec.forecaster.Forecaster.fit>` in every process
that ``TorchDistributor`` starts (torchrun), under Lightning's DDP.

Needs ``pip install "tsrec[spark]"``; pyspark is imported by the functions that use it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from tsrec._checks import check_int
from tsrec.data.source import is_parquet
from tsrec.distributed.partitions import backtest_part, check_backtest, id_column, load_model, predict_part
from tsrec.forecaster import Forecaster
from tsrec.nn.outputs import check_levels

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkFrame
    from pyspark.sql import GroupedData, SparkSession
    from pyspark.sql.types import StructType

    from tsrec.evaluation import BacktestResult

__all__ = ["backtest_spark", "fit_spark", "predict_spark"]

#: The trainer_kwargs that :func:`fit_spark` sets from the processes TorchDistributor starts.
DDP_KEYS = ("devices", "num_nodes")


def predict_spark(model_path: str | os.PathLike, sdf: SparkFrame | pd.DataFrame, *, partitions: int | None = None,
                  quantiles: Sequence[float] | None = None, num_samples: int | None = None,
                  batch_size: int | None = None,
                  future_covariates: SparkFrame | pd.DataFrame | None = None) -> SparkFrame:
    """The forecasts of every series of ``sdf`` by the model saved in ``model_path``, as a Spark
    DataFrame: ``Forecaster.load(model_path).predict(sdf)`` computed on the executors.

    Args:
        model_path: the directory ``Forecaster.save`` wrote, at a path the driver and every
            executor read (a shared or mounted file system); a model fitted on a long frame.
        sdf: the series in the fitted long layout (id, time, target and covariate columns; other
            columns are dropped before the shuffle), each with at least ``context_length`` steps;
            a pandas frame is turned into one (``spark.createDataFrame``).
        partitions: the number of groups of whole series (default: ``spark.sql.shuffle.partitions``).
            A group is one pandas frame in one Python worker: keep its rows within the worker's memory.
        quantiles, num_samples, batch_size: as for :meth:`Forecaster.predict
            <tsrec.forecaster.Forecaster.predict>`.
        future_covariates: for a model fitted with future covariates, their values at every forecast
            step (a Spark or pandas frame with the id and time columns and the future covariates);
            grouped as ``sdf`` is, so that each group reads those of its own series.

    Returns a Spark DataFrame, in no particular order, with ``Forecaster.predict``'s columns:
    ``item_id`` (of ``sdf``'s id column's type), ``timestamp`` (of ``sdf``'s time column's type when
    it is a timestamp, else ``TimestampNTZType``), ``mean`` and one double column per quantile level
    (named as the level, e.g. ``"0.1"``: write ``F.col("`0.1`")``) and per sample path (``sample_0``, ...).
    Lazy, as every Spark DataFrame: the forecasts run when it is written or collected.
    """
    spark = _session("predict_spark")
    forecaster = load_model(model_path)
    columns = _model_columns(forecaster)
    frame = _spark_frame(spark, sdf, columns, "sdf")
    schema = _forecast_schema(frame, forecaster, columns, quantiles, num_samples)
    predict = dict(quantiles=quantiles, num_samples=num_samples, batch_size=batch_size)
    groups = _groups(frame, columns[0], partitions, spark)
    path = os.path.abspath(model_path)
    if future_covariates is None:

        def forecast(rows: pd.DataFrame) -> pd.DataFrame:
            return predict_part(path, rows, **predict)

        return groups.applyInPandas(forecast, schema)
    future = _spark_frame(spark, future_covariates, columns[:2] + list(forecaster.covariates.config.future),
                          "future_covariates")

    def forecast_reading(rows: pd.DataFrame, future_rows: pd.DataFrame) -> pd.DataFrame:
        if rows.empty:  # a group of future covariates alone: their series are not in sdf
            return pd.DataFrame(columns=schema.names)
        return predict_part(path, rows, future_covariates=future_rows, **predict)

    return groups.cogroup(_groups(future, columns[0], partitions, spark)).applyInPandas(forecast_reading, schema)


def backtest_spark(model_path: str | os.PathLike, sdf: SparkFrame | pd.DataFrame, *, partitions: int | None = None,
                   **backtest: Any) -> BacktestResult:
    """``tsrec.evaluation.backtest(Forecaster.load(model_path), sdf, **backtest)`` run on the
    executors: each group of whole series is backtested where it lies, its errors are gathered to
    the driver and scored together (:func:`~tsrec.evaluation.score_backtest`; the same metrics as
    one backtest of all the series, within float rounding).

    ``model_path``, ``sdf`` and ``partitions`` as for :func:`predict_spark`; ``backtest``: the
    arguments of :func:`~tsrec.evaluation.backtest` but ``refit_every`` (one saved model is scored)
    and the column names (the model's). The errors of all the series come to the driver's memory
    (:attr:`BacktestResult.errors <tsrec.evaluation.BacktestResult.errors>`: one row per series,
    window and step), each group's as one pickled frame: keep a group's errors within
    ``spark.driver.maxResultSize`` and 2 GB.
    """
    from tsrec.evaluation import score_backtest

    spark = _session("backtest_spark")
    check_backtest(backtest)
    forecaster = load_model(model_path)
    columns = _model_columns(forecaster)
    frame = _spark_frame(spark, sdf, columns, "sdf")
    path = os.path.abspath(model_path)

    def pickled_errors(rows: pd.DataFrame) -> pd.DataFrame:
        # one row per group: the errors keep every dtype on their way to the driver, and their
        # columns (baselines, quantile levels) need not be known here
        errors = backtest_part(path, rows, **backtest)
        return pd.DataFrame({"errors": [pickle.dumps(errors, protocol=pickle.HIGHEST_PROTOCOL)]})

    rows = _groups(frame, columns[0], partitions, spark).applyInPandas(pickled_errors, "errors binary").collect()
    errors = pd.concat([pickle.loads(row.errors) for row in rows], ignore_index=True)
    return score_backtest(forecaster, errors)


def fit_spark(forecaster: Forecaster, data: pd.DataFrame | str | os.PathLike | Sequence[str | os.PathLike], *,
              num_processes: int = 2, local_mode: bool = True, use_gpu: bool = False,
              model_dir: str | os.PathLike | None = None, **fit: Any) -> Forecaster:
    """Train ``forecaster``'s settings on ``data`` in ``num_processes`` processes under Lightning's
    DDP, started by Spark's ``TorchDistributor``; returns the fitted Forecaster (``forecaster``
    itself is left as it was).

    Every process fits an unfitted copy of ``forecaster`` with ``trainer_kwargs`` extended by
    ``strategy="ddp"`` (unless it names a strategy), ``accelerator`` ``"gpu"`` or ``"cpu"``
    (``use_gpu``), and ``devices`` and ``num_nodes`` as torchrun laid the processes out; the
    training windows are split among the processes. Process 0 saves the model into ``model_dir``,
    which the driver loads.

    Args:
        data: a pandas frame (sent to every process) or long Parquet data (a file, a folder of
            files or a list of files that every process reads); ``fit``: ``Forecaster.fit``'s
            other arguments (``id_col``, ``time_col``, ``target_col``, covariates, ``val_df``).
        num_processes, local_mode, use_gpu: ``TorchDistributor``'s: ``local_mode=True`` starts the
            processes on the driver's machine, ``False`` one per Spark task on the executors
            (``use_gpu`` then takes ``spark.task.resource.gpu.amount`` GPUs per task).
        model_dir: where process 0 saves the model (kept). Default: a temporary folder on the
            driver, removed once loaded; required with ``local_mode=False``: a folder on a file
            system the executors write and the driver reads.
    """
    _session("fit_spark")
    from pyspark.ml.torch.distributor import TorchDistributor

    if not isinstance(forecaster, Forecaster):
        raise TypeError(f"forecaster must be a tsrec Forecaster, got {type(forecaster).__name__}")
    source = _training_source(data)
    trainer_kwargs = _ddp_trainer_kwargs(forecaster.trainer_kwargs, use_gpu)
    if model_dir is None and not local_mode:
        raise ValueError("with local_mode=False process 0 runs on an executor: pass model_dir=, a folder on a file "
                         "system the executors write and the driver reads (e.g. a mounted bucket or NFS)")
    target = tempfile.mkdtemp(prefix="tsrec-spark-") if model_dir is None else os.path.abspath(model_dir)
    try:
        distributor = TorchDistributor(num_processes=num_processes, local_mode=local_mode, use_gpu=use_gpu)
        saved = distributor.run(_fit_process, forecaster.unfitted_copy(), source, target, trainer_kwargs, fit)
        return Forecaster.load(saved)
    finally:
        if model_dir is None:
            shutil.rmtree(target, ignore_errors=True)


# ---------------------------------------------------------------------------- what the workers run
def _fit_process(forecaster: Forecaster, source: Any, model_dir: str, trainer_kwargs: dict[str, Any],
                 fit: dict[str, Any]) -> str:
    """One torchrun process of :func:`fit_spark`: fit ``forecaster`` (unfitted) on ``source`` under
    DDP over all the processes; process 0 saves it while the others wait (``Forecaster.save`` under
    a process group). Every process returns ``model_dir`` (each writes its return value to the one
    file TorchDistributor reads)."""
    world, local = int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_WORLD_SIZE"])
    layout = {"devices": local, "num_nodes": world // local}
    fitted = forecaster.set_params(trainer_kwargs={**trainer_kwargs, **layout}).fit(source, **fit)
    fitted.save(model_dir)
    return model_dir


# ---------------------------------------------------------------------------- driver-side checks
def _session(caller: str) -> SparkSession:
    """The active SparkSession; ``ImportError`` without pyspark, ``RuntimeError`` without a session."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise ImportError(f'{caller} needs pyspark: pip install "tsrec[spark]"') from error
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError(f"{caller} runs on the active SparkSession and there is none: start one first, e.g. "
                           "SparkSession.builder.master('local[*]').getOrCreate()")
    return spark


def _model_columns(forecaster: Forecaster) -> list[str]:
    """The columns the model reads: id, time, targets, covariates (a long-frame model's only)."""
    id_col = id_column(forecaster)
    time_col = forecaster.fitted.schema.time_col
    if time_col is None:
        raise ValueError("the model was fitted on a long frame with its timestamps in the index, and a Spark "
                         "DataFrame has no index: refit it with the timestamps in a column (time_col=...)")
    return [id_col, time_col, *forecaster.panel.columns, *forecaster.covariates.config.columns]


def _spark_frame(spark: SparkSession, data: Any, columns: list[str], name: str) -> SparkFrame:
    """``data`` (a Spark or pandas frame) as a Spark DataFrame of ``columns`` alone; ``ValueError``
    naming the missing ones."""
    from pyspark.sql import DataFrame

    if isinstance(data, pd.DataFrame):
        data = spark.createDataFrame(data)
    elif not isinstance(data, DataFrame):
        raise TypeError(f"{name} must be a Spark or pandas DataFrame, got {type(data).__name__}")
    if missing := [c for c in columns if c not in data.columns]:
        raise ValueError(f"{name} lacks the columns {missing} that the model reads (it has {data.columns}); "
                         f"pass the series in the layout the model was fitted on: {columns}")
    return data.select(*columns)


def _groups(frame: SparkFrame, id_col: str, partitions: int | None, spark: SparkSession) -> GroupedData:
    """``frame``'s rows grouped by ``pmod(hash(id), partitions)``: whole series, many per group."""
    from pyspark.sql import functions as F

    if partitions is None:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    partitions = check_int("partitions", partitions, 1)
    return frame.groupBy(F.pmod(F.hash(F.col(id_col)), F.lit(partitions)))


def _forecast_schema(frame: SparkFrame, forecaster: Forecaster, columns: list[str],
                     quantiles: Sequence[float] | None, num_samples: int | None) -> StructType:
    """The Spark schema of ``predict``'s frame for these arguments (checked here, on the driver)."""
    from pyspark.sql import types as T

    if (quantiles is not None or num_samples is not None) and not forecaster.model.output.probabilistic:
        raise ValueError(f"{forecaster.model_name} was trained with output='point', so it has no quantiles or "
                         "samples; refit with output='quantile', 'normal' or 'studentt'")
    levels = () if quantiles is None else check_levels("quantiles", quantiles)
    samples = 0 if num_samples is None else check_int("num_samples", num_samples, 1)
    # named as ForecastResult.to_frame names them
    extra = [str(level) for level in levels] + [f"sample_{i}" for i in range(samples)]
    time_type = frame.schema[columns[1]].dataType
    if not isinstance(time_type, (T.TimestampType, T.TimestampNTZType)):
        time_type = T.TimestampNTZType()
    return T.StructType([T.StructField("item_id", frame.schema[columns[0]].dataType),
                         T.StructField("timestamp", time_type),
                         *(T.StructField(name, T.DoubleType()) for name in ["mean", *extra])])


def _training_source(data: Any) -> Any:
    """``fit_spark``'s ``data``: a pandas frame as is, Parquet paths made absolute."""
    if isinstance(data, pd.DataFrame):
        return data
    if is_parquet(data):
        return os.path.abspath(data) if isinstance(data, (str, os.PathLike)) else [os.path.abspath(p) for p in data]
    raise TypeError(f"data must be a pandas DataFrame or long Parquet data (a path or a list of paths), got "
                    f"{type(data).__name__}; write a Spark DataFrame to Parquet first (sdf.write.parquet(path)) "
                    "and pass the path")


def _ddp_trainer_kwargs(trainer_kwargs: dict[str, Any], use_gpu: bool) -> dict[str, Any]:
    """``trainer_kwargs`` with the DDP strategy and the accelerator of ``use_gpu``; ``ValueError``
    when they set what the processes' layout decides, or another accelerator."""
    if given := [k for k in DDP_KEYS if k in trainer_kwargs]:
        raise ValueError(f"fit_spark sets {given} from the processes TorchDistributor starts (num_processes); "
                         "remove them from the forecaster's trainer_kwargs")
    accelerator = "gpu" if use_gpu else "cpu"
    chosen = trainer_kwargs.get("accelerator", accelerator)
    if chosen not in (accelerator, "cuda" if use_gpu else "cpu", "auto"):
        raise ValueError(f"trainer_kwargs has accelerator={chosen!r} but use_gpu={use_gpu}: pass use_gpu="
                         f"{not use_gpu} or leave accelerator out of trainer_kwargs")
    return {"strategy": "ddp", **trainer_kwargs, "accelerator": accelerator}
