"""GPU: every model trains and forecasts on CUDA, bf16-mixed training, predict / backtest on the
GPU, a model saved on the GPU forecasts the same on a CPU-only machine, and the REM's dense and FFT
paths give the CPU's numbers. Run with ``pytest -m gpu`` on a machine with a CUDA device; every
test here is skipped without one."""

import os
import subprocess
import sys
import textwrap

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import pytest
import torch
from tests.test_forecaster import wide_frame
from tests.test_rem import make_rem

from tsrec import Forecaster, list_models
from tsrec.evaluation import backtest
from tsrec.models import model_spec

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (pytest -m gpu on a GPU)")]


class DeviceLog(pl.Callback):
    """The device the module trained on, read when training starts."""

    def __init__(self) -> None:
        self.devices: list[str] = []

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.devices.append(pl_module.device.type)


def on_gpu(model: str, log: DeviceLog | None = None, **options) -> Forecaster:
    callbacks = [] if log is None else [log]
    options = {"max_epochs": 2, "batch_size": 64, "seed": 0, **options}
    return Forecaster(model, prediction_length=6, context_length=24,
                      trainer_kwargs={"accelerator": "gpu", "enable_progress_bar": False, "logger": False,
                                      "callbacks": callbacks}, **options)


@pytest.mark.parametrize("model", list_models())
def test_every_model_fits_and_predicts_on_cuda(model):
    if model_spec(model).model_class.__module__ in ("tsrec.models.stats", "tsrec.models.intermittent"):
        pytest.importorskip("statsforecast", reason=f"{model} needs statsforecast (tsrec[stats])")
    log = DeviceLog()
    forecaster = on_gpu(model, log).fit(wide_frame())
    if model_spec(model).model_class.trainable:  # the validated run, then the refit on all the history
        assert log.devices == ["cuda", "cuda"]
    torch.cuda.reset_peak_memory_stats()
    forecast = forecaster.predict()
    assert torch.cuda.max_memory_allocated() > 0, "predict did not run on the GPU"
    assert len(forecast) == 2 * 6 and np.isfinite(forecast["mean"]).all()


@pytest.mark.parametrize("model", ["rsa_patchtst", "rsa_informer"])
def test_bf16_mixed_training_learns(model):
    log = DeviceLog()
    forecaster = on_gpu(model, log, precision="bf16-mixed", max_epochs=4).fit(wide_frame(n=600))
    history = forecaster.training_summary.history
    assert log.devices == ["cuda", "cuda"] and np.isfinite(history["train_loss"]).all()
    assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0]
    assert np.isfinite(forecaster.predict()["mean"]).all()


def test_backtest_on_cuda_equals_a_cpu_machine_after_save_and_load(tmp_path):
    df = wide_frame(n=400)
    forecaster = on_gpu("rsa_patchtst").fit(df.iloc[:300])
    on_cuda = backtest(forecaster, df.iloc[300 - 24:], stride=6)
    path = forecaster.save(tmp_path / "model")
    df.to_csv(tmp_path / "frame.csv")
    # A CPU-only machine: a fresh process that sees no CUDA device loads the folder and backtests.
    script = textwrap.dedent(f"""
        import pandas as pd, torch
        from tsrec import Forecaster
        from tsrec.evaluation import backtest
        assert not torch.cuda.is_available()
        df = pd.read_csv({str(tmp_path / "frame.csv")!r}, index_col=0, parse_dates=True).asfreq("h")
        result = backtest(Forecaster.load({str(path)!r}), df.iloc[300 - 24:], stride=6)
        result.errors.to_csv({str(tmp_path / "cpu.csv")!r}, index=False)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    on_cpu = pd.read_csv(tmp_path / "cpu.csv")
    assert len(on_cpu) == len(on_cuda.errors)
    np.testing.assert_allclose(on_cpu["y_pred"], on_cuda.errors["y_pred"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("method", ["dense", "fft", "scan"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
def test_rem_products_and_gradients_on_cuda_equal_the_cpu(method, dtype, masked):
    torch.manual_seed(0)
    rem = make_rem(kinds=(1, 2, 1, 1, 1, 2), dilation=(3, 2, 5, 3), masked=masked).to(dtype)
    values = torch.randn(4, rem.n_heads, 200, 8, dtype=dtype)
    shape = dict(query_len=200, offset=0) if method == "scan" else dict(query_len=150, offset=60)  # scan: square
    results = {}
    for device in ("cpu", "cuda"):
        module, x = rem.to(device), values.to(device, copy=True).requires_grad_()  # a leaf on each device
        out = module.product(x, shape["query_len"], offset=shape["offset"], method=method)
        out.square().sum().backward()
        results[device] = [out.detach().cpu(), x.grad.cpu()] + [p.grad.cpu() for p in module.parameters()]
        module.zero_grad()
    tol = {"rtol": 1e-9, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-4}
    for cpu, cuda in zip(results["cpu"], results["cuda"], strict=True):
        torch.testing.assert_close(cuda, cpu, **tol)
