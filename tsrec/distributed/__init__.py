"""Past one machine: forecasts, backtests and training over many series on Ray or Spark.

Nothing here imports Ray or Spark until it is used (``pip install "tsrec[ray]"`` or
``"tsrec[spark]"``); :mod:`tsrec.distributed.partitions` holds what every worker does with its part
of the series, whichever framework runs it. Exact multi-process training, prediction and
backtests on one or several machines without either framework: Lightning's DDP
(``trainer_kwargs={"strategy": "ddp", "devices": N}``; see ``docs/scale.md``).
"""
