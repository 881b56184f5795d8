"""Typed training settings (one place for each)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

LR_SCHEDULES = ("constant", "halve")
LOSSES = ("mse", "mae")


@dataclass(frozen=True)
class TrainingConfig:
    """How a model is trained.

    Attributes:
        max_epochs: upper bound on epochs (early stopping may end sooner).
        batch_size: windows per step (the last partial batch is kept).
        learning_rate: Adam learning rate of the backbone.
        lr_schedule: ``"halve"`` is Informer's schedule (epochs 1 and 2 at ``learning_rate``, then
            halved every epoch); ``"constant"`` keeps it.
        rsa_lr_multiplier: REM scalars and gates train in their own Adam group at
            ``learning_rate * rsa_lr_multiplier`` (at the backbone's rate they barely move; see
            RSA_SPEC section 4.6), following the same schedule.
        patience: early-stopping patience in epochs on the validation loss; the best weights are
            restored at the end. ``None`` disables early stopping.
        loss: ``"mse"`` or ``"mae"``, over observed future values only.
        shuffle: shuffle training windows (the RSA paper's protocol uses a sequential sampler).
        gradient_clip_val: clip gradient norm to this value (None: no clipping).
        precision: passed to Lightning (``"32-true"``, ``"bf16-mixed"`` on GPU, ...).
        deterministic: ask torch for deterministic algorithms.
        seed: seeds Python, NumPy and torch (and the workers) before the model is built.
        num_workers: DataLoader workers.
    """

    max_epochs: int = 6
    batch_size: int = 32
    learning_rate: float = 1e-4
    lr_schedule: str = "halve"
    rsa_lr_multiplier: float = 100.0
    patience: int | None = 3
    loss: str = "mse"
    shuffle: bool = True
    gradient_clip_val: float | None = None
    precision: str = "32-true"
    deterministic: bool = False
    seed: int = 0
    num_workers: int = 0

    def __post_init__(self) -> None:
        for name in ("max_epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not self.rsa_lr_multiplier > 0:
            raise ValueError(f"rsa_lr_multiplier must be > 0, got {self.rsa_lr_multiplier!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {self.patience!r}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
