"""Forecasts, backtests and training of a Forecaster on a Ray cluster.

:func:`predict_ray` and :func:`backtest_ray` split the series among a pool of Ray actors (Ray Data's
``map_batches``): each actor loads the saved model once and forecasts, or backtests, the parts of
the series it is handed (:mod:`tsrec.distributed.partitions`); the driver puts the parts back in
order. The result is that of one process: ``Forecaster.load(path).predict(data)``, or
``tsrec.evaluation.backtest``'s. :func:`fit_ray` trains one model with Ray Train: Lightning's DDP
over ``num_workers`` processes, each reading all the series and training on its share of the
windows.

Ray is imported when a function here is called (``pip install "tsrec[ray]"``). Each call uses the
Ray cluster the caller connected to with ``ray.init``, else starts a local one with Ray's defaults
(left running, as Ray Data does, for the next call; ``ray.shutdown()`` ends it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tsrec._checks import check_int
from tsrec.data.source import Source, is_parquet, rows_of, series_ids
from tsrec.collective import split_ids
from tsrec.distributed.partitions import backtest_part, check_backtest, id_column, load_model, predict_part
from tsrec.forecaster import Forecaster

if TYPE_CHECKING:
    from types import ModuleType

    from tsrec.evaluation import BacktestResult

__all__ = ["backtest_ray", "fit_ray", "predict_ray"]

#: The name :func:`fit_ray`'s workers register Ray's DDP strategy under in Lightning's registry.
RAY_DDP = "tsrec_ray_ddp"

#: A worker's job on its part: ``(model_path, frame, **options) -> rows`` (forecasts or errors).
PartTask = Callable[..., pd.DataFrame]


def predict_ray(model_path: str | os.PathLike, data: Source, *, num_workers: int = 2, parts_per_worker: int = 4,
                **predict_kwargs: Any) -> pd.DataFrame:
    """``Forecaster.load(model_path).predict(data, **predict_kwargs)``, run by ``num_workers`` Ray actors.

    Args:
        model_path: the directory ``Forecaster.save`` wrote, on a file system every node reads (a
            model fitted on a long frame: a wide frame is one series, see
            :func:`~tsrec.distributed.partitions.id_column`).
        data: a long DataFrame, or long Parquet data (a file, a folder of ``*.parquet`` files or a
            list of files, on a file system every node reads), in the fitted columns.
        num_workers: Ray actors, one CPU each; each loads the model once.
        parts_per_worker: the series are split into ``parts_per_worker * num_workers`` parts (runs
            of ids in text order), handed to the actors one at a time: a part lost with its
            worker is all that is forecast again.
        **predict_kwargs: passed to ``Forecaster.predict`` (``quantiles``, ``num_samples``,
            ``batch_size``; ``future_covariates`` goes to every worker whole).

    What each worker reads and holds: with a DataFrame, the frame is put in Ray's object store
    once and every worker holds it (its numeric columns are shared on a node, its id and text
    columns are copied into each worker), selecting its part's rows; with Parquet, each worker
    reads only the rows of its part's series (the driver reads the id column alone). Prefer
    Parquet, written sorted by id, when the frame is large.

    Failures: Ray Data restarts an actor whose process dies (killed, out of memory, its node
    lost) and runs its unfinished parts again, without limit (Ray Data's default for actor pools),
    so every series is forecast exactly once; a part that kills every worker it is given keeps
    being retried until the call is stopped (raise ``parts_per_worker`` to make parts smaller).
    An exception raised by ``predict`` itself (a ``ValueError`` about the data) is not retried:
    the call fails with Ray Data's ``UserCodeException``, whose message holds the worker's
    traceback.

    Returns the forecasts of every series exactly once, rows and order as ``predict`` returns them.
    """
    return _map_parts(predict_part, model_path, data, num_workers=num_workers, parts_per_worker=parts_per_worker,
                      **predict_kwargs)


def backtest_ray(model_path: str | os.PathLike, data: Source, *, num_workers: int = 2, parts_per_worker: int = 4,
                 **backtest_kwargs: Any) -> BacktestResult:
    """``tsrec.evaluation.backtest(Forecaster.load(model_path), data, **backtest_kwargs)`` run by
    ``num_workers`` Ray actors: each backtests its parts of the series with the saved model (never
    refitted: ``refit_every`` is refused), and the driver scores their errors together
    (:func:`~tsrec.evaluation.score_backtest`: the metrics of one backtest within float rounding).

    ``model_path``, ``data``, ``num_workers``, ``parts_per_worker``, what each worker reads and
    what happens when one fails: as for :func:`predict_ray`. ``backtest_kwargs``: ``start``, ``n_windows``,
    ``stride``, ``batch_size``, ``season_length``, ``quantiles``, ``baselines`` of
    :func:`~tsrec.evaluation.backtest` (the columns are the fitted ones).
    """
    from tsrec.evaluation import score_backtest

    check_backtest(backtest_kwargs)
    errors = _map_parts(backtest_part, model_path, data, num_workers=num_workers, parts_per_worker=parts_per_worker,
                        **backtest_kwargs)
    return score_backtest(load_model(model_path), errors)


def fit_ray(forecaster: Forecaster, data: Source, *, num_workers: int = 2, use_gpu: bool = False,
            storage_path: str | os.PathLike | None = None, **fit_kwargs: Any) -> Forecaster:
    """Fit ``forecaster`` on ``data`` with Ray Train: Lightning's DDP over ``num_workers`` processes.

    Each worker builds a new unfitted Forecaster with ``forecaster``'s settings, its
    ``trainer_kwargs`` completed with Ray's DDP strategy and cluster environment (one CPU or GPU
    device per worker), and fits it on ``data`` with ``fit_kwargs`` (``id_col``, ``time_col``,
    ``target_col``, covariates, ``val_df``, as for ``Forecaster.fit``); Lightning gives each worker
    its share of the training windows per epoch and averages the gradients, so the workers end
    with the same weights. Worker 0 saves the model into a checkpoint that it reports to Ray Train
    (under ``storage_path``: Ray's default, ``~/ray_results``, when None; pass a path every node
    reads and writes, a shared file system or cloud storage, on a cluster of several machines);
    the driver returns the Forecaster loaded from it (``forecaster`` itself is left as it was, as
    :func:`~tsrec.distributed.spark.fit_spark` leaves it).

    What each worker reads and holds: all of ``data``, since every worker scales, splits and
    windows all the series and then draws its share of the windows. A DataFrame is put in Ray's
    object store once and each worker gets it from there; Parquet data (a file, a folder or a list
    of files, on a file system every node reads) is read by each worker itself.

    ``use_gpu``: one GPU per worker (else CPUs). ``trainer_kwargs`` of ``forecaster`` must not set
    ``strategy``, ``devices``, ``num_nodes``, ``accelerator`` or ``plugins``: Ray sets them.
    """
    if not isinstance(forecaster, Forecaster):
        raise TypeError(f"forecaster must be a tsrec Forecaster, got {type(forecaster).__name__}")
    check_int("num_workers", num_workers)
    taken = sorted(set(forecaster.trainer_kwargs) & {"strategy", "devices", "num_nodes", "accelerator", "plugins"})
    if taken:
        raise ValueError(f"fit_ray runs Lightning's DDP on Ray's workers and sets {taken} itself: remove them from "
                         "the forecaster's trainer_kwargs (use num_workers and use_gpu instead)")
    ray = _ray()
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    config = {"params": forecaster.get_params(), "data": _shared(ray, data), "use_gpu": use_gpu,
              "fit_kwargs": fit_kwargs}
    run_config = RunConfig(storage_path=None if storage_path is None else str(storage_path))
    trainer = TorchTrainer(_fit_worker, train_loop_config=config, run_config=run_config,
                           scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu))
    result = trainer.fit()
    if result.checkpoint is None:
        raise RuntimeError(f"Ray Train finished without the fitted model's checkpoint (result: {result!r})")
    with result.checkpoint.as_directory() as directory:
        return Forecaster.load(directory)


# ------------------------------------------------------------------------------------------- workers
class PartWorker:
    """One Ray actor of :func:`predict_ray` / :func:`backtest_ray`: the saved model loaded once,
    then ``task`` run on each part of the series it is handed.

    ``source``: the data, or the object-store reference of a DataFrame (fetched once per actor);
    ``parts``: the reference of the list of every part's ids.
    """

    def __init__(self, task: PartTask, model_path: str, source: Any, id_col: Hashable, parts: Any,
                 options: dict[str, Any]) -> None:
        import ray

        self.task, self.model_path, self.id_col, self.options = task, model_path, id_col, options
        self.source = ray.get(source) if isinstance(source, ray.ObjectRef) else source
        self.parts: list[np.ndarray] = ray.get(parts)
        load_model(model_path)  # once per actor, before its first part

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``batch["part"]``: ``[P]`` part indices; returns them with ``"rows"``: ``[P]`` frames, each
        part's rows as ``task`` returned them (kept whole, as Python objects: Arrow would change
        their dtypes)."""
        rows = np.empty(len(batch["part"]), dtype=object)
        rows[:] = [self.task(self.model_path, rows_of(self.source, self.id_col, self.parts[index]), **self.options)
                   for index in batch["part"]]
        return {"part": batch["part"], "rows": rows}


def _map_parts(task: PartTask, model_path: str | os.PathLike, data: Source, *, num_workers: int,
               parts_per_worker: int, **options: Any) -> pd.DataFrame:
    """``task``'s rows of every part of the series of ``data``, run by a pool of ``num_workers``
    actors, concatenated in part order (the series' order as text: one process's order)."""
    check_int("num_workers", num_workers)
    check_int("parts_per_worker", parts_per_worker)
    ray = _ray()
    model_path = str(Path(model_path).resolve())
    id_col = id_column(load_model(model_path))
    source = _shared(ray, data)
    ids = _ids(data, id_col)
    if len(ids) == 0:
        raise ValueError("data holds no rows, so no series to forecast: pass the long frame or Parquet data of the "
                         "series to forecast")
    parts = split_ids(ids, parts_per_worker * num_workers)
    items = ray.data.from_items([{"part": index} for index in range(len(parts))], override_num_blocks=len(parts))
    items.context.enable_fallback_to_arrow_object_ext_type = True  # the parts' frames travel as Python objects
    worker_kwargs = {"task": task, "model_path": model_path, "source": source, "id_col": id_col,
                     "parts": ray.put(parts), "options": options}
    rows = items.map_batches(PartWorker, fn_constructor_kwargs=worker_kwargs, batch_size=1, batch_format="numpy",
                             compute=ray.data.ActorPoolStrategy(size=num_workers), num_cpus=1).take_all()
    return pd.concat([row["rows"] for row in sorted(rows, key=lambda row: row["part"])], ignore_index=True)


def _fit_worker(config: dict[str, Any]) -> None:
    """One Ray Train worker of :func:`fit_ray`: fit, and report worker 0's saved model."""
    import ray
    import ray.train
    from lightning.pytorch.strategies import StrategyRegistry
    from ray.train.lightning import RayDDPStrategy, RayLightningEnvironment

    # By name, so that each Trainer of the fit (the validated run, the refit) builds its own
    # strategy: Lightning refuses a strategy instance that an earlier Trainer has set up.
    StrategyRegistry.register(RAY_DDP, RayDDPStrategy, description="Ray Train's DDP (tsrec.distributed.fit_ray)",
                              override=True)
    params = config["params"]
    trainer_kwargs = {**(params["trainer_kwargs"] or {}), "strategy": RAY_DDP, "devices": "auto",
                      "plugins": [RayLightningEnvironment()], "accelerator": "gpu" if config["use_gpu"] else "cpu"}
    forecaster = Forecaster(**{**params, "trainer_kwargs": trainer_kwargs})
    data = config["data"]
    forecaster.fit(ray.get(data) if isinstance(data, ray.ObjectRef) else data, **config["fit_kwargs"])
    with tempfile.TemporaryDirectory(prefix="tsrec-ray-") as directory:
        model = forecaster.save(Path(directory) / "model")  # worker 0 writes while the others wait
        first = ray.train.get_context().get_world_rank() == 0
        ray.train.report({}, checkpoint=ray.train.Checkpoint.from_directory(model) if first else None)


# ------------------------------------------------------------------------------------------- helpers
def _ray() -> ModuleType:
    """Ray, connected to the caller's cluster or else to a new local one."""
    try:
        import ray
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError('tsrec on Ray needs Ray Data and Ray Train: pip install "tsrec[ray]"') from error
    import ray.data  # noqa: F401  (ray.data is not loaded by import ray)

    if not ray.is_initialized():
        ray.init()
    return ray


def _ids(data: Source, id_col: Hashable) -> np.ndarray:
    """The ids of the rows of ``data`` (:func:`~tsrec.data.source.series_ids`: a frame's id column,
    Parquet's distinct ids read alone); ``ValueError`` for a frame without ``id_col``."""
    if id_col not in getattr(data, "columns", (id_col,)):
        raise ValueError(f"the model was fitted with id column {id_col!r}, which data lacks (columns: "
                         f"{list(data.columns)}); pass a long frame with it")
    return series_ids(data, id_col)


def _shared(ray: ModuleType, data: Source) -> Any:
    """What workers are given of ``data``: a DataFrame's object-store reference (put once), else
    the Parquet paths, made absolute (workers run in other working directories)."""
    if isinstance(data, pd.DataFrame):
        return ray.put(data)
    if not is_parquet(data):
        raise TypeError(f"data must be a long DataFrame or long Parquet data (a file, a folder of files or a list "
                        f"of files), got {type(data).__name__}")
    return os.path.abspath(data) if isinstance(data, (str, os.PathLike)) else [os.path.abspath(p) for p in data]
