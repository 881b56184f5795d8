"""Forecasts of a trained model over windows, without a Lightning Trainer where it adds nothing:
in float32 on a device torch names, Lightning is not even imported (a process that only forecasts,
or fits statistical models alone, never loads it)."""

from __future__ import annotations

import itertools
import warnings

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from tsrec.batch import ForecastBatch
from tsrec.config import TrainingConfig
from tsrec.data.windows import WindowDataset
from tsrec.models.base import ForecastModel, forecast_from_data
from tsrec.training.sharding import ShardSampler

#: Lightning precisions that run the module as it is, in float32 (no autocast, no cast of the module).
FLOAT32_PRECISIONS = ("32", "32-true")


def predict_batches(model: ForecastModel, config: TrainingConfig, dataset: WindowDataset, batch_size: int,
                    device: torch.device | str | None = None) -> list[Tensor]:
    """What ``Trainer.predict(ForecastingModule(model, config), loader)`` returns for the batches of
    ``batch_size`` windows of ``dataset`` (in order, the last partial batch included; under a
    process group, this rank's share of the windows, :class:`~tsrec.training.sharding.ShardSampler`):
    one :meth:`~tsrec.training.module.ForecastingModule.predict_step` output per batch, ``[B, H, C]``
    (or ``[B, H, C, P]``), computed on ``device`` and returned on the CPU, as ``Trainer.predict``
    returns them.

    ``device`` defaults to the one the model's weights are on. In float32 (``config.precision`` in
    :data:`FLOAT32_PRECISIONS`) the model runs there directly, in eval mode under
    ``torch.inference_mode`` as ``Trainer.predict`` runs it; any other precision (autocast, or a
    model cast to another dtype) goes through a one-device ``Trainer.predict`` on ``device`` (a CPU,
    CUDA or MPS device), which applies it. Either way the model is left on the device and in the
    train/eval mode it was in.
    """
    home, training = _device_of(model), model.training
    device = home if device is None else torch.device(device)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=ShardSampler(len(dataset)), collate_fn=dataset.collate)
    try:
        if str(config.precision) not in FLOAT32_PRECISIONS:
            from tsrec.training.module import ForecastingModule
            from tsrec.training.trainer import make_predict_trainer, quiet_lightning

            with quiet_lightning():
                trainer = make_predict_trainer(config, {"accelerator": device.type},
                                               devices=1 if device.index is None else [device.index])
                return trainer.predict(ForecastingModule(model, config), loader)
        model.to(device).eval()
        with torch.inference_mode():
            return [forecast_from_data(model, _on_device(batch, device)).cpu() for batch in loader]
    finally:
        model.to(home).train(training)


def _on_device(batch: ForecastBatch, device: torch.device) -> ForecastBatch:
    """``batch``'s tensors on ``device`` (all of them: a batch is a flat dict of tensors)."""
    return {name: value.to(device) for name, value in batch.items()}  # type: ignore[return-value]


def predict_device(trainer_kwargs: dict | None) -> torch.device | None:
    """The device a model predicts on for ``trainer_kwargs``' ``accelerator`` (default ``"auto"``:
    the first CUDA device when there is one, else Apple's MPS, else the CPU; ``"gpu"``/``"cuda"``
    with ``devices=[i]``: CUDA device ``i``). None for an accelerator given as an object or named
    otherwise (e.g. ``"tpu"``): leave the choice to a Lightning ``Trainer``."""
    kwargs = trainer_kwargs or {}
    accelerator = kwargs.get("accelerator", "auto")
    if not isinstance(accelerator, str):
        return None
    devices = kwargs.get("devices")
    index = devices[0] if isinstance(devices, (list, tuple)) and devices else 0
    if accelerator == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", 0)
        return torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")
    if accelerator in ("gpu", "cuda"):
        if not torch.cuda.is_available():  # a model trained on a GPU, loaded where there is none
            warnings.warn(f"trainer_kwargs name accelerator={accelerator!r}, but no CUDA device is available here: "
                          "the model predicts on the CPU (pass trainer_kwargs={'accelerator': 'cpu'} to say so)",
                          UserWarning, stacklevel=3)
            return torch.device("cpu")
        return torch.device("cuda", index)
    return torch.device(accelerator) if accelerator in ("cpu", "mps") else None


def _device_of(module: torch.nn.Module) -> torch.device:
    """The device of the module's first parameter or buffer (the CPU if it has neither; read through
    ``named_parameters``: a statistical model's ``parameters`` attribute holds its fitted values)."""
    tensor = next(itertools.chain((p for _, p in module.named_parameters()), module.buffers()), None)
    return torch.device("cpu") if tensor is None else tensor.device
