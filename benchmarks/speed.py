"""Training speed, prediction latency, FLOPs and peak memory of ``informer`` against ``rsa_informer``
(and of the long-horizon models ``patchtst``, ``rsa_patchtst`` and ``dlinear``), on the CPU or a GPU.

Settings per model (:data:`MODEL_SETTINGS`), batch 32, 7 channels, 4 time features, random inputs:

- ``informer``, ``rsa_informer``: the Informer protocol at full size: horizon 24, label length 48
  at ``L = 48`` (the ETTh1-24 setting), else ``L / 2``; ``d_model`` 512, ``d_ff`` 2048; every ``L``.
- ``patchtst``, ``rsa_patchtst``, ``dlinear``: the long-horizon protocol (inputs 96 to 1440,
  horizon 96) at tsrec's defaults, which are the ones the long-horizon results were trained with
  (PatchTST: patch 16, stride 8, ``d_model`` 16, 4 heads, 3 layers, ``d_ff`` 128); only at ``L >= 96``.

Measured per model, input length ``L`` and compile setting:

- **training step**: ``zero_grad`` + forward + masked MSE + backward + Adam step, with the optimizer
  of ``ForecastingModule.configure_optimizers``, dropout on. Median and quartiles over ``--steps``.
- **prediction**: ``eval()`` + ``no_grad``, for the batch and for its first window alone.
- **precision** (``--precision``): ``32-true`` is float32 throughout; ``bf16-mixed`` runs forward
  and loss under ``torch.autocast(device, bfloat16)`` with float32 weights, gradients and Adam, as
  Lightning's ``bf16-mixed`` does. Whether float32 matmuls may use TF32 (torch's default: not for
  matmuls, yes for cuDNN convolutions) is recorded with every row.
- **compile** (``--compile``): the network's forward through ``torch.compile(dynamic=False)``
  (loss, backward and Adam stay eager, as ``TrainingConfig.compile`` trains). The first call of
  each kind (tracing, compiling, one run) is timed apart and not among the timed calls; its graphs
  and graph breaks are counted. A model whose compilation fails gets a row saying why, and the
  others carry on. ``--compile both`` measures every length eager first, then compiled.
- **FLOPs** of a training step (forward + backward) and of both predictions, counted by
  ``torch.utils.flop_counter.FlopCounterMode`` during each model's first, untimed, uncompiled
  calls (which also warm it up). Only matmuls and attention kernels count: elementwise work does not.
- **matmul throughput**: one ``[n, n] x [n, n]`` product (float32, or bfloat16 operands under
  ``bf16-mixed``; ``n`` = 2048 on the CPU, 8192 on a GPU) timed after every round of calls, so under
  the same load. ``step / bound`` is the median step over ``FLOPs / throughput``.
- **RSA overhead**: each ``rsa_X``'s median step over ``X``'s, at the same length and compile
  setting, where ``X`` was measured (target: at most 10%).
- **peak memory**: on the CPU, peak resident-set growth of the first batch prediction and the first
  training step (which also allocates gradients and Adam's state) of the eager model in a fresh
  process, after a tiny model of the same kind has loaded the kernels (not measured for compiled
  models); on a GPU, in this process after the warm-up calls, the peak of torch's CUDA allocator
  during one call over what was allocated just before it (model, Adam's state, batch, other models).

On a GPU every timed call is bracketed by ``torch.cuda.synchronize()`` and 3 untimed rounds warm
every model up first. The models' calls are interleaved, order alternating each round, so that load
from other processes hits them alike. Rows are written after every length (a run stopped at a time
limit keeps the lengths done): ``speed.csv`` and ``speed.md`` on the CPU, ``gpu_speed.csv`` and
``gpu_speed.md`` on a GPU, the markdown rendered from the rows only. After each length the script
prints its estimate of the time left; with ``--budget-minutes M`` a length whose estimate would
end the run after ``M`` minutes is skipped (its rows say so).

Usage::

    python -m benchmarks.speed [--device auto|cpu|cuda] [--precision 32-true|bf16-mixed] [--compile [on|off|both]]
        [--models informer rsa_informer patchtst rsa_patchtst dlinear] [--lengths 48 336 720 1440]
        [--steps N] [--threads T] [--budget-minutes M] [--out-dir DIR]
    python -m benchmarks.speed --quick [...]       # tiny sizes, same code path, into a temporary directory
    python -m benchmarks.speed --render A.csv [B.csv ...] --out-dir DIR   # redraw (and join) rows

On the GPU machine (offline; tsrec imports GluonTS, whose wheels come in the bundle that
``python -m benchmarks.gpu_bundle`` builds, see benchmarks/README.md; ``.bundle`` travels beside the
working tree), from the repository root, three commands of at most 10 minutes, each a new shell
starting with the set-up line: the GPU path at tiny sizes (about 2 minutes, mostly compiling), then
the table in bf16-mixed, eager and compiled: informer and rsa_informer at the four lengths, then
the long-horizon models (at 336, 720 and 1440)::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .bundle/wheels/*.whl && export PYTHONPATH=/tmp/site:$PWD TSREC_COMMIT=$(cat .bundle/commit) PYTHONUNBUFFERED=1
    python3 -m benchmarks.speed --device cuda --quick --precision bf16-mixed --compile both \
        --models informer rsa_informer dlinear --lengths 96 --out-dir "$OUT/quick"
    python3 -m benchmarks.speed --device cuda --precision bf16-mixed --compile both --budget-minutes 8 --out-dir "$OUT"
    python3 -m benchmarks.speed --device cuda --precision bf16-mixed --compile both --budget-minutes 8 \
        --models patchtst rsa_patchtst dlinear --lengths 336 720 1440 --out-dir "$OUT/long"

Back here, ``python -m benchmarks.speed --render A/gpu_speed.csv B/gpu_speed.csv --out-dir
benchmarks/results`` joins them into one table. Lengths a budget skipped go to a further command
(``--compile on --lengths ...``), joined the same way. A float32 reference (``--precision 32-true
--compile off``, into a folder of its own) is a table of its own: ``--render`` joins rows of one
device and one precision only.

Sizing: FlopCounterMode counts a training step of informer at 91, 507, 1088 and 2239 GFLOP at
L = 48, 336, 720 and 1440, of rsa_informer at 92, 533, 1206 and 2704 (+1%, +5%, +11%, +21%: the
dense REM product grows as L^2), a batch prediction at about a third of that; PatchTST and DLinear
at these settings take under 7 GFLOP. Estimates, not measured here: at float32 without TF32
(an H100's data sheet gives 67 TFLOP/s) the slowest step would take about 0.04 s, at bf16 (the
device tool's notes give about 790 TFLOP/s of bf16 matrix work for its H200 machine) a few ms,
so the eager measurements of every model and length (23 rounds of the three calls) should take
about a minute.
Compilation dominates: it is paid per model, length and kind of call (on this 2-core CPU, 0.5-2
minutes per model and length for informer's tiny ``--quick`` size, whose predictions break into 14
graphs at the ``torch.Generator`` of ProbSparse's sampling in eval mode), which is what
``--budget-minutes`` guards. Its estimate takes a length's compilation as fixed and the rest as
proportional to L, per model, so models that join at a length (the long-horizon ones at 96) are
estimated at the average cost of those before: hence the separate command for them.
"""

from __future__ import annotations

import argparse
import csv
import gc
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import (
    PRECISIONS,
    ROOT,
    command_line,
    git_commit,
    in_fresh_process,
    machine,
    now,
    peak_rss_growth_mib,
    status_kb,
    write_csv,
)
from tsrec.batch import ForecastBatch
from tsrec.config import DataFacts, TrainingConfig
from tsrec.models import build_model, model_config
from tsrec.training import ForecastingModule

DEFAULT_MODELS = ("informer", "rsa_informer")
DEFAULT_LENGTHS = (48, 336, 720, 1440)
QUICK_LENGTHS = (48, 96)
ETTH1_LENGTH = 48  # ETTh1-24: input 48, label 48, horizon 24
MAX_OVERHEAD_PCT = 10.0  # target: RSA overhead per training step
MAX_STEP_OVER_BOUND = 1.2  # target: step time / (FLOPs / matmul throughput)
TIMED = ("step", "predict_batch", "predict_window")  # the Case methods timed every round
COMPILE_VARIANTS = {"off": (False,), "on": (True,), "both": (False, True)}
MATMUL_SIDE = {"cpu": 2048, "cuda": 8192}
QUICK_MATMUL_SIDE = 256
WARMUP_ROUNDS = {"cpu": 0, "cuda": 3}  # untimed rounds after the FLOP-counted (and compiling) first calls
DEFAULT_STEPS = {"cpu": 10, "cuda": 20}
MIB = 2**20
Timings = dict[str, dict[str, list[float]]]
Row = dict[str, Any]


@dataclass(frozen=True)
class Setting:
    """Shapes of a run: ``batch`` windows of ``channels`` series with ``time_features`` calendar features,
    ``horizon`` steps ahead, a network of width ``d_model`` and ``d_ff`` (None: the model's default);
    measured at input lengths from ``min_length`` on."""

    batch: int = 32
    channels: int = 7
    time_features: int = 4
    horizon: int = 24
    d_model: int | None = 512
    d_ff: int | None = 2048
    min_length: int = 1

    def label_length(self, length: int) -> int:
        return length if length == ETTH1_LENGTH else length // 2

    def options(self, name: str, length: int) -> dict[str, int]:
        """``build_model`` options of ``name`` at input ``length``: the widths and the label length
        where the model has such fields and this setting sets them."""
        wanted = {"d_model": self.d_model, "d_ff": self.d_ff, "label_length": self.label_length(length)}
        fields = model_config(name).to_dict()
        return {key: value for key, value in wanted.items() if value is not None and key in fields}

    def quick(self) -> Setting:
        """The same shapes with 4 windows and, where the widths are set, tiny ones."""
        return replace(self, batch=4, d_model=self.d_model and 32, d_ff=self.d_ff and 64)


INFORMER = Setting()
LONG_HORIZON = Setting(horizon=96, d_model=None, d_ff=None, min_length=96)
MODEL_SETTINGS = {"informer": INFORMER, "rsa_informer": INFORMER, "patchtst": LONG_HORIZON,
                  "rsa_patchtst": LONG_HORIZON, "dlinear": LONG_HORIZON}


@dataclass(frozen=True)
class Options:
    """How a run measures: on ``device`` in ``precision``, ``steps`` timed rounds after ``warmup``
    untimed ones, the matmul reference of side ``matmul``."""

    device: torch.device
    precision: str = "32-true"
    steps: int = 10
    warmup: int = 0
    matmul: int = 2048
    threads: int = 1

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"


def random_batch(setting: Setting, length: int) -> ForecastBatch:
    """``past_target [B, L, C]``, ``past_time_feat [B, L, F]``, ``future_time_feat [B, H, F]``,
    ``future_target`` and ``future_observed [B, H, C]`` (all observed)."""
    b, c, f, h = setting.batch, setting.channels, setting.time_features, setting.horizon
    return {"past_target": torch.randn(b, length, c), "past_time_feat": torch.randn(b, length, f),
            "future_time_feat": torch.randn(b, h, f), "future_target": torch.randn(b, h, c),
            "future_observed": torch.ones(b, h, c)}


def autocast(device: torch.device, precision: str) -> AbstractContextManager[Any]:
    """bf16-mixed: ``torch.autocast`` to bfloat16 on ``device``; 32-true: nothing."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")


class Case:
    """One model at one input length on ``device``, with its training optimizer and a random batch;
    its forward runs under ``precision``'s autocast, and through ``torch.compile`` after :meth:`compile`."""

    def __init__(self, name: str, setting: Setting, length: int, device: torch.device | str = "cpu",
                 precision: str = "32-true") -> None:
        torch.manual_seed(0)
        self.name, self.device, self.precision = name, torch.device(device), precision
        data = DataFacts(season=24, sub_daily=True, n_channels=setting.channels,
                         n_time_features=setting.time_features)
        self.model = build_model(name, data=data, context_length=length, prediction_length=setting.horizon,
                                 **setting.options(name, length)).to(self.device)
        configured = ForecastingModule(self.model, TrainingConfig()).configure_optimizers()
        self.optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
        self.batch = {key: value.to(self.device) for key, value in random_batch(setting, length).items()}
        self.window = {key: value[:1] for key, value in self.batch.items()}
        self.forward: Callable[[ForecastBatch], torch.Tensor] = self.model

    def compile(self) -> None:
        """Run the forward compiled from now on (as ``TrainingConfig.compile`` does: the network's
        forward, not the loss or the optimizer); shapes static, one graph per kind of call."""
        self.forward = torch.compile(self.model.forward, dynamic=False)

    def step(self) -> None:
        self.model.train()
        self.optimizer.zero_grad()
        with autocast(self.device, self.precision):
            forecast = self.forward(self.batch)  # [B, H, C]
            loss = self.model.output.loss(forecast, self.batch["future_target"], self.batch["future_observed"], "mse")
        loss.backward()
        self.optimizer.step()

    def predict_batch(self) -> torch.Tensor:
        return self._predict(self.batch)  # [B, H, C]

    def predict_window(self) -> torch.Tensor:
        return self._predict(self.window)  # [1, H, C]

    def _predict(self, batch: ForecastBatch) -> torch.Tensor:
        self.model.eval()
        with torch.no_grad(), autocast(self.device, self.precision):
            return self.forward(batch)


def synchronize(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(run: Callable[[], object], device: torch.device | None = None) -> float:
    """Wall time of ``run()``; on a GPU from an idle device to the end of the work it queued."""
    synchronize(device)
    start = time.perf_counter()
    run()
    synchronize(device)
    return time.perf_counter() - start


class Stepper:
    """One model (registered ``name`` with ``options``) at one input ``length`` of ``setting``, with
    the training optimizer (``ForecastingModule.configure_optimizers``) and a random batch;
    :meth:`step` trains once: ``zero_grad`` + forward + MSE + backward + the optimizer's step."""

    def __init__(self, name: str, options: dict[str, Any], setting: Setting, length: int) -> None:
        torch.manual_seed(0)
        data = DataFacts(season=24, sub_daily=True, n_channels=setting.channels, n_time_features=setting.time_features)
        self.model = build_model(name, data=data, context_length=length, prediction_length=setting.horizon, **options)
        configured = ForecastingModule(self.model, TrainingConfig()).configure_optimizers()
        self.optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
        self.batch = random_batch(setting, length)

    def step(self) -> None:
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.model.output.loss(self.model(self.batch), self.batch["future_target"],
                                      self.batch["future_observed"], "mse")
        loss.backward()
        self.optimizer.step()


class OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched while active (on a GPU each eager one costs the host a
    dispatch, and most launch a kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))


def operators(run: Callable[[], object]) -> int:
    """ATen operators dispatched while ``run()`` runs (views and detaches included)."""
    counter = OpCounter()
    with counter:
        run()
    return counter.count


def flops(run: Callable[[], object]) -> int:
    """FLOPs that ``FlopCounterMode`` counts while ``run()`` runs."""
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return counter.get_total_flops()


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median, third quartile."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def peak_memory(name: str, setting: Setting, length: int, threads: int,
                precision: str = "32-true") -> dict[str, float | None]:
    """Peak RSS growth (MiB) of the first batch prediction and the first training step of ``name`` (on
    the CPU) over the resident size with model, optimizer and batch allocated. Run it in a fresh process."""
    torch.set_num_threads(threads)
    tiny = Case(name, replace(setting, batch=2, d_model=setting.d_model and 16, d_ff=setting.d_ff and 32),
                length, "cpu", precision)
    tiny.step()  # loads lazily initialised kernels and libraries
    tiny.predict_batch()
    del tiny
    case = Case(name, setting, length, "cpu", precision)
    base_kb = status_kb("VmRSS") or 0
    return {"predict_peak_mib": peak_rss_growth_mib(case.predict_batch, base_kb),
            "train_peak_mib": peak_rss_growth_mib(case.step, base_kb)}


def cuda_peak_growth_mib(run: Callable[[], object], device: torch.device) -> float:
    """Peak of torch's CUDA allocator while ``run()`` runs, over what was allocated before it, in MiB."""
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    run()
    synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / MIB


def dynamo_counts() -> tuple[int, Counter[str]]:
    """Graphs compiled by ``torch.compile`` so far in this process, and its graph breaks by reason."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], Counter(counters["graph_break"])


def break_reasons(breaks: Counter[str], shown: int = 2) -> str:
    """The commonest reasons among ``breaks``, each by the first line of dynamo's message and its
    developer context where it gives one."""
    def summary(reason: str) -> str:
        lines = [line.strip() for line in reason.strip().splitlines()]
        context = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Developer debug context:")]
        return lines[0][:120] + (f" ({context[0][:120]})" if context and context[0] else "")

    return "; ".join(f"{count}x {summary(reason)}".replace("|", "/") for reason, count in breaks.most_common(shown))


def prepare_compiler() -> None:
    """Forget earlier graphs, and make a model that would outgrow dynamo's graph cache (and silently
    run eager) fail instead, so that its row says so."""
    import torch._dynamo.config as dynamo

    torch._dynamo.reset()
    for option, value in (("recompile_limit", 64), ("fail_on_recompile_limit_hit", True)):
        if hasattr(dynamo, option):
            setattr(dynamo, option, value)


def describe(error: BaseException) -> str:
    """One line: the exception's type and the first line of its message."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first[:300]}".replace("|", "/")


def prepare(case: Case, compiled: bool, options: Options) -> Row:
    """Count the FLOPs of ``case``'s first (eager) calls; compile it and time the first call of each kind
    (``first_*_s``, with the graphs and breaks they made); warm it up; on a GPU, measure its peak memory."""
    measured: Row = {f"{kind}_flops": flops(getattr(case, kind)) for kind in TIMED}
    measured["step_ops"] = operators(case.step)  # eager, after a first step made Adam's state
    if compiled:
        graphs, breaks = dynamo_counts()
        case.compile()
        measured |= {f"first_{kind}_s": seconds(getattr(case, kind), options.device) for kind in TIMED}
        graphs_after, breaks_after = dynamo_counts()
        new_breaks = breaks_after - breaks
        measured |= {"graphs": graphs_after - graphs, "graph_breaks": new_breaks.total(),
                     "graph_break_reasons": break_reasons(new_breaks)}
    for _ in range(options.warmup):
        for kind in TIMED:
            getattr(case, kind)()
    if options.cuda:
        measured |= {"predict_peak_mib": cuda_peak_growth_mib(case.predict_batch, options.device),
                     "train_peak_mib": cuda_peak_growth_mib(case.step, options.device)}
    return measured


class MatmulReference:
    """An ``[n, n] x [n, n]`` product in the precision's matmul dtype (bfloat16 operands under
    bf16-mixed, float32 otherwise), for the throughput that the step times are compared with."""

    def __init__(self, options: Options) -> None:
        dtype = torch.bfloat16 if options.precision == "bf16-mixed" else torch.float32
        self.side, self.device = options.matmul, options.device
        self.a, self.b = (torch.randn(self.side, self.side, device=self.device, dtype=dtype) for _ in range(2))
        self.product()  # warm-up

    def product(self) -> torch.Tensor:
        return torch.mm(self.a, self.b)

    def gflops(self) -> float:
        return 2 * self.side ** 3 / seconds(self.product, self.device) / 1e9


def time_cases(cases: dict[str, Case], options: Options) -> tuple[Timings, list[float]]:
    """Seconds of ``options.steps`` rounds of every timed call per case (``timings[name][kind]``), and
    the matmul GFLOP/s sampled after every round."""
    reference = MatmulReference(options)
    timings: Timings = {name: {kind: [] for kind in TIMED} for name in cases}
    matmul_gflops = []
    for round_ in range(options.steps):
        for name in (list(cases) if round_ % 2 == 0 else list(cases)[::-1]):
            for kind in TIMED:
                timings[name][kind].append(seconds(getattr(cases[name], kind), options.device))
        matmul_gflops.append(reference.gflops())
    return timings, matmul_gflops


# The columns of a row, in CSV order; a row has them all (None where not measured).
ROW_KEYS = (
    "model", "length", "label", "horizon", "batch", "channels", "time_features", "d_model", "parameters", "steps",
    *(f"{kind}_{stat}_s" for kind in TIMED for stat in ("q1", "median", "q3")),
    "rsa_overhead_pct", "step_ops", "train_gflop", "predict_batch_gflop", "predict_window_gflop", "matmul_gflops",
    "flop_bound_s", "step_over_bound", "predict_peak_mib", "train_peak_mib",
    "device", "precision", "compiled", *(f"first_{kind}_s" for kind in TIMED), "graphs", "graph_breaks",
    "graph_break_reasons", "error",
    "allow_tf32", "float32_matmul_precision", "cudnn_allow_tf32",
)
INT_KEYS = {"length", "label", "horizon", "batch", "channels", "time_features", "d_model", "parameters", "steps", "step_ops",
            "threads", "graphs", "graph_breaks"}
BOOL_KEYS = {"compiled", "allow_tf32", "cudnn_allow_tf32"}
TEXT_KEYS = {"model", "device", "precision", "graph_break_reasons", "error", "float32_matmul_precision", "commit",
             "machine", "date", "command"}
# What rows written before these columns existed were measured with (CPU, float32, eager).
OLD_ROW_DEFAULTS = {"device": "cpu", "precision": "32-true", "compiled": False, "graph_break_reasons": "",
                    "error": ""}


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def blank_row(name: str, setting: Setting, length: int, options: Options, compiled: bool) -> Row:
    """A row of ``name`` at ``length`` with its setting and the run's device and precision, nothing measured."""
    label = setting.options(name, length).get("label_length")
    return {**dict.fromkeys(ROW_KEYS), "model": name, "length": length, "label": label, "horizon": setting.horizon,
            "batch": setting.batch, "channels": setting.channels, "time_features": setting.time_features,
            "d_model": model_config(name, **setting.options(name, length)).to_dict().get("d_model"),
            "steps": options.steps, "device": device_name(options.device), "precision": options.precision,
            "compiled": compiled, "graph_break_reasons": "", "error": "", "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}


def measured_row(row: Row, case: Case, measured: Row, timings: dict[str, list[float]], throughput: float) -> Row:
    """``row`` with the times, FLOPs, throughput reference and memory of its case."""
    train_flops = measured["step_flops"]
    spreads = {f"{kind}_{stat}_s": value for kind in TIMED
               for stat, value in zip(("q1", "median", "q3"), quartiles(timings[kind]))}
    step = spreads["step_median_s"]
    return {**row, **spreads, **{key: value for key, value in measured.items() if key in row},
            "parameters": sum(p.numel() for p in case.model.parameters()),
            "train_gflop": train_flops / 1e9, "predict_batch_gflop": measured["predict_batch_flops"] / 1e9,
            "predict_window_gflop": measured["predict_window_flops"] / 1e9, "matmul_gflops": throughput / 1e9,
            "flop_bound_s": train_flops / throughput, "step_over_bound": step * throughput / train_flops}


def add_overheads(rows: list[Row]) -> None:
    """``rsa_overhead_pct`` of every measured ``rsa_X`` row: its median step over that of ``X``'s row
    at the same length and compile setting, where ``X`` was measured."""
    steps = {(r["model"], r["length"], r["compiled"]): r["step_median_s"] for r in rows if not r["error"]}
    for row in rows:
        base = steps.get((row["model"].removeprefix("rsa_"), row["length"], row["compiled"]))
        if row["model"].startswith("rsa_") and not row["error"] and base:
            row["rsa_overhead_pct"] = 100 * (row["step_median_s"] / base - 1)


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def measure_length(settings: dict[str, Setting], length: int, options: Options, compiled: bool = False) -> list[Row]:
    """One row per model at ``length``: times, FLOPs, throughput reference, overhead and peak memory, or
    what went wrong where a model could not be built, compiled or run."""
    rows = {name: blank_row(name, setting, length, options, compiled) for name, setting in settings.items()}
    if compiled:
        prepare_compiler()
    cases, measured, case = {}, {}, None
    for name, setting in settings.items():
        try:
            if not (compiled or options.cuda):  # the CPU's peak memory: the eager model in a fresh process
                rows[name] |= in_fresh_process(peak_memory, name, setting, length, options.threads, options.precision)
            case = Case(name, setting, length, options.device, options.precision)
            measured[name] = prepare(case, compiled, options)
            cases[name] = case
        except Exception as error:  # noqa: BLE001 - reported in the row; the other models carry on
            rows[name]["error"] = describe(error)
            print(f"L={length} {_label(rows[name])}: {rows[name]['error']}", file=sys.stderr, flush=True)
            case = None
            free_memory(options.device)
    if cases:
        timings, matmul_gflops = time_cases(cases, options)
        throughput = statistics.median(matmul_gflops) * 1e9  # FLOP/s
        for name, case in cases.items():
            rows[name] = measured_row(rows[name], case, measured[name], timings[name], throughput)
    del cases, case
    free_memory(options.device)
    add_overheads(list(rows.values()))
    return list(rows.values())


def skipped_rows(settings: dict[str, Setting], length: int, options: Options, compiled: bool, why: str) -> list[Row]:
    return [{**blank_row(name, setting, length, options, compiled), "error": why} for name, setting in settings.items()]


# ---------------------------------------------------------------------------------------------- budget
@dataclass(frozen=True)
class Done:
    """A length measured: its ``seconds`` for ``models`` models, ``fixed`` of them compiling."""

    length: int
    models: int
    seconds: float
    fixed: float


def projected_seconds(done: list[Done], length: int, models: int) -> float | None:
    """Time of ``models`` models at ``length``, from the last length done: per model, the fixed part
    (compilation) as it was and the rest in proportion to the length; None before any length."""
    if not done:
        return None
    last = done[-1]
    return (last.fixed + (last.seconds - last.fixed) * length / last.length) * models / last.models


def compile_seconds(rows: list[Row]) -> float:
    return sum(r[f"first_{kind}_s"] or 0.0 for r in rows for kind in TIMED)


# ---------------------------------------------------------------------------------------------- rows on disk
def output_stem(device: str) -> str:
    """``speed`` for rows measured on the CPU, ``gpu_speed`` for rows from a GPU (``device`` as rows name it)."""
    return "speed" if device == "cpu" else "gpu_speed"


def parse_value(key: str, text: str) -> Any:
    if key in TEXT_KEYS:
        return text
    if text == "":
        return None
    if key in BOOL_KEYS:
        return text == "True"
    return int(text) if key in INT_KEYS else float(text)


def read_rows(path: Path) -> list[Row]:
    """The rows of a speed CSV with their types; columns that older CSVs lack take the values those runs
    had (:data:`OLD_ROW_DEFAULTS`: CPU, float32, eager) or None."""
    with Path(path).open(newline="") as fh:
        rows = [{key: parse_value(key, text) for key, text in raw.items()} for raw in csv.DictReader(fh)]
    return [{**dict.fromkeys(ROW_KEYS), **OLD_ROW_DEFAULTS, **row} for row in rows]


def write_results(out_dir: Path, rows: list[Row]) -> tuple[Path, Path]:
    """``<stem>.csv`` and ``<stem>.md`` of ``rows`` under ``out_dir``, the stem by the rows' device."""
    stem = output_stem(rows[0]["device"])
    paths = out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    write_csv(paths[0], rows)
    paths[1].write_text(render(rows))
    return paths


# ---------------------------------------------------------------------------------------------- markdown
def _cell(value: float | None, template: str) -> str:
    return "-" if value is None else template.format(value)


def _decimals(values: Iterable[float | None], digits: int) -> int:
    """Decimals that show the smallest of ``values`` with ``digits`` significant digits (0 to 4)."""
    positive = [abs(v) for v in values if v]
    return 0 if not positive else min(4, max(0, digits - 1 - math.floor(math.log10(min(positive)))))


def _spread(row: Row, key: str, scale: float, decimals: int) -> str:
    """``median (q1-q3)`` of ``key`` in ``row``, times ``scale``."""
    return "{} ({}-{})".format(*(f"{row[f'{key}_{stat}_s'] * scale:.{decimals}f}" for stat in ("median", "q1", "q3")))


def _label(row: Row) -> str:
    return row["model"] + (" (compiled)" if row.get("compiled") else "")


def _distinct(rows: list[Row], key: str) -> str:
    return "; ".join(str(value) for value in dict.fromkeys(r[key] for r in rows))


def targets(rows: list[Row]) -> list[tuple[str, str, int, str, bool]]:
    """``(target, model, L, measured, met)`` for every target the rows measure."""
    overhead = f"RSA overhead per training step <= {MAX_OVERHEAD_PCT:g}%"
    bound = f"training step <= {MAX_STEP_OVER_BOUND:g}x FLOPs / matmul throughput"
    rows = [r for r in rows if not r.get("error")]
    return ([(overhead, _label(r), r["length"], f"{r['rsa_overhead_pct']:+.1f}%",
              r["rsa_overhead_pct"] <= MAX_OVERHEAD_PCT) for r in rows if r["rsa_overhead_pct"] is not None]
            + [(bound, _label(r), r["length"], f"{r['step_over_bound']:.2f}x",
                r["step_over_bound"] <= MAX_STEP_OVER_BOUND) for r in rows])


def describe_precision(row: Row) -> str:
    """The row's precision; on a GPU also whether its float32 matmuls and convolutions may use TF32."""
    mixed = ("bf16-mixed: forward and loss under autocast to bfloat16, float32 weights, gradients and Adam; "
             "matmul reference in bfloat16" if row["precision"] == "bf16-mixed" else
             "float32 (32-true); matmul reference in float32")
    if row["device"] == "cpu" or row["allow_tf32"] is None:
        return mixed
    return (f"{mixed}; float32 matmuls: `allow_tf32={row['allow_tf32']}`, `float32_matmul_precision="
            f"'{row['float32_matmul_precision']}'`, cuDNN `allow_tf32={row['cudnn_allow_tf32']}`")


def describe_settings(rows: list[Row]) -> str:
    groups: dict[str, list[str]] = {}
    for r in rows:
        width = "" if r["d_model"] is None else f", d_model {r['d_model']}"
        shape = (f"batch {r['batch']}, {r['channels']} channels, {r['time_features']} time features, "
                 f"horizon {r['horizon']}{width}")
        groups.setdefault(shape, [])
        if r["model"] not in groups[shape]:
            groups[shape].append(r["model"])
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{', '.join(models)}: {shape}" for shape, models in groups.items())


def memory_note(cuda: bool, call: str) -> str:
    if cuda:
        return (f"Peak: torch's CUDA allocator during one {call} after the warm-up, over what was allocated before "
                "it (model, Adam's state, batch, the other models).")
    first = "first step in a fresh process (activations, gradients and Adam's state)" if call == "step" else \
        "first batch prediction in a fresh process"
    return f"Peak: resident-set growth of the {first}; not measured for compiled models."


class Columns:
    """Units and decimals of the tables' columns, from the rows they show: steps in seconds, or in
    milliseconds when every median step is under a second; each column with the decimals that give its
    smallest value 3 significant digits (2 for a window's GFLOP and for memory)."""

    def __init__(self, good: list[Row]) -> None:
        slow = min((r["step_median_s"] for r in good), default=1.0) >= 1
        self.step_unit, self.step_scale = ("s", 1.0) if slow else ("ms", 1e3)
        scaled = {"step": ("step_median_s", self.step_scale), "bound": ("flop_bound_s", self.step_scale),
                  "predict_batch": ("predict_batch_median_s", 1e3), "predict_window": ("predict_window_median_s", 1e3)}
        digits = {"train_gflop": 2, "predict_batch_gflop": 2, "predict_window_gflop": 1, "matmul_gflops": 2,
                  "train_peak_mib": 1, "predict_peak_mib": 1}
        self.places = {name: _decimals((r[key] * scale for r in good), 3) for name, (key, scale) in scaled.items()}
        self.places |= {key: _decimals((r[key] for r in good), extra + 1) for key, extra in digits.items()}

    def fixed(self, value: float | None, key: str, scale: float = 1.0) -> str:
        return "-" if value is None else f"{value * scale:.{self.places[key]}f}"

    def spread(self, row: Row, kind: str, scale: float, key: str) -> str:
        return _spread(row, kind, scale, self.places[key])


def training_lines(good: list[Row], columns: Columns, matmul: str, cuda: bool) -> list[str]:
    c, unit = columns, columns.step_unit
    return [
        "## Training step", "",
        ("Step: `zero_grad` + forward + masked MSE + backward + Adam, median (quartiles) over the timed steps, the "
         "models interleaved. RSA overhead: each rsa_X's median step over X's (same L, both compiled or both not). "
         "Ops: ATen operators one eager step dispatches (`TorchDispatchMode`; views included), each a host dispatch "
         "and most a kernel launch on a GPU. GFLOP: counted by `FlopCounterMode` (matmuls and attention only). "
         "Matmul: median "
         f"{matmul} square-matmul throughput sampled between the steps. Bound: GFLOP / matmul throughput. "
         + memory_note(cuda, "step")), "",
        (f"| model | L | label | parameters | steps | step {unit} | RSA overhead | ops | GFLOP | matmul GFLOP/s | "
         f"bound {unit} | step / bound | peak MiB |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {_label(r)} | {r['length']} | {_cell(r['label'], '{}')} | {r['parameters']:,} | {r['steps']} | "
          f"{c.spread(r, 'step', c.step_scale, 'step')} | {_cell(r['rsa_overhead_pct'], '{:+.1f}%')} | "
          f"{_cell(r.get('step_ops'), '{:,}')} | {c.fixed(r['train_gflop'], 'train_gflop')} | {c.fixed(r['matmul_gflops'], 'matmul_gflops')} | "
          f"{c.fixed(r['flop_bound_s'], 'bound', c.step_scale)} | {r['step_over_bound']:.2f}x | "
          f"{c.fixed(r['train_peak_mib'], 'train_peak_mib')} |" for r in good),
    ]


def prediction_lines(good: list[Row], columns: Columns, cuda: bool) -> list[str]:
    c = columns
    return [
        "## Prediction", "",
        ("`eval()` + `no_grad`, median (quartiles) in milliseconds, for the batch and for its first window. GFLOP: "
         "counted by `FlopCounterMode`. " + memory_note(cuda, "batch prediction")), "",
        "| model | L | batch ms | 1 window ms | batch GFLOP | 1 window GFLOP | peak MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {_label(r)} | {r['length']} | {c.spread(r, 'predict_batch', 1e3, 'predict_batch')} | "
          f"{c.spread(r, 'predict_window', 1e3, 'predict_window')} | "
          f"{c.fixed(r['predict_batch_gflop'], 'predict_batch_gflop')} | "
          f"{c.fixed(r['predict_window_gflop'], 'predict_window_gflop')} | "
          f"{c.fixed(r['predict_peak_mib'], 'predict_peak_mib')} |" for r in good),
    ]


def compilation_lines(compiled: list[Row]) -> list[str]:
    return [
        "## Compilation", "",
        ("The first call of each kind through `torch.compile(dynamic=False)`: tracing, compiling and one run, in "
         "seconds; not among the timed calls. Graphs and graph breaks: dynamo's counts during those calls, with "
         "the commonest reasons. A model compiled after another one at the same length reuses the graphs of the "
         "code they share, so its counts and times are those of what was new."), "",
        "| model | L | first step s | first batch prediction s | first window prediction s | graphs | breaks | reasons |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        *(f"| {r['model']} | {r['length']} | "
          + " | ".join(_cell(r[f"first_{kind}_s"], "{:.1f}") for kind in TIMED)
          + f" | {_cell(r['graphs'], '{}')} | {_cell(r['graph_breaks'], '{}')} | {r['graph_break_reasons'] or '-'} |"
          for r in compiled),
    ]


def render(rows: list[Row]) -> str:
    """Markdown of the rows of one run (or of several joined): its command, commit, machine, date and
    threads, device and precision, then the tables. Rows with an ``error`` are listed, not tabled."""
    run = rows[0]
    good = [r for r in rows if not r["error"]]
    cuda = run["device"] != "cpu"
    models = list(dict.fromkeys(r["model"] for r in rows))
    lengths = ", ".join(str(length) for length in dict.fromkeys(r["length"] for r in rows))
    matmul = "bfloat16" if run["precision"] == "bf16-mixed" else "fp32"
    columns = Columns(good)
    lines = [
        "# Training speed, prediction latency and memory: " + " vs ".join(models), "",
        f"- command: `{_distinct(rows, 'command')}`", f"- commit: `{_distinct(rows, 'commit')}`",
        f"- machine: {_distinct(rows, 'machine')}", f"- date: {_distinct(rows, 'date')}",
        f"- torch threads: {_distinct(rows, 'threads')}", f"- input lengths L: {lengths}",
        f"- setting: {describe_settings(rows)}, random inputs",
        f"- device: {_distinct(rows, 'device')}; precision: {describe_precision(run)}", "",
        *training_lines(good, columns, matmul, cuda), "", *prediction_lines(good, columns, cuda),
    ]
    compiled = [r for r in good if r["compiled"]]
    if compiled:
        lines += ["", *compilation_lines(compiled)]
    failed = [r for r in rows if r["error"]]
    if failed:
        lines += ["", "## Not measured", "", "| model | L | why |", "|---|---:|---|",
                  *(f"| {_label(r)} | {r['length']} | {r['error']} |" for r in failed)]
    lines += ["", "## Targets", "", "| target | model | L | measured | |", "|---|---|---:|---:|---|",
              *(f"| {target} | {model} | {length} | {measured} | {'met' if met else 'missed'} |"
                for target, model, length, measured, met in targets(rows))]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- command line
def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where to measure (default auto: cuda when available)")
    parser.add_argument("--precision", choices=PRECISIONS, default=PRECISIONS[0],
                        help="32-true (float32) or bf16-mixed (autocast to bfloat16 around forward and loss)")
    parser.add_argument("--compile", nargs="?", const="on", default="off", choices=tuple(COMPILE_VARIANTS),
                        help="time the forward through torch.compile: 'on' (the bare flag), 'off' (default) or "
                             "'both' (each model eager and compiled)")
    parser.add_argument("--models", nargs="+", choices=tuple(MODEL_SETTINGS),
                        help=f"models (default {' '.join(DEFAULT_MODELS)}); rsa_X's overhead is against X")
    parser.add_argument("--lengths", type=int, nargs="+",
                        help=f"input lengths (default {' '.join(map(str, DEFAULT_LENGTHS))})")
    parser.add_argument("--steps", type=int, help="timed steps and predictions per model and length (default "
                                                  + ", ".join(f"{n} on {d}" for d, n in DEFAULT_STEPS.items()) + ")")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--budget-minutes", type=float,
                        help="skip a length whose estimated time would end the run after this many minutes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 3 steps: a smoke test, not a result")
    parser.add_argument("--out-dir", type=Path, help="where the CSV and markdown go (default benchmarks/results; "
                                                     "a temporary directory with --quick)")
    parser.add_argument("--render", type=Path, nargs="+", metavar="CSV",
                        help="measure nothing: join the rows of these speed CSVs and write them and their table")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        parser.error("--steps needs at least 2 (for quartiles)")
    return args


def resolve_device(choice: str) -> torch.device:
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    return torch.device(choice)


def run_lengths(settings: dict[str, Setting], lengths: list[int], options: Options, variants: tuple[bool, ...],
                budget_s: float | None, save: Callable[[list[Row]], None],
                clock: Callable[[], float] = time.perf_counter) -> list[Row]:
    """Every compile variant at every length (each model from its ``min_length`` on), saving the rows
    after each length; prints the time each took and the estimate for the rest."""
    rows: list[Row] = []
    start = clock()

    def at(length: int) -> dict[str, Setting]:
        return {name: setting for name, setting in settings.items() if length >= setting.min_length}

    for compiled in variants:
        variant = "compiled" if compiled else "eager"
        done: list[Done] = []
        for index, length in enumerate(lengths):
            models = at(length)
            if not models:
                continue
            estimate = projected_seconds(done, length, len(models))
            elapsed = clock() - start
            if budget_s is not None and estimate is not None and elapsed + estimate > budget_s:
                why = f"skipped: about {estimate:.0f} s more would pass the {budget_s / 60:g}-minute budget"
                print(f"L={length} {variant}: {why}", flush=True)
                rows += skipped_rows(models, length, options, compiled, why)
                save(rows)
                continue
            began = clock()
            group = measure_length(models, length, options, compiled)
            took = clock() - began
            done.append(Done(length, len(models), took, compile_seconds(group)))
            rows += group
            save(rows)
            times = ", ".join(f"{_label(r)} {r['step_median_s'] * 1e3:.1f} ms/step" + (
                f" ({r['rsa_overhead_pct']:+.1f}%)" if r["rsa_overhead_pct"] is not None else "")
                for r in group if not r["error"])
            rest = [projected_seconds(done, later, len(at(later))) or 0.0 for later in lengths[index + 1:]]
            estimate_text = f"; estimate for the {variant} lengths left: {sum(rest) / 60:.1f} min" if rest else ""
            print(f"L={length} {variant}: {times}; took {took:.0f} s{estimate_text}", flush=True)
    print(f"measured in {(clock() - start) / 60:.1f} min", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.render:
        rows = [row for path in args.render for row in read_rows(path)]
        if len({(row["device"], row["precision"]) for row in rows}) > 1:
            raise SystemExit("--render: these rows come from more than one device or precision; one table each")
        paths = write_results(args.out_dir or args.render[0].parent, rows)
        print(f"wrote {paths[0]} and {paths[1]}")
        return 0
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = {name: MODEL_SETTINGS[name].quick() if args.quick else MODEL_SETTINGS[name]
                for name in args.models or DEFAULT_MODELS}
    lengths = sorted(set(args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)))
    options = Options(device=device, precision=args.precision,
                      steps=args.steps or (3 if args.quick else DEFAULT_STEPS[device.type]),
                      warmup=WARMUP_ROUNDS[device.type], threads=torch.get_num_threads(),
                      matmul=QUICK_MATMUL_SIDE if args.quick else MATMUL_SIDE[device.type])
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="tsrec-speed-")) if args.quick
                               else ROOT / "benchmarks" / "results")
    provenance = {"threads": torch.get_num_threads(), "commit": git_commit(), "machine": machine(), "date": now(),
                  "command": command_line("benchmarks.speed", argv)}
    paths: list[Path] = []

    def save(rows: list[Row]) -> None:
        paths[:] = write_results(out_dir, [{**row, **provenance} for row in rows])

    budget_s = None if args.budget_minutes is None else 60 * args.budget_minutes
    print(f"{device_name(device)}, {options.precision}, compile {args.compile}: {', '.join(settings)} at L = "
          f"{', '.join(map(str, lengths))}, {options.steps} steps; rows go to {out_dir}", flush=True)
    run_lengths(settings, lengths, options, COMPILE_VARIANTS[args.compile], budget_s, save)
    print(f"wrote {paths[0]} and {paths[1]}" if paths else "nothing measured: no model at these lengths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
