"""tsrec on Ray: forecasts and backtests split among Ray actors equal one process's, a worker
killed mid-predict is restarted and its part retried, and Ray Train fits one model over two
workers."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason='tsrec on Ray needs Ray: pip install "tsrec[ray]"')

from tests.test_partitions import COLUMNS, NAIVE, long_frame  # noqa: E402

from tsrec import Forecaster  # noqa: E402
from tsrec.distributed import backtest_ray, fit_ray, predict_ray  # noqa: E402
from tsrec.distributed.partitions import predict_part  # noqa: E402
from tsrec.evaluation import backtest  # noqa: E402

QUIET = {"enable_progress_bar": False, "logger": False}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "dlinear"
    df = long_frame()
    Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1, trainer_kwargs=QUIET).fit(
        df, **COLUMNS).save(path)
    return path, df


@pytest.mark.slow  # a local Ray cluster
@pytest.mark.parametrize("form", ["frame", "parquet"])
def test_predict_ray_is_one_process_predict(cluster, saved, form, tmp_path, monkeypatch):
    path, df = saved
    source = df
    if form == "parquet":
        monkeypatch.chdir(tmp_path)
        source = "data"  # relative to the driver's working directory, not the workers'
        os.mkdir(source)
        ordered = df.sort_values(["id", "time"])
        ordered.iloc[:400].to_parquet("data/a.parquet", row_group_size=100)  # a series split over two files
        ordered.iloc[400:].to_parquet("data/b.parquet", row_group_size=100)
    forecasts = predict_ray(path, source, num_workers=2, parts_per_worker=2)
    pd.testing.assert_frame_equal(forecasts, Forecaster.load(path).predict(df))


@pytest.mark.slow  # a local Ray cluster
def test_backtest_ray_scores_as_one_backtest(cluster, saved):
    path, df = saved
    options = dict(n_windows=3, stride=5, baselines=NAIVE)
    scored = backtest_ray(path, df, num_workers=2, parts_per_worker=2, **options)
    whole = backtest(Forecaster.load(path), df, **options, **COLUMNS)
    windows = ["item_id", "origin"]
    assert len(scored.errors.drop_duplicates(windows)) == len(whole.errors.drop_duplicates(windows))
    pd.testing.assert_frame_equal(scored.errors, whole.errors, rtol=1e-6)
    pd.testing.assert_frame_equal(scored.summary, whole.summary, rtol=1e-6)
    pd.testing.assert_frame_equal(scored.skill, whole.skill, rtol=1e-6)


@pytest.mark.slow  # a local Ray cluster
def test_a_worker_killed_mid_predict_is_restarted_and_its_part_retried(cluster, saved, tmp_path):
    """The first part any actor takes ends its process; Ray restarts the actor and runs the part again."""
    from tsrec.distributed.ray import _map_parts

    path, df = saved
    marker = tmp_path / "killed"

    def die_on_first_part(model_path, frame, **options):
        if not marker.exists():
            marker.touch()
            os._exit(1)
        return predict_part(model_path, frame, **options)

    forecasts = _map_parts(die_on_first_part, path, df, num_workers=2, parts_per_worker=2)
    assert marker.exists()  # a worker did die
    assert forecasts.groupby("item_id").size().eq(6).all() and forecasts.item_id.nunique() == df.id.nunique()
    pd.testing.assert_frame_equal(forecasts, Forecaster.load(path).predict(df))


@pytest.mark.slow
def test_fit_ray_trains_one_model_on_two_workers(cluster, saved, tmp_path):
    """The two workers split each of one process's batches (the same optimizer steps as one
    process, each window read once), in the validated run and in the refit on all the history, a
    second Trainer."""
    _, df = saved
    forecaster = Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1, batch_size=16,
                            trainer_kwargs=QUIET)
    fitted = fit_ray(forecaster, df, num_workers=2, storage_path=tmp_path / "ray", **COLUMNS)
    assert forecaster.fitted is None  # left as it was
    summary = fitted.training_summary
    windows = summary.budget["train_windows"]
    assert summary.budget["steps_per_epoch"] == math.ceil(windows / 16)  # one process's
    assert summary.budget["steps_run"] == math.ceil(windows / 16) - (0 < windows % 16 < 2)  # a last batch of
    # one window joins the one before
    assert summary.refit is not None and summary.refit["steps"] > 0
    forecasts = fitted.predict(df)
    assert len(forecasts) == 6 * df.id.nunique() and np.isfinite(forecasts["mean"]).all()


@pytest.mark.slow
def test_the_ray_docs_run(cluster, tmp_path, monkeypatch):
    """The blocks fenced ```python ray in docs/scale.md (test_docs runs the plain ```python ones)."""
    monkeypatch.chdir(tmp_path)
    page = Path(__file__).resolve().parents[1] / "docs" / "scale.md"
    blocks = re.findall(r"```python ray\n(.*?)```", page.read_text(), flags=re.S)
    assert blocks
    namespace = {"__name__": "__scale_ray__"}
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: None)  # the module's cluster is already up
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    for index, snippet in enumerate(blocks):
        exec(compile(snippet, f"{page.name}[python ray #{index}]", "exec"), namespace)
    assert len(namespace["forecasts"]) == 12 * 20


def test_options_are_checked_before_ray_is_started(saved):
    path, df = saved
    with pytest.raises(ValueError, match="refit_every is not supported"):
        backtest_ray(path, df, refit_every=2)
    with pytest.raises(ValueError, match="num_workers must be an integer >= 1"):
        predict_ray(path, df, num_workers=0)
    with pytest.raises(TypeError, match="parts_per_worker must be an integer"):
        predict_ray(path, df, parts_per_worker=2.0)
    with pytest.raises(TypeError, match="forecaster must be a tsrec Forecaster"):
        fit_ray(path, df)
    ddp = Forecaster("dlinear", prediction_length=6, trainer_kwargs={"strategy": "ddp", "devices": 2})
    with pytest.raises(ValueError, match=r"sets \['devices', 'strategy'\] itself"):
        fit_ray(ddp, df)


def test_ray_is_imported_only_when_used_and_named_when_missing(monkeypatch):
    code = "import sys, tsrec.distributed; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
    from tsrec.distributed.ray import _ray

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ModuleNotFoundError, match=r'pip install "tsrec\[ray\]"'):
        _ray()


@pytest.mark.slow  # a local Ray cluster
def test_an_error_of_predict_is_raised_not_retried(cluster, saved):
    """Last in the file: the failed run's last actor is freed when the exception is collected."""
    path, df = saved
    with pytest.raises(Exception, match="target_col='y' is not a column of the frame"):
        predict_ray(path, df.drop(columns="y"), num_workers=1, parts_per_worker=1)
