"""Past one machine: forecasts, backtests and training over many series on Ray or Spark.

Nothing here imports Ray or Spark until it is used (``pip install "tsrec[ray]"`` or
``"tsrec[spark]"``); :mod:`tsrec.distributed.partitions` holds what every worker does with its part
of the series, whichever framework runs it. Exact multi-process training, prediction and
backtests on one or several machines without either framework: Lightning's DDP
(``trainer_kwargs={"strategy": "ddp", "devices": N}``; see ``docs/scale.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["backtest_ray", "backtest_spark", "fit_ray", "fit_spark", "predict_ray", "predict_spark"]

if TYPE_CHECKING:
    from tsrec.distributed.ray import backtest_ray, fit_ray, predict_ray
    from tsrec.distributed.spark import backtest_spark, fit_spark, predict_spark

_LAZY = {**dict.fromkeys(("backtest_ray", "fit_ray", "predict_ray"), "tsrec.distributed.ray"),
         **dict.fromkeys(("backtest_spark", "fit_spark", "predict_spark"), "tsrec.distributed.spark")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tsrec.distributed' has no attribute {name!r}")
