"""``auto``'s networks by successive halving within a CPU budget (:func:`fit_networks`): every
network trains for the first rung's share of its step budget (:data:`RUNGS`), is scored on the
validation windows, and goes on to the next rung only among the better half of those still
training and within :data:`~tsrec.validation.HALVING_FACTOR` of the leader (which may be a
statistical model); a rung continues the run of the one before from its checkpoint. The first rung
spends :func:`network_budget`; a network within reach of the leader is never stopped for that
budget alone. Only on data of at least :data:`MIN_NETWORK_WINDOWS` training windows
(:func:`network_windows`)."""

from __future__ import annotations

import math
import tempfile
import time
from typing import Any

import numpy as np

from tsrec.candidates import Candidates, Clock, Row, join_note, progress, progress_line
from tsrec.fitted import FittedState
from tsrec.models.registry import model_spec
from tsrec.models.stats import StatsConfig
from tsrec.training.budget import plan_budget
from tsrec.validation import HALVING_FACTOR, Scores

__all__ = ["BUDGET_SECONDS", "BUDGET_SECONDS_PER_OBSERVATION", "MAX_BUDGET_SECONDS", "MIN_NETWORK_WINDOWS", "RUNGS",
           "STATS_COST_RATIO", "fit_networks", "network_budget", "network_windows"]

#: Training windows (before the validation windows, at a context of twice the horizon) the data
#: must hold for the networks to be tried: fewer, and the statistical models are the better bet
#: (the issue-36 sets: the networks lost 4x on 4 quarterly series of 101 steps, won on 145 monthly
#: series of 285).
MIN_NETWORK_WINDOWS = 1_000
#: Successive halving's rungs: the shares of a network's step budget it has trained for when it is
#: scored (each rung continues the run of the one before).
RUNGS = (1 / 9, 1 / 3, 1.0)
#: The networks' training budget in CPU seconds: this many, plus :data:`BUDGET_SECONDS_PER_OBSERVATION`
#: per observed value, at most :data:`MAX_BUDGET_SECONDS`, and at most :data:`STATS_COST_RATIO` times
#: what the statistical candidates cost (:func:`network_budget`): the issue-36 targets, a default fit
#: of 10,000 observations in 60 CPU-s and within 5x statsforecast's AutoETS + AutoCES + AutoTheta.
BUDGET_SECONDS = 10.0
BUDGET_SECONDS_PER_OBSERVATION = 1e-3
MAX_BUDGET_SECONDS = 1_800.0
STATS_COST_RATIO = 3.0


def network_budget(observations: int, time_limit: float | None = None, stats_seconds: float | None = None) -> float:
    """CPU seconds of network training in all for data of ``observations`` observed values: the
    ``time_limit`` where set (what the fit has left of the user's); else :data:`BUDGET_SECONDS` +
    :data:`BUDGET_SECONDS_PER_OBSERVATION` per value, at most :data:`MAX_BUDGET_SECONDS`, and at
    most :data:`STATS_COST_RATIO` times ``stats_seconds``, the CPU seconds the statsforecast
    candidates cost (None: no such bound, as without statsforecast, where the last value and seasonal
    naive cost almost nothing and 3x nothing gave the networks one step)."""
    if time_limit is not None:
        return float(time_limit)
    bounds = [MAX_BUDGET_SECONDS, BUDGET_SECONDS + BUDGET_SECONDS_PER_OBSERVATION * observations]
    bounds += [] if stats_seconds is None else [STATS_COST_RATIO * stats_seconds]
    return min(bounds)


def network_windows(lengths: np.ndarray, channels: int, horizon: int, windows: int) -> int:
    """Training windows of single series (a wide frame's ``channels`` count one each, as the
    channel-independent networks read them) before ``windows`` validation windows, at a context of
    ``2 * horizon``."""
    return channels * int(np.maximum(0, lengths - windows * horizon - 3 * horizon + 1).sum())


def fit_networks(networks: list[str], rows: dict[str, Row], validated: dict[str, FittedState], scores: Scores,
                 candidates: Candidates, *, lengths: np.ndarray, channels: int, windows: int,
                 observations: int, spent_before: float) -> None:
    """Successive halving of the ``networks`` on the history before the validation windows (see
    the module); fills their ``rows`` and, for those scored, ``validated`` (their fitted states).
    ``spent_before``: the CPU seconds the fit spent before them (the statistical candidates), which
    the user's ``time_limit``, a cap on the whole fit, no longer holds for them.

    The budget is CPU seconds of this process. Each (network, rung) run may spend the share of what
    is left that its steps are of the steps still planned (the rest of this rung, and the later
    rungs for the networks halving would keep), so that the first networks cannot spend the
    others' rung 1; what a run leaves unspent goes to the runs after it. The first rung spends
    :func:`network_budget`; a network that halving keeps (within :data:`~tsrec.validation.HALVING_FACTOR` of the
    leader, or ahead of it) is never stopped for that budget alone: its later rungs may spend up to
    what is left of the user's ``time_limit``, else :data:`MAX_BUDGET_SECONDS` in all, and its note says so."""
    settings = candidates.settings
    horizon = settings.window.prediction_length
    available = network_windows(lengths, channels, horizon, windows)
    if available < MIN_NETWORK_WINDOWS:
        for name in networks:
            rows[name].note = (f"skipped: {available} training windows < {MIN_NETWORK_WINDOWS} (networks are tried "
                               "only on data with at least that many)")
            progress(progress_line(rows[name]))
        return
    fitted = [row for row in rows.values() if row.model not in networks and not math.isnan(row.val_score)
              and issubclass(model_spec(row.model).model_class.config_class, StatsConfig)]  # statsforecast's
    stats = sum(row.cpu_seconds for row in fitted) if fitted else None
    training = settings.training
    remaining = None if training.time_limit is None else training.time_limit - spent_before  # of the user's cap
    if remaining is not None and remaining <= 0:
        for name in networks:
            rows[name].note = (f"skipped: the fit had spent its time_limit of {training.time_limit:g} CPU-s on the "
                               f"statistical candidates ({spent_before:.1f})")
            progress(progress_line(rows[name]))
        return
    budget = network_budget(observations, remaining, stats)
    cap = budget if remaining is not None else MAX_BUDGET_SECONDS  # the later rungs' (see above)
    # the whole run's steps; an epoch budget becomes the step budget of as many passes, validated as one
    # (a rung may end inside an epoch)
    steps = plan_budget(training, available).total_steps
    targets = [max(1, math.ceil(share * steps)) for share in RUNGS]  # [R] steps trained by the end of each rung
    deltas = np.diff([0, *targets])  # [R]
    started = time.process_time()
    alive = list(networks)
    callbacks = list(settings.trainer.trainer_kwargs.get("callbacks", []))
    with tempfile.TemporaryDirectory(prefix="tsrec-auto-") as folder:
        for rung in range(len(RUNGS)):
            order = list(alive)
            for position, name in enumerate(order):
                spent = time.process_time() - started
                left = (budget if rung == 0 else cap) - spent
                if left <= 0:
                    rows[name].note = join_note(rows[name].note, f"stopped before rung {rung + 1}: the networks' "
                                                f"budget of {budget if rung == 0 else cap:.0f} CPU-s was spent")
                    alive.remove(name)
                    continue
                beyond = f" (past the networks' budget of {budget:.0f} CPU-s: within reach of the leader)" \
                    if spent >= budget else ""
                planned = _planned_steps(deltas, rung, len(order) - position, len(order))
                limit = _CpuLimit.of(left * deltas[rung] / planned)
                # the rung's end; the settings' max_steps is the whole run's (its schedule's length)
                run = {"callbacks": [*callbacks, limit], "max_steps": targets[rung]}
                clock = Clock()
                try:
                    fit, rows[name].val_score = candidates.fit_and_score(
                        name, scores, resume=rung > 0, max_steps=steps, max_epochs=None, refit_full=False,
                        output_dir=f"{folder}/{name}",
                        trainer_kwargs={**settings.trainer.trainer_kwargs, **run})
                    validated[name] = fit.state
                    summary = fit.state.summary.budget
                    why = ", the budget's share ran out" if limit.fired else \
                        "" if summary["stopped_by"] == "budget" else f", {summary['stopped_by']}"
                    rows[name].note = f"rung {rung + 1}: {summary['steps_run']} steps{why}{beyond}"
                    if summary["stopped_by"] != "budget":  # early stopping ended its run: no later rung
                        alive.remove(name)
                except (ValueError, RuntimeError) as err:
                    rows[name].note = f"failed at rung {rung + 1}: {err}"
                    scores.drop(name)
                    validated.pop(name, None)
                    alive.remove(name)
                clock.add_to(rows[name])
                progress(progress_line(rows[name]))
            if rung + 1 < len(RUNGS):
                alive = _halve(alive, rows, rung)


def _planned_steps(deltas: np.ndarray, rung: int, waiting: int, alive: int) -> float:
    """The steps still planned when ``waiting`` of the ``alive`` networks have rung ``rung`` to
    train (``deltas`` ``[R]`` steps per rung): theirs, and the later rungs' for the networks that
    halving would keep (half, rounded up, at each rung)."""
    total, survivors = float(waiting * deltas[rung]), alive
    for later in range(rung + 1, len(deltas)):
        survivors = math.ceil(survivors / 2)
        total += survivors * deltas[later]
    return total


class _CpuLimit:
    """A Lightning callback (built by :meth:`of`) that ends the run once this process has spent
    ``seconds`` of CPU time from its creation, as a step budget would end it (the step reached
    becomes the run's last), so that a later rung resumes it from there."""

    @staticmethod
    def of(seconds: float) -> Any:
        import lightning.pytorch as pl

        class CpuLimit(pl.Callback):
            def __init__(self) -> None:
                self.deadline, self.fired = time.process_time() + seconds, False

            def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
                if time.process_time() >= self.deadline:
                    trainer.fit_loop.epoch_loop.max_steps, self.fired = trainer.global_step, True

        return CpuLimit()


def _halve(alive: list[str], rows: dict[str, Row], rung: int) -> list[str]:
    """The networks that go on after ``rung``: the better half of ``alive``, those within
    :data:`~tsrec.validation.HALVING_FACTOR` of the leader's validation score (the best of every candidate scored);
    the others' notes say why they stopped."""
    scored = {name: row.val_score for name, row in rows.items() if not math.isnan(row.val_score)}
    if not scored:
        return alive
    leader = min(scored, key=scored.get)
    ranked = sorted(alive, key=lambda name: scored.get(name, math.inf))
    keep = ranked[:math.ceil(len(ranked) / 2)]
    survivors = []
    for name in ranked:
        ratio = scored.get(name, math.inf) / scored[leader] if scored[leader] > 0 else math.inf
        if name in keep and ratio <= HALVING_FACTOR:
            survivors.append(name)
        elif name != leader:
            why = f"{ratio:.2g}x the leader ({leader})" if ratio > HALVING_FACTOR else \
                "in the worse half of the networks"
            rows[name].note = join_note(rows[name].note, f"stopped at rung {rung + 1}: {why}")
    return survivors
