"""tsrec on a local Spark: predict_spark and backtest_spark equal one process's predict and
backtest; fit_spark trains under DDP in the processes TorchDistributor starts."""

import math
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests import test_covariates as covariates
from tests.test_partitions import COLUMNS, NAIVE, long_frame
from tsrec import Forecaster
from tsrec.distributed.spark import backtest_spark, fit_spark, predict_spark
from tsrec.evaluation import backtest

QUIET = {"enable_progress_bar": False, "logger": False}


@pytest.fixture(scope="module")
def spark():
    """A local two-core session; its Python workers run this interpreter (so they import this tsrec)."""
    pytest.importorskip("pyspark", reason='pyspark is not installed (pip install "tsrec[spark]")')
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime and there is no java on PATH")
    from pyspark.sql import SparkSession

    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("tsrec-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    if previous is None:
        del os.environ["PYSPARK_PYTHON"]
    else:
        os.environ["PYSPARK_PYTHON"] = previous


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "dlinear"
    df = long_frame()
    Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1, output="normal",
               trainer_kwargs=QUIET).fit(df, **COLUMNS).save(path)
    return path, df


def test_without_pyspark_the_calls_say_what_to_install(monkeypatch, saved):
    for name in ("pyspark", "pyspark.sql"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails
    with pytest.raises(ImportError, match=r'predict_spark needs pyspark: pip install "tsrec\[spark\]"'):
        predict_spark(saved[0], saved[1])


def sorted_rows(frame):
    return frame.sort_values(["item_id", "timestamp"], ignore_index=True)


@pytest.mark.slow  # a local Spark session (a JVM)
@pytest.mark.parametrize("partitions", [None, 3])
def test_predict_spark_is_one_predict(spark, saved, partitions):
    path, df = saved
    sdf = spark.createDataFrame(df.assign(unused="x"))  # a column the model does not read is dropped
    forecasts = predict_spark(path, sdf, partitions=partitions, quantiles=[0.1, 0.9], num_samples=2)
    assert forecasts.columns == ["item_id", "timestamp", "mean", "0.1", "0.9", "sample_0", "sample_1"]
    whole = Forecaster.load(path).predict(df, quantiles=[0.1, 0.9])
    spread = sorted_rows(forecasts.toPandas())
    assert len(spread) == len(whole) == 7 * 6
    pd.testing.assert_frame_equal(spread.drop(columns=["sample_0", "sample_1"]), sorted_rows(whole),
                                  check_dtype=False, rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # a local Spark session (a JVM)
def test_predict_spark_takes_a_pandas_frame_and_refuses_what_it_cannot_forecast(spark, saved):
    path, df = saved
    forecasts = predict_spark(path, df[df.id.isin(["s1", "s4"])]).toPandas()
    assert sorted(forecasts.item_id.unique()) == ["s1", "s4"]
    with pytest.raises(ValueError, match=r"lacks the columns \['y'\]"):
        predict_spark(path, df.drop(columns="y"))
    with pytest.raises(ValueError, match="quantiles must be distinct levels"):
        predict_spark(path, df, quantiles=[1.5])
    with pytest.raises(ValueError, match="partitions must be an integer >= 1"):
        predict_spark(path, df, partitions=0)


@pytest.mark.slow  # a local Spark session (a JVM)
def test_predict_spark_reads_each_groups_future_covariates(spark, tmp_path):
    df = covariates.long_frame(n=24 * 4, ids="abc")
    fitted = Forecaster("dlinear", prediction_length=covariates.H, context_length=covariates.LC, max_epochs=1,
                        trainer_kwargs=QUIET).fit(df, **covariates.LONG, future_covariates=["x"],
                                                  static_covariates=["region"])
    path = fitted.save(tmp_path / "dlinear")
    future = covariates.future_rows(df, df["ds"].max())
    spread = predict_spark(path, spark.createDataFrame(df), partitions=2,
                           future_covariates=spark.createDataFrame(future)).toPandas()
    whole = fitted.predict(df, future_covariates=future)
    pd.testing.assert_frame_equal(sorted_rows(spread), sorted_rows(whole), check_dtype=False, rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # a local Spark session (a JVM)
def test_backtest_spark_scores_as_one_backtest(spark, saved):
    path, df = saved
    spread = backtest_spark(path, spark.createDataFrame(df), n_windows=3, stride=5, baselines=NAIVE)
    whole = backtest(Forecaster.load(path), df, n_windows=3, stride=5, baselines=NAIVE, **COLUMNS)
    keys = ["item_id", "origin", "step"]
    pd.testing.assert_frame_equal(spread.errors.sort_values(keys, ignore_index=True),
                                  whole.errors.sort_values(keys, ignore_index=True), rtol=1e-6, atol=1e-6)
    pd.testing.assert_frame_equal(spread.summary, whole.summary, rtol=1e-6)
    pd.testing.assert_frame_equal(spread.skill, whole.skill, rtol=1e-6)
    with pytest.raises(ValueError, match="refit_every is not supported"):
        backtest_spark(path, df, refit_every=2)
    with pytest.raises(TypeError, match="n_window"):
        backtest_spark(path, df, n_window=2)


@pytest.mark.slow  # a local Spark session (a JVM)
def test_fit_spark_refuses_what_the_processes_cannot_take_before_starting_them(spark):
    df = long_frame()
    with pytest.raises(ValueError, match=r"fit_spark sets \['devices'\]"):
        fit_spark(Forecaster("dlinear", prediction_length=6, trainer_kwargs={"devices": 2}), df, **COLUMNS)
    with pytest.raises(ValueError, match="pass use_gpu=True"):
        fit_spark(Forecaster("dlinear", prediction_length=6, trainer_kwargs={"accelerator": "gpu"}), df, **COLUMNS)
    with pytest.raises(TypeError, match=r"write a Spark DataFrame to Parquet first"):
        fit_spark(Forecaster("dlinear", prediction_length=6), spark.range(3), **COLUMNS)
    with pytest.raises(ValueError, match="pass model_dir="):
        fit_spark(Forecaster("dlinear", prediction_length=6), df, local_mode=False, **COLUMNS)


@pytest.mark.slow
def test_the_spark_docs_run_and_fit_spark_trains_in_two_processes(spark, tmp_path, monkeypatch, one_thread):
    """The blocks fenced ```python spark in docs/ (test_docs runs the plain ```python ones): fit_spark
    trains in two processes that split each of one process's batches, and the model it returns forecasts."""
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__scale_spark__"}
    page = Path(__file__).resolve().parents[1] / "docs" / "scale.md"
    blocks = re.findall(r"```python spark\n(.*?)```", page.read_text(), flags=re.S)
    assert blocks
    for index, snippet in enumerate(blocks):
        exec(compile(snippet, f"{page.name}[python spark #{index}]", "exec"), namespace)
    forecaster, fitted = namespace["forecaster"], namespace["fitted"]
    assert forecaster.model is None  # fit_spark's argument is left unfitted
    budget = fitted.training_summary.budget
    windows, batch = budget["train_windows"], fitted.training.batch_size
    assert budget["steps_run"] == 2 * (math.ceil(windows / batch) - (0 < windows % batch < 2))  # 2 epochs
    written = pd.read_parquet(tmp_path / "forecasts")
    assert len(written) == 12 * 12 and np.isfinite(written["mean"]).all()
    assert np.isfinite(namespace["result"].metric("mse"))
