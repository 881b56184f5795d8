"""How long one training run lasts: its budget in steps or epochs, its validation checks, and the
length of the refit on all the history that follows the run validation picked the budget with.

No torch here: the budget is arithmetic on the number of training windows and the batch size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tsrec.config import TrainingConfig

__all__ = ["BUDGET_EPOCHS", "COSINE_FLOOR", "MAX_STEPS", "MIN_STEPS", "VAL_CHECKS", "Budget", "auto_steps",
           "plan_budget", "refit_budget"]

#: Passes over the training windows of the default step budget, between the bounds below. The field's
#: defaults sit near 5,000 steps whatever the data (neuralforecast's ``max_steps``, GluonTS's 100 epochs
#: of 50 batches); scaling with the windows instead gives a small data set many passes (the best
#: epoch of a 10-epoch budget was its last on small monthly data) and a large one a bounded cost.
BUDGET_EPOCHS = 20
#: The fewest steps of the default budget: enough for Adam to settle on the smallest data sets.
MIN_STEPS = 1_000
#: The most steps of the default budget: about ten passes over ETTm1's windows.
MAX_STEPS = 10_000
#: Validation checks over a step budget (early stopping's patience counts these).
VAL_CHECKS = 20
#: Where the cosine schedule ends, as a share of the starting learning rate.
COSINE_FLOOR = 0.1


@dataclass(frozen=True)
class Budget:
    """One training run's length, as Lightning's ``Trainer`` takes it.

    Attributes:
        max_steps: optimizer steps at most (None: the epoch budget alone).
        max_epochs: epochs at most (None: the step budget alone).
        val_check_steps: validate every this many steps (None: once per epoch).
        schedule_steps: the steps the learning-rate schedule spans (the cosine's length).
        steps_per_epoch: optimizer steps in one pass over the training windows.
    """

    max_steps: int | None
    max_epochs: int | None
    val_check_steps: int | None
    schedule_steps: int
    steps_per_epoch: int

    @property
    def total_steps(self) -> int:
        """The steps the run takes when nothing ends it early."""
        by_epochs = math.inf if self.max_epochs is None else self.max_epochs * self.steps_per_epoch
        by_steps = math.inf if self.max_steps is None else self.max_steps
        return int(min(by_epochs, by_steps))


def steps_per_epoch(n_windows: int, batch_size: int) -> int:
    """Optimizer steps in one pass over ``n_windows`` (the last partial batch is a step)."""
    return max(1, math.ceil(n_windows / batch_size))


def auto_steps(n_windows: int, batch_size: int) -> int:
    """The default step budget: :data:`BUDGET_EPOCHS` passes, within ``[MIN_STEPS, MAX_STEPS]``."""
    return int(min(max(BUDGET_EPOCHS * steps_per_epoch(n_windows, batch_size), MIN_STEPS), MAX_STEPS))


def plan_budget(config: TrainingConfig, n_windows: int) -> Budget:
    """The budget of a run over ``n_windows`` training windows under ``config`` (see
    :class:`~tsrec.config.TrainingConfig`): an epoch budget validated once per epoch when
    ``max_epochs`` is set (:data:`VAL_CHECKS` times when ``max_steps`` ends it inside its first
    epoch), else a step budget (``max_steps``, or :func:`auto_steps`) validated
    :data:`VAL_CHECKS` times."""
    per_epoch = steps_per_epoch(n_windows, config.batch_size)
    if config.max_epochs is not None:
        total = config.max_epochs * per_epoch if config.max_steps is None else min(config.max_steps,
                                                                                   config.max_epochs * per_epoch)
        # a step cap that ends the run inside its first epoch validates as a step budget would
        checks = None if total >= per_epoch else max(1, math.ceil(total / VAL_CHECKS))
        return Budget(config.max_steps, config.max_epochs, checks, total, per_epoch)
    steps = config.max_steps if config.max_steps is not None else auto_steps(n_windows, config.batch_size)
    return Budget(steps, None, max(1, math.ceil(steps / VAL_CHECKS)), steps, per_epoch)


def refit_budget(budget: Budget, *, best_step: int, best_epoch: int, train_windows: int, full_windows: int,
                 batch_size: int) -> Budget:
    """The refit's budget on ``full_windows`` windows after a run over ``train_windows`` picked
    ``best_step`` (1-based steps; ``best_epoch`` 1-based epochs): as many passes over the data as
    the picked run made (the same epochs under an epoch budget; its steps scaled by the ratio of
    windows under a step budget), with the schedule stretched by the same ratio so that the
    learning rate follows the picked run's course. No validation."""
    ratio = full_windows / train_windows
    per_epoch = steps_per_epoch(full_windows, batch_size)
    schedule = max(1, math.ceil(budget.schedule_steps * ratio))
    if budget.max_epochs is not None:
        return Budget(None, best_epoch, None, schedule, per_epoch)
    return Budget(max(1, math.ceil(best_step * ratio)), None, None, schedule, per_epoch)
