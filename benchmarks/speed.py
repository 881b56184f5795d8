"""Training speed, prediction latency and peak memory of ``informer`` against ``rsa_informer``.

For each input length ``L`` (the ETTh1-24 setting is ``L = 48`` with label 48; longer inputs use
label ``L / 2``; horizon 24 throughout), batch 32, 7 channels, 4 time features, ``d_model`` 512
and the models' other defaults, on the CPU in float32:

- **training step**: ``zero_grad`` + forward + masked MSE loss (``tsrec.training.module.masked_loss``)
  + backward + Adam step, with the optimizer of ``ForecastingModule.configure_optimizers`` (REM
  scalars and gates in their own group), on random inputs of the right shapes, dropout on (train
  mode). Median and spread over the timed steps.
- **FLOPs** of one training step (forward + backward; the Adam step has no matmuls) and of one
  prediction, counted by ``torch.utils.flop_counter.FlopCounterMode`` on the ``meta`` device (shapes
  only, no compute; equal to the count on real tensors, which the first step of every timed case
  checks). The counter sees matmuls, convolutions and attention kernels only: elementwise work
  (GELU, LayerNorm, softmax, dropout, Adam), gathers/scatters and FFTs cost time but no counted FLOPs.
- **matmul throughput**: fp32 ``torch.mm`` of ``[2048, 2048] x [2048, 2048]`` and of the model-like
  ``[32*72, 512] x [512, 2048]``, timed in the same worker processes between the training steps
  (so under the same load); the larger of the two medians is the reference. A step's *ideal time*
  is its FLOPs divided by that throughput; ``ratio = step time / ideal time`` (target <= 1.2).
- **prediction latency**: ``eval()`` + ``no_grad``, a batch of 32 windows and a single window.
- **peak memory**: each model runs in its own fresh worker process; peak resident set growth
  (``VmHWM`` after a reset through ``/proc/self/clear_refs``, else ``ru_maxrss``) over the resident
  size once the model, optimizer and inputs exist, during the first prediction (batch 32) and
  the first (cold) training step (which also allocates gradients and Adam's state). ``tracemalloc``
  does not see torch's CPU allocations; the resident set does.
- **REM part alone**: the RSA mixers of ``rsa_informer`` (two encoder self-attentions, decoder
  self-attention, cross-attention) applied to random ``V`` and attention outputs of the model's
  shapes, forward + backward, in a fresh process: its peak memory growth and its time.

The two models' workers take turns step by step (order alternating each round), so that load from
other processes hits both alike. Lengths that would not fit in ``--time-limit`` (estimated from
the FLOPs and the seconds per FLOP measured at the previous length) are skipped and say so.

Usage::

    python -m benchmarks.speed [--lengths 48 336 720 1440] [--steps N] [--threads T]
                               [--models informer rsa_informer] [--out benchmarks/results/speed.md]
    python -m benchmarks.speed --quick          # tiny sizes, smoke test (writes to a temp dir)
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.common import cpu_model, git_commit, git_dirty, mem_total_gb, reset_peak_rss, status_kb

DEFAULT_LENGTHS = (48, 336, 720, 1440)
MODELS = ("informer", "rsa_informer")
ETTH1_LENGTH = 48  # the ETTh1-24 setting: seq 48, label 48, horizon 24
MM_SQUARE = 2048
TARGET_OVERHEAD_PCT = 10.0
TARGET_RATIO = 1.2


@dataclass
class Setup:
    """Everything a worker needs to build a case."""

    batch: int = 32
    channels: int = 7
    time_features: int = 4
    horizon: int = 24
    d_model: int = 512
    d_ff: int | None = None  # None: the model's default (2048)
    threads: int = 0  # 0: all cores
    mm_square: int = MM_SQUARE
    mm_model: tuple[int, int, int] = (32 * 72, 512, 2048)  # [M, K] x [K, N]

    def label(self, length: int) -> int:
        return length if length == ETTH1_LENGTH else length // 2

    def model_options(self, length: int) -> dict:
        options = dict(context_length=length, label_length=self.label(length), prediction_length=self.horizon,
                       n_channels=self.channels, n_time_features=self.time_features, d_model=self.d_model)
        if self.d_ff is not None:
            options["d_ff"] = self.d_ff
        return options


# ----------------------------------------------------------------------------------------------
# Process-level helpers (memory, machine).
# ----------------------------------------------------------------------------------------------

class PeakMemory:
    """``with PeakMemory() as m: ...`` then ``m.growth_mb``: peak RSS during the block over the RSS at ``base_kb``."""

    def __init__(self, base_kb: int | None = None) -> None:
        self.base_kb = base_kb

    def __enter__(self) -> PeakMemory:
        rss = status_kb("VmRSS") or 0
        self.base_kb = rss if self.base_kb is None else self.base_kb
        self.reset = reset_peak_rss()
        self.maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self

    def __exit__(self, *exc) -> None:
        if self.reset:
            peak = status_kb("VmHWM") or 0
            self.source = "VmHWM after clear_refs"
        else:  # ru_maxrss cannot be reset: only growth beyond the process's earlier peak shows
            peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, self.maxrss_before)
            self.source = "ru_maxrss"
        self.peak_kb = peak
        self.growth_mb = (peak - self.base_kb) / 1024


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------------------------
# Worker side: one model at one length, in its own process, driven by JSON lines on stdin.
# ----------------------------------------------------------------------------------------------

def _set_threads(threads: int) -> int:
    import torch

    torch.set_num_threads(threads if threads > 0 else _cores())
    return torch.get_num_threads()


def _make_batch(setup: Setup, length: int, batch: int, device=None):
    import torch

    kw = {"device": device} if device is not None else {}
    return {
        "past_target": torch.randn(batch, length, setup.channels, **kw),
        "past_time_feat": torch.randn(batch, length, setup.time_features, **kw),
        "future_time_feat": torch.randn(batch, setup.horizon, setup.time_features, **kw),
        "past_observed": torch.ones(batch, length, setup.channels, **kw),
        "future_target": torch.randn(batch, setup.horizon, setup.channels, **kw),
        "future_observed": torch.ones(batch, setup.horizon, setup.channels, **kw),
    }


def _optimizer(model):
    """The optimizer ``ForecastingModule`` trains with (Adam, REM scalars in their own group)."""
    from tsrec.training.config import TrainingConfig
    from tsrec.training.module import ForecastingModule

    configured = ForecastingModule(model, TrainingConfig()).configure_optimizers()
    return configured["optimizer"] if isinstance(configured, dict) else configured


class Case:
    """A model, its optimizer and inputs; ``step()`` is one training step, ``predict(n)`` one prediction."""

    def __init__(self, name: str, setup: Setup, length: int) -> None:
        import torch

        from tsrec.models import build_model
        from tsrec.training.module import masked_loss

        torch.manual_seed(0)
        self.name, self.length = name, length
        self.model = build_model(name, **setup.model_options(length))
        self.optimizer = _optimizer(self.model)
        self.batch = _make_batch(setup, length, setup.batch)
        self.single = {k: v[:1].clone() for k, v in self.batch.items()}
        self._loss = masked_loss
        self.n_params = sum(p.numel() for p in self.model.parameters())

    def _forward(self, batch):
        return self.model(batch["past_target"], batch["past_time_feat"], batch["future_time_feat"],
                          batch["past_observed"])

    def step(self) -> None:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(self._forward(self.batch), self.batch["future_target"], self.batch["future_observed"])
        loss.backward()
        self.optimizer.step()

    def predict(self, single: bool = False):
        import torch

        self.model.eval()
        with torch.no_grad():
            return self._forward(self.single if single else self.batch)


def _mm_sample(setup: Setup, reps_model: int = 3) -> dict:
    """GFLOP/s of one square fp32 mm and of the model-like mm (median of ``reps_model``)."""
    import torch

    n = setup.mm_square
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm
    t0 = time.perf_counter()
    torch.mm(a, b)
    square = 2 * n ** 3 / (time.perf_counter() - t0) / 1e9
    m, k, nn_ = setup.mm_model
    x, w = torch.randn(m, k), torch.randn(k, nn_)
    torch.mm(x, w)
    ts = []
    for _ in range(reps_model):
        t0 = time.perf_counter()
        torch.mm(x, w)
        ts.append(time.perf_counter() - t0)
    model_like = 2 * m * k * nn_ / statistics.median(ts) / 1e9
    return {"square": square, "model": model_like}


def _flops_real(case: Case) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        case.step()
    return int(counter.get_total_flops())


def _profile_step(case: Case, top: int) -> dict:
    """One training step under ``torch.profiler``: time per phase, per labelled module kind, top ops."""
    import torch
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    from tsrec.nn.attention import AttentionKernel, RSAMixer

    handles = []

    def label(module, name):
        def pre(mod, args):
            mod._speed_rf = record_function(name)
            mod._speed_rf.__enter__()

        def post(mod, args, out):
            mod._speed_rf.__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))

    for module in case.model.modules():
        if isinstance(module, RSAMixer):
            label(module, "fwd:rsa_mixer")
        elif isinstance(module, AttentionKernel):
            label(module, f"fwd:kernel:{type(module).__name__}")
        elif isinstance(module, torch.nn.Linear):
            label(module, "fwd:linear")
    from tsrec.training.module import masked_loss

    batch = case.batch
    case.model.train()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        case.optimizer.zero_grad(set_to_none=True)
        with record_function("phase:forward"):
            loss = masked_loss(case._forward(batch), batch["future_target"], batch["future_observed"])
        with record_function("phase:backward"):
            loss.backward()
        with record_function("phase:optimizer"):
            case.optimizer.step()
    wall = time.perf_counter() - t0
    for h in handles:
        h.remove()
    events = prof.key_averages()
    ranges = {e.key: e.cpu_time_total / 1e3 for e in events if e.key.startswith(("phase:", "fwd:"))}
    ops = [e for e in events if not e.key.startswith(("phase:", "fwd:", "ProfilerStep"))]
    total_self = sum(e.self_cpu_time_total for e in ops) / 1e3
    ops.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return {
        "wall_s": wall,
        "ranges_ms": ranges,
        "total_self_ms": total_self,
        "top_ops": [{"op": e.key, "self_ms": e.self_cpu_time_total / 1e3, "calls": e.count} for e in ops[:top]],
    }


def worker_main(name: str, length: int, setup: Setup) -> int:
    """Serve commands for one (model, length) case: one JSON object per line in, one per line out."""
    out = sys.stdout
    sys.stdout = sys.stderr  # keep stray prints off the protocol channel

    def reply(obj: dict) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    import torch

    threads = _set_threads(setup.threads)
    # Load lazily initialised kernels and libraries on a tiny model before measuring anything.
    tiny = Setup(batch=2, channels=setup.channels, time_features=setup.time_features, horizon=4, d_model=16,
                 d_ff=32, threads=setup.threads)
    tiny_case = Case(name, tiny, 48)
    tiny_case.step()
    tiny_case.predict()
    del tiny_case
    _mm_sample(Setup(mm_square=64, mm_model=(64, 64, 64)), reps_model=1)

    rss_empty = status_kb("VmRSS") or 0
    case = Case(name, setup, length)
    base = status_kb("VmRSS") or 0
    reply({"ready": True, "threads": threads, "n_params": case.n_params, "torch": torch.__version__,
           "rss_model_mb": (base - rss_empty) / 1024})
    for line in sys.stdin:
        cmd = json.loads(line)
        kind = cmd["cmd"]
        if kind == "exit":
            reply({"bye": True})
            return 0
        if kind == "memory":  # first prediction, then first (cold) training step; peak RSS of each
            with PeakMemory(base) as pm:
                t0 = time.perf_counter()
                case.predict()
                pred_cold = time.perf_counter() - t0
            with PeakMemory(base) as tm:
                t0 = time.perf_counter()
                case.step()
                step_cold = time.perf_counter() - t0
            reply({"pred_peak_mb": pm.growth_mb, "train_peak_mb": tm.growth_mb, "peak_source": tm.source,
                   "pred_cold_s": pred_cold, "step_cold_s": step_cold, "rss_peak_mb": tm.peak_kb / 1024})
        elif kind == "step":
            t0 = time.perf_counter()
            case.step()
            reply({"s": time.perf_counter() - t0})
        elif kind == "predict":
            t0 = time.perf_counter()
            case.predict(single=cmd.get("single", False))
            reply({"s": time.perf_counter() - t0})
        elif kind == "mm":
            reply(_mm_sample(setup))
        elif kind == "flops":  # one training step on real tensors under FlopCounterMode (check of the meta count)
            t0 = time.perf_counter()
            flops = _flops_real(case)
            reply({"flops": flops, "s": time.perf_counter() - t0})
        elif kind == "profile":
            reply(_profile_step(case, cmd.get("top", 8)))
        else:
            reply({"error": f"unknown command {kind!r}"})
    return 0


def rem_worker_main(length: int, setup: Setup, reps: int, budget: float) -> int:
    """The RSA mixers of ``rsa_informer`` alone at the model's shapes: peak memory (cold pass) and time."""
    import torch

    from tsrec.models import build_model
    from tsrec.nn.attention import KernelOutput

    threads = _set_threads(setup.threads)
    torch.manual_seed(0)
    options = setup.model_options(length)
    model = build_model("rsa_informer", **options)
    label, horizon = options["label_length"], options["prediction_length"]
    dec_len = label + horizon
    # (mixer, query_len, key_len, query_offset) for every RSA layer, as the network calls them.
    layers = []
    for name, _, layer in model.rsa_layers():
        if name == "encoder self":
            layers.append((layer.rsa, length, length, 0))
        elif name == "decoder self":
            layers.append((layer.rsa, dec_len, dec_len, 0))
        else:
            layers.append((layer.rsa, dec_len, length, length - label))
    heads = model.config.n_heads
    dim = model.config.d_model // heads
    batch = setup.batch

    def make(b: int, scale: int = 1):
        vs = [torch.randn(b, heads, lk // scale or 1, dim, requires_grad=True) for _, _, lk, _ in layers]
        att = [torch.randn(b, heads, lq // scale or 1, dim, requires_grad=True) for _, lq, _, _ in layers]
        return vs, att

    def run(vs, att) -> None:
        outs = [mixer(KernelOutput(a), v, query_offset=off) for (mixer, _, _, off), v, a in zip(layers, vs, att)]
        sum(o.square().sum() for o in outs).backward()  # all layers' saved tensors coexist, as in the network

    vs, att = make(2, scale=max(length // 8, 1))  # load kernels on tiny shapes (offsets stay valid for dense)
    try:
        run(vs, att)
    except Exception:  # noqa: BLE001 - warm-up only
        pass
    vs, att = make(batch)
    with PeakMemory() as pm:
        t0 = time.perf_counter()
        run(vs, att)
        cold = time.perf_counter() - t0
    ts = []
    t_timing = time.perf_counter()
    for _ in range(reps):
        if ts and time.perf_counter() - t_timing > budget:
            break
        for t in vs + att:
            t.grad = None
        t0 = time.perf_counter()
        run(vs, att)
        ts.append(time.perf_counter() - t0)
    print("RESULT " + json.dumps({"rem_peak_mb": pm.growth_mb, "rem_cold_s": cold, "rem_times_s": ts or [cold],
                                  "threads": threads, "peak_source": pm.source}))
    return 0


# ----------------------------------------------------------------------------------------------
# Driver side.
# ----------------------------------------------------------------------------------------------

class Worker:
    """A running ``worker_main`` process."""

    def __init__(self, name: str, length: int, setup: Setup) -> None:
        self.name = name
        cmd = [sys.executable, "-m", "benchmarks.speed", "--worker", name, str(length),
               "--setup-json", json.dumps(asdict(setup))]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.info = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait()
            raise RuntimeError(f"worker {self.name} ended (rc {rc}) without answering")
        return json.loads(line)

    def ask(self, cmd: str, **kw) -> dict:
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            self.ask("exit")
        except (RuntimeError, BrokenPipeError, OSError):
            pass
        self.proc.wait(timeout=60)


def count_flops(name: str, setup: Setup, length: int) -> dict:
    """FLOPs of one training step (forward + backward) and one prediction (batch), on the meta device."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tsrec.models import build_model
    from tsrec.training.module import masked_loss

    with torch.device("meta"):
        model = build_model(name, **setup.model_options(length))
        batch = _make_batch(setup, length, setup.batch)
    counter = FlopCounterMode(display=False)
    with counter:
        pred = model(batch["past_target"], batch["past_time_feat"], batch["future_time_feat"], batch["past_observed"])
        masked_loss(pred, batch["future_target"], batch["future_observed"]).backward()
    train = int(counter.get_total_flops())
    # Prediction FLOPs: forward only. Counted in train mode (eval-mode ProbSparse seeds a generator on the
    # input's device, which the meta device lacks); shapes, hence FLOPs, are the same in both modes.
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(batch["past_target"], batch["past_time_feat"], batch["future_time_feat"], batch["past_observed"])
    return {"flops_train": train, "flops_pred": int(counter.get_total_flops())}


def _rem_alone(length: int, setup: Setup, reps: int, budget: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.speed", "--rem-worker", str(length), "--rem-reps", str(reps),
           "--rem-budget", str(budget),
           "--setup-json", json.dumps(asdict(setup))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"REM worker L={length} failed (rc {proc.returncode}):\n{proc.stderr}", flush=True)
        return {"error": tail[:120]}
    return json.loads(line[0][len("RESULT "):])


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _quartiles(xs: list[float]) -> tuple[float, float] | None:
    if len(xs) < 4:
        return None
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def run_length(length: int, args, setup: Setup, log, next_ratio: float | None) -> dict:
    """Time, measure and (optionally) profile every model at one length.

    ``next_ratio`` (FLOPs of the next length over this one's) lets the step planner leave enough of
    ``--time-limit`` for the next length's minimum, when that minimum can fit at all.
    """
    result: dict = {"length": length, "models": {}, "mm": {"square": [], "model": []}, "notes": []}
    workers: dict[str, Worker] = {}
    n_models = len(args.models)
    try:
        t0 = time.time()
        for name in args.models:
            workers[name] = Worker(name, length, setup)
            result["models"][name] = {**workers[name].info, "steps_s": [], "pred32_s": [], "pred1_s": []}
        startup = (time.time() - t0) / n_models
        # memory: first prediction and first (cold) training step of each, one worker at a time
        for name, w in workers.items():
            mem = w.ask("memory")
            result["models"][name].update(mem)
            log(f"  {name:13s} L={length:5d} cold step {mem['step_cold_s']:.2f} s, train peak "
                f"+{mem['train_peak_mb']:.0f} MB, predict peak +{mem['pred_peak_mb']:.0f} MB")
        # optionally the meta FLOP count checked on real tensors (untimed, counts as a warm-up step)
        if args.check_flops:
            for name, w in workers.items():
                result["models"][name]["flops_real"] = w.ask("flops")["flops"]
        for _ in range(args.warmup):
            for name, w in workers.items():
                w.ask("step")
        round_s = sum(m["step_cold_s"] for m in result["models"].values())
        pred_round = sum(m["pred_cold_s"] for m in result["models"].values()) * 1.2  # batch 32 + one window
        reserve = 0.0
        if args.deadline is not None and next_ratio is not None:
            need_next = next_ratio * round_s * (2 + args.warmup + args.check_flops) * 1.15 + startup * n_models
            need_here = round_s * 1.15 + pred_round * 2.5
            if args.deadline - time.time() - need_here >= need_next:
                reserve = need_next
        if args.steps:
            n_steps = args.steps
        else:
            n_steps = max(args.min_steps, min(args.max_steps, int(args.length_budget / max(round_s, 1e-9))))
            if args.deadline is not None:  # never plan past the deadline, but time at least one round
                left = args.deadline - time.time() - reserve - pred_round * 2.5
                n_steps = max(1, min(n_steps, int(left / max(round_s * 1.15, 1e-9))))
        result["n_steps"] = n_steps
        names = list(workers)
        for r in range(n_steps):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                result["models"][name]["steps_s"].append(workers[name].ask("step")["s"])
            mm = workers[order[0]].ask("mm")
            for k in ("square", "model"):
                result["mm"][k].append(mm[k])
        log("  " + ", ".join(f"{n} {_median(result['models'][n]['steps_s']):.2f} s" for n in names)
            + f" per step (median of {n_steps})")
        # prediction latency
        n_pred = args.pred_reps or max(2, min(20, int(args.length_budget / 4 / max(pred_round, 1e-9))))
        if args.deadline is not None and not args.pred_reps:
            left = args.deadline - time.time() - reserve
            n_pred = max(1, min(n_pred, int(left / max(pred_round * 1.3, 1e-9))))
        result["n_pred"] = n_pred
        for r in range(n_pred):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                result["models"][name]["pred32_s"].append(workers[name].ask("predict")["s"])
                result["models"][name]["pred1_s"].append(workers[name].ask("predict", single=True)["s"])
        if length in args.profile:
            left = None if args.deadline is None else args.deadline - time.time() - reserve
            if left is None or left > round_s * 1.3:
                for name in names:
                    result["models"][name]["profile"] = workers[name].ask("profile", top=args.profile_top)
                log("  profiled one step of each")
            else:
                result["notes"].append(f"L = {length}: profiling skipped (needs ~{round_s * 1.3:.0f} s, "
                                       f"{max(left, 0):.0f} s of --time-limit left)")
    finally:
        for w in workers.values():
            w.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=None,
                        help=f"input lengths (default {' '.join(map(str, DEFAULT_LENGTHS))})")
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--steps", type=int, default=None,
                        help="timed training steps per model and length (default: as many as --length-budget "
                             "allows, between --min-steps and --max-steps, and never past --time-limit)")
    parser.add_argument("--min-steps", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--length-budget", type=float, default=60.0,
                        help="seconds of timed training steps to aim for per length (all models together)")
    parser.add_argument("--warmup", type=int, default=0,
                        help="extra untimed steps per model before timing (each model always runs a cold step "
                             "for memory and a step under FlopCounterMode first)")
    parser.add_argument("--pred-reps", type=int, default=None, help="timed predictions per model and batch size")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default 0: all cores)")
    parser.add_argument("--time-limit", type=float, default=600.0,
                        help="seconds for the whole run: lengths estimated not to fit are skipped (0: no limit)")
    parser.add_argument("--profile", type=int, nargs="*", default=None,
                        help="lengths at which one extra training step per model runs under torch.profiler "
                             "(default: 48 and 720 when measured; give no value for none)")
    parser.add_argument("--profile-top", type=int, default=8)
    parser.add_argument("--profile-only", action="store_true",
                        help="only profile (at the --profile lengths) and replace the profile section of --out")
    parser.add_argument("--rem-reps", type=int, default=3,
                        help="timed passes of the REM-alone measurement (fewer once --rem-budget seconds are spent; "
                             "none past --time-limit, when its cold pass is reported)")
    parser.add_argument("--rem-budget", type=float, default=10.0, help=argparse.SUPPRESS)
    parser.add_argument("--check-flops", action="store_true",
                        help="count one step's FLOPs on real tensors too, to check the meta-device count "
                             "(costs one more step per model and length; on with --quick)")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke test")
    parser.add_argument("--out", type=Path, default=None,
                        help="markdown table (default benchmarks/results/speed.md; with --quick a temp file); "
                             "the CSV goes beside it")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--rem-worker", type=int, metavar="LENGTH", help=argparse.SUPPRESS)
    parser.add_argument("--setup-json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.setup_json:
        setup = Setup(**{k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(args.setup_json).items()})
        if args.worker:
            return worker_main(args.worker[0], int(args.worker[1]), setup)
        if args.rem_worker:
            return rem_worker_main(args.rem_worker, setup, args.rem_reps, args.rem_budget)

    if args.quick:
        setup = Setup(batch=4, d_model=32, d_ff=64, threads=args.threads, mm_square=256, mm_model=(4 * 72, 32, 64))
        args.lengths = args.lengths or [48, 96]
        args.steps = args.steps or 3
        args.pred_reps = args.pred_reps or 3
        args.rem_reps = min(args.rem_reps, 2)
        args.check_flops = True
        if args.out is None:
            args.out = Path(tempfile.gettempdir()) / "tsrec_speed_quick.md"
        if args.profile is None:
            args.profile = [48]
    else:
        setup = Setup(batch=args.batch, d_model=args.d_model, threads=args.threads)
        args.lengths = args.lengths or list(DEFAULT_LENGTHS)
        if args.out is None:
            args.out = Path("benchmarks/results/speed.md")
        if args.profile is None:
            args.profile = [48, 720]
    args.lengths = sorted(set(args.lengths))
    command = " ".join(["python -m benchmarks.speed"] + [
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)])

    threads = _set_threads(args.threads)
    t_start = time.time()
    args.deadline = t_start + args.time_limit if args.time_limit > 0 else None
    args.reserve_s = 0.0
    uptime_start = _uptime()

    def log(msg: str) -> None:
        print(f"[{time.time() - t_start:6.0f} s] {msg}", flush=True)

    log(f"start: {uptime_start}")
    if args.profile_only:
        args.warmup = max(args.warmup, 1)
        return profile_only(args, setup, command, log)
    flops = {(n, L): count_flops(n, setup, L) for L in args.lengths for n in args.models}
    log("FLOPs counted (meta device)")
    results: dict[int, dict] = {}
    s_per_flop: float | None = None  # seconds per counted training FLOP at the last measured length (slowest model)
    last_measured: int | None = None
    n_models = len(args.models)
    for i, L in enumerate(args.lengths):
        past_deadline = args.deadline is not None and time.time() > args.deadline
        rem = _rem_alone(L, setup, 0 if past_deadline else args.rem_reps, args.rem_budget)
        if "error" not in rem:
            log(f"L={L}: REM alone peak +{rem['rem_peak_mb']:.0f} MB, {_median(rem['rem_times_s']):.3f} s fwd+bwd")
        train_flops = max(flops[(n, L)]["flops_train"] for n in args.models)
        est_step = None if s_per_flop is None else train_flops * s_per_flop
        if args.deadline is not None and est_step is not None:
            # cold step + (FLOP-check step) + warm-up + one timed round, for every model, plus process start-up
            est_min = n_models * (2 + args.warmup + args.check_flops) * est_step * 1.15 + 15 * n_models
            left = args.deadline - time.time()
            if est_min > left:
                results[L] = {"length": L, "skipped": f"skipped: estimated {est_step:.0f} s per training step "
                              f"(its FLOPs x the s/FLOP measured at L = {last_measured}), at least "
                              f"{est_min:.0f} s for this length, {max(left, 0):.0f} s of --time-limit left",
                              "est_step_s": est_step, "rem": rem}
                log(f"L={L}: {results[L]['skipped']}")
                continue
        next_ratio = None
        if i + 1 < len(args.lengths):
            next_ratio = max(flops[(n, args.lengths[i + 1])]["flops_train"] for n in args.models) / train_flops
        log(f"L={L}: measuring " + ", ".join(args.models))
        res = run_length(L, args, setup, log, next_ratio)
        res["rem"] = rem
        results[L] = res
        last_measured = L
        s_per_flop = max(_median(res["models"][n]["steps_s"]) / max(flops[(n, L)]["flops_train"], 1)
                         for n in args.models)
    elapsed = time.time() - t_start
    uptime_end = _uptime()
    log(f"end: {uptime_end}")

    rows = build_rows(args, setup, results, flops)
    text = render(args, setup, results, rows, command, threads, elapsed, uptime_start, uptime_end)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    csv_path = args.out.with_suffix(".csv")
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row.get(k)) for k in CSV_COLUMNS})
    print(f"wrote {args.out} and {csv_path}")
    return 0


# ----------------------------------------------------------------------------------------------
# Tables.
# ----------------------------------------------------------------------------------------------

CSV_COLUMNS = [
    "model", "length", "label", "horizon", "batch", "d_model", "threads", "status", "n_params",
    "steps", "step_median_s", "step_min_s", "step_max_s", "step_q1_s", "step_q3_s", "steps_s",
    "rsa_overhead_pct", "rsa_overhead_min_pct", "train_gflop", "pred_gflop", "train_gflop_real_check", "mm_square_gflops",
    "mm_model_gflops", "mm_ref_gflops", "ideal_step_s", "ratio_to_ideal", "efficiency_pct",
    "pred32_median_s", "pred32_min_s", "pred32_max_s", "pred1_median_s", "pred1_min_s", "pred1_max_s",
    "train_peak_mb", "pred_peak_mb", "rem_alone_peak_mb", "rem_alone_median_s", "step_cold_s",
    "est_step_s",
]


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list):
        return " ".join(f"{x:.4g}" for x in v)
    return v


def build_rows(args, setup: Setup, results: dict, flops: dict) -> list[dict]:
    rows = []
    for L in args.lengths:
        res = results.get(L, {"skipped": "not run"})
        mm_sq = _median(res.get("mm", {}).get("square", []))
        mm_md = _median(res.get("mm", {}).get("model", []))
        mm_ref = max([x for x in (mm_sq, mm_md) if x is not None], default=None)
        rem = res.get("rem", {})
        base_step = None
        for name in args.models:
            f = flops[(name, L)]
            row = {"model": name, "length": L, "label": setup.label(L), "horizon": setup.horizon,
                   "batch": setup.batch, "d_model": setup.d_model, "train_gflop": f["flops_train"] / 1e9,
                   "pred_gflop": f["flops_pred"] / 1e9, "est_step_s": res.get("est_step_s")}
            if name == "rsa_informer" and "rem_peak_mb" in rem:
                row["rem_alone_peak_mb"] = rem["rem_peak_mb"]
                row["rem_alone_median_s"] = _median(rem["rem_times_s"])
            m = res.get("models", {}).get(name)
            if m is None:
                row["status"] = res.get("skipped", "not run")
                rows.append(row)
                continue
            steps = m["steps_s"]
            med = _median(steps)
            q = _quartiles(steps)
            row.update({
                "status": "measured", "threads": m.get("threads"), "n_params": m.get("n_params"),
                "steps": len(steps), "step_median_s": med, "step_min_s": min(steps), "step_max_s": max(steps),
                "step_q1_s": q[0] if q else None, "step_q3_s": q[1] if q else None, "steps_s": steps,
                "train_gflop_real_check": m.get("flops_real", 0) / 1e9 if "flops_real" in m else None,
                "mm_square_gflops": mm_sq, "mm_model_gflops": mm_md, "mm_ref_gflops": mm_ref,
                "pred32_median_s": _median(m["pred32_s"]), "pred32_min_s": min(m["pred32_s"]),
                "pred32_max_s": max(m["pred32_s"]), "pred1_median_s": _median(m["pred1_s"]),
                "pred1_min_s": min(m["pred1_s"]), "pred1_max_s": max(m["pred1_s"]),
                "train_peak_mb": m.get("train_peak_mb"), "pred_peak_mb": m.get("pred_peak_mb"),
                "step_cold_s": m.get("step_cold_s"),
            })
            if mm_ref:
                ideal = f["flops_train"] / (mm_ref * 1e9)
                row.update({"ideal_step_s": ideal, "ratio_to_ideal": med / ideal, "efficiency_pct": 100 * ideal / med})
            if name == "informer":
                base_step, base_min = med, min(steps)
            elif base_step:
                row["rsa_overhead_pct"] = (med / base_step - 1) * 100
                row["rsa_overhead_min_pct"] = (min(steps) / base_min - 1) * 100
            rows.append(row)
    return rows


def _f(x, fmt: str = ".2f", dash: str = "-") -> str:
    return dash if x is None else format(x, fmt)


def _spread(row: dict, key: str, scale: float = 1.0, fmt: str = ".2f") -> str:
    med = row.get(f"{key}_median_s")
    if med is None:
        return "-"
    return f"{med * scale:{fmt}} ({row[f'{key}_min_s'] * scale:{fmt}}-{row[f'{key}_max_s'] * scale:{fmt}})"


def _slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y against log x."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


def _targets(args, rows: list[dict]) -> list[str]:
    out = ["## Targets", ""]
    by = {(r["model"], r["length"]): r for r in rows}
    # RSA overhead
    ov = [(L, by[("rsa_informer", L)].get("rsa_overhead_pct")) for L in args.lengths
          if ("rsa_informer", L) in by and by[("rsa_informer", L)].get("rsa_overhead_pct") is not None]
    if ov:
        met = [L for L, p in ov if p <= TARGET_OVERHEAD_PCT]
        out.append(f"- **RSA overhead <= {TARGET_OVERHEAD_PCT:g}% per training step**: "
                   + ", ".join(f"L = {L}: {p:+.1f}% (fastest steps: {by[('rsa_informer', L)]['rsa_overhead_min_pct']:+.1f}%)"
                               for L, p in ov)
                   + (" -- met at every length measured." if len(met) == len(ov) else
                      f" -- {'met at L = ' + ', '.join(map(str, met)) if met else 'missed at every length measured'}"
                      f"{'; missed elsewhere' if met else ''}."))
    # ratio to ideal
    rat = [(r["model"], r["length"], r["ratio_to_ideal"]) for r in rows if r.get("ratio_to_ideal") is not None]
    if rat:
        met = [x for x in rat if x[2] <= TARGET_RATIO]
        out.append(f"- **training step within {TARGET_RATIO:g}x of FLOPs / measured matmul throughput**: "
                   + ", ".join(f"{m} L = {L}: {r:.2f}x" for m, L, r in rat)
                   + (" -- met everywhere." if len(met) == len(rat) else
                      f" -- met in {len(met)} of {len(rat)} cases."))
    # REM memory growth
    rem = [(r["length"], r["rem_alone_peak_mb"]) for r in rows
           if r["model"] == "rsa_informer" and r.get("rem_alone_peak_mb") is not None]
    if len(rem) >= 2:
        parts = []
        for (l0, m0), (l1, m1) in zip(rem, rem[1:]):
            s = _slope([l0, l1], [m0, m1])
            parts.append(f"L {l0}->{l1}: x{m1 / m0:.1f} for x{l1 / l0:.1f} in L (exponent {_f(s)})" if m0 > 0
                         else f"L {l0}->{l1}: n/a")
        big = [(L, m) for L, m in rem if L > 336]
        s_big = _slope([L for L, _ in big], [m for _, m in big]) if len(big) >= 2 else None
        s_all = _slope([L for L, _ in rem], [m for _, m in rem])
        out.append("- **REM part's memory grows sub-quadratically in L** (REM-alone peak, all RSA layers, "
                   "forward + backward): " + "; ".join(parts)
                   + f". Fitted exponent over all lengths {_f(s_all)}"
                   + (f", over L > 336 (the FFT path) {_f(s_big)}" if s_big is not None else "")
                   + " (2 = quadratic).")
    share = [(L, by[("rsa_informer", L)]["rem_alone_median_s"], by[("informer", L)].get("step_median_s"))
             for L in args.lengths if by.get(("rsa_informer", L), {}).get("rem_alone_median_s") is not None
             and ("informer", L) in by]
    if share:
        out.append("- REM part alone (the four RSA mixers, forward + backward, measured on its own): "
                   + ", ".join(f"L = {L}: {t:.2f} s" + (f" = {100 * t / b:.1f}% of an informer step" if b else "")
                               for L, t, b in share) + ".")
    diff = [(r["length"], by[("rsa_informer", r["length"])]["train_peak_mb"] - r["train_peak_mb"])
            for r in rows if r["model"] == "informer" and r.get("train_peak_mb") is not None
            and by.get(("rsa_informer", r["length"]), {}).get("train_peak_mb") is not None]
    if diff:
        out.append("- In-network difference (rsa_informer - informer training-step peak): "
                   + ", ".join(f"L = {L}: {d:+.0f} MB" for L, d in diff)
                   + " (RSS differences of two processes: noisy at the tens-of-MB level).")
    out.append("")
    return out


PROFILE_START, PROFILE_END = "<!-- profile:start -->", "<!-- profile:end -->"


def _profile_section(args, results: dict, header: list[str] | None = None) -> list[str]:
    profiled = [(L, n, results[L]["models"][n]["profile"]) for L in args.lengths if "models" in results.get(L, {})
                for n in args.models if "profile" in results[L]["models"][n]]
    if not profiled:
        return []
    out = [PROFILE_START, "## Where the time goes (torch.profiler, one training step per model)", "", *(header or []),
           "Self CPU time of the top aten ops (summed over forward, backward and Adam); phases and labelled "
           "forward ranges (`fwd:*`, forward only: their backward shows up under the ops) as CPU totals. "
           "One profiled step on a loaded machine: shares are indicative.", ""]
    for L, n, p in profiled:
        total = p["total_self_ms"] or 1.0
        r = p["ranges_ms"]
        phases = ", ".join(f"{k.split(':', 1)[1]} {v / 1e3:.2f} s" for k, v in sorted(r.items())
                           if k.startswith("phase:"))
        fwd = ", ".join(f"{k[4:]} {v / 1e3:.2f} s" for k, v in sorted(r.items()) if k.startswith("fwd:"))
        ops = ", ".join(f"`{o['op']}` {o['self_ms'] / 1e3:.2f} s ({100 * o['self_ms'] / total:.0f}%, "
                        f"{o['calls']} calls)" for o in p["top_ops"])
        out.append(f"- **{n}, L = {L}** (step {p['wall_s']:.2f} s under the profiler): phases: {phases}. "
                   f"Forward ranges: {fwd}. Top ops: {ops}.")
    out += ["", PROFILE_END]
    return out


def profile_only(args, setup: Setup, command: str, log) -> int:
    """``--profile-only``: profile one warm training step per model at ``--profile`` lengths and put the section
    into the existing ``--out`` (replacing an earlier one), leaving the rest of the file as it is."""
    results: dict[int, dict] = {}
    for L in args.profile:
        workers = {name: Worker(name, L, setup) for name in args.models}
        results[L] = {"models": {}}
        try:
            for name, w in workers.items():
                w.ask("memory")  # cold step: warm-up
                for _ in range(args.warmup):
                    w.ask("step")
            for name, w in workers.items():
                results[L]["models"][name] = {"profile": w.ask("profile", top=args.profile_top)}
                log(f"  profiled {name} at L={L}: {results[L]['models'][name]['profile']['wall_s']:.1f} s")
        finally:
            for w in workers.values():
                w.close()
    args.lengths = sorted(args.profile)
    header = [f"Profiled separately: `{command}` at commit `{git_commit()}`, "
              f"{_dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}; each model in a fresh worker, one "
              f"cold step and {args.warmup} warm-up step(s) first; `uptime` after: `{_uptime()}`.", ""]
    section = "\n".join(_profile_section(args, results, header))
    text = args.out.read_text() if args.out.exists() else ""
    if PROFILE_START in text and PROFILE_END in text:
        head, rest = text.split(PROFILE_START, 1)
        text = head + section + rest.split(PROFILE_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote the profile section of {args.out}")
    return 0


def _n_params(results: dict) -> dict[str, int]:
    return {n: m["n_params"] for res in results.values() for n, m in res.get("models", {}).items() if "n_params" in m}


def _dense_side() -> int:
    """Side of the largest square REM that ``LearnableREM.apply`` multiplies densely."""
    from tsrec.nn.rem import DENSE_MAX_ENTRIES

    return math.isqrt(DENSE_MAX_ENTRIES)


def render(args, setup: Setup, results, rows, command, threads, elapsed, uptime_start, uptime_end) -> str:
    import torch

    mem_total = mem_total_gb()
    commit = git_commit()
    dirty = git_dirty(["tsrec/nn", "tsrec/models", "tsrec/training", "benchmarks/speed.py"])
    sources = {m.get("peak_source") for res in results.values() for m in res.get("models", {}).values()}
    sources.discard(None)
    mm_all = {k: [x for res in results.values() for x in res.get("mm", {}).get(k, [])] for k in ("square", "model")}
    out = [
        "# Training speed, prediction latency and memory: informer vs rsa_informer",
        "",
        f"- command: `{command}`",
        f"- git commit: `{commit}`" + (" (with uncommitted changes to " + ", ".join(dirty) + ")" if dirty else ""),
        f"- machine: {cpu_model()}, {_cores()} cores visible, torch {torch.__version__} with {threads} threads"
        + (f", {mem_total:.0f} GB RAM" if mem_total else "") + f", Python {platform.python_version()}",
        f"- date: {_dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}; whole run {elapsed:.0f} s",
        f"- **shared machine**: other jobs were running on the same cores, so times are noisy and slower than "
        f"on an idle machine. `uptime` at start: `{uptime_start}`; at end: `{uptime_end}`",
        f"- setting: batch {setup.batch}, {setup.channels} channels, {setup.time_features} time features, horizon "
        f"{setup.horizon}, d_model {setup.d_model}, d_ff {setup.d_ff or 2048}, other model options at their defaults "
        "(8 heads, 2 encoder + 1 decoder layers, ProbSparse factor 5, dropout 0.05, mix, REM kinds (0, 2, 2, 0, 2, 2) "
        "with dilation 24); label length 48 at L = 48 (the "
        "ETTh1-24 setting), L / 2 at longer inputs; float32 on the CPU",
        "- training step: `zero_grad` + forward + masked MSE + backward + Adam step (ForecastingModule's optimizer: "
        "REM scalars and gates in their own group); random inputs; train mode (dropout on). Time = median "
        "(min-max) over the timed steps; the two models' workers alternate step by step, order swapped every "
        f"round; before timing each ran one cold step (memory)"
        + (", one step under FlopCounterMode (FLOP check)" if args.check_flops else "")
        + f" and {args.warmup} more warm-up step(s). The number of timed steps per length is planned from the cold "
        "step's time to fit `--length-budget` and `--time-limit` (at least one)",
        "- FLOPs: `torch.utils.flop_counter.FlopCounterMode`, forward + backward of one step (Adam adds no counted "
        "FLOPs), counted on the meta device (identical to the count on real tensors: checked with `--check-flops`"
        + (", done in this run" if args.check_flops else "") + "). "
        "Only matmuls/convolutions/attention are counted: elementwise ops (GELU, LayerNorm, softmax, dropout, "
        "Adam), gathers/scatters and the REM's FFTs are not, so they are all part of the gap to the ideal time",
        f"- matmul throughput: fp32 `torch.mm` {setup.mm_square}x{setup.mm_square}x{setup.mm_square} and "
        f"{setup.mm_model[0]}x{setup.mm_model[1]}x{setup.mm_model[2]} (model-like), one sample of each after every "
        "round of steps in the same worker processes; reference = the larger median. Over the run: square "
        f"{_f(_median(mm_all['square']), '.1f')} GFLOP/s, model-like {_f(_median(mm_all['model']), '.1f')} GFLOP/s "
        "(medians). ideal = FLOPs / reference; ratio = median step / ideal (target <= 1.2); efficiency = ideal / step",
        "- memory: peak RSS growth of each model's own fresh worker process over its size with model, optimizer "
        "and inputs allocated (after a tiny warm-up model loaded the kernels): during its first prediction "
        f"(batch {setup.batch}) and its first, cold training step (which also allocates gradients and Adam's two moments: "
        "3 x 4 bytes x parameters). Read from " + (", ".join(sorted(sources)) or "-")
        + f". REM alone: the four RSA mixers of rsa_informer at the model's shapes (B {setup.batch}, 8 heads, head "
        f"size {setup.d_model // 8}; "
        "encoder self L x L twice, decoder self (label+24)^2, cross (label+24) x L), forward + backward, fresh "
        f"process; dense `P @ V` up to {_dense_side()}^2 entries, FFT above (`tsrec.nn.rem.DENSE_MAX_ENTRIES`)",
        "- parameters: " + (", ".join(f"{n} {v:,}" for n, v in _n_params(results).items()) or "-"),
        "",
        "## Training step",
        "",
        "| model | L | label | steps | step s, median (min-max) | RSA overhead, median (min) | GFLOP/step | matmul GFLOP/s "
        "| ideal s | ratio (<= 1.2) | efficiency | train peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.get("status") != "measured":
            est = f" (est. {r['est_step_s']:.0f} s/step)" if r.get("est_step_s") else ""
            out.append(f"| {r['model']} | {r['length']} | {r['label']} | - | {r['status']}{est} | - | "
                       f"{r['train_gflop']:.0f} | - | - | - | - | - |")
            continue
        overhead = "-"
        if r.get("rsa_overhead_pct") is not None:
            overhead = f"{r['rsa_overhead_pct']:+.1f}% ({r['rsa_overhead_min_pct']:+.1f}%)"
        out.append(
            f"| {r['model']} | {r['length']} | {r['label']} | {r['steps']} | {_spread(r, 'step')} | {overhead} | "
            f"{r['train_gflop']:.1f} | {_f(r.get('mm_ref_gflops'), '.1f')} | {_f(r.get('ideal_step_s'))} | "
            f"{_f(r.get('ratio_to_ideal'))}x | {_f(r.get('efficiency_pct'), '.0f')}% | {_f(r.get('train_peak_mb'), '.0f')} |")
    out += ["", "## Prediction and memory", "",
            f"| model | L | predict batch {setup.batch} ms | predict 1 window ms | GFLOP/prediction (batch {setup.batch}) "
            f"| predict peak MB | REM alone peak MB | REM alone fwd+bwd s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['length']} | {_spread(r, 'pred32', 1e3, '.0f')} | "
                   f"{_spread(r, 'pred1', 1e3, '.0f')} | {r['pred_gflop']:.1f} | {_f(r.get('pred_peak_mb'), '.0f')} | "
                   f"{_f(r.get('rem_alone_peak_mb'), '.0f')} | {_f(r.get('rem_alone_median_s'), '.3f')} |")
    out.append("")
    out += _targets(args, rows)
    out += _profile_section(args, results)
    notes = [n for res in results.values() for n in res.get("notes", [])]
    if notes:
        out += ["Notes: " + "; ".join(notes) + ".", ""]
    checks = [(r["model"], r["length"]) for r in rows if r.get("train_gflop_real_check") is not None
              and abs(r["train_gflop_real_check"] - r["train_gflop"]) > 1e-6 * r["train_gflop"]]
    if checks:
        out += [f"Warning: the meta-device FLOP count differs from the real count for {checks}.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
