"""Speed and memory of the REM part of one RSA attention layer: dense ``P @ V`` against the chunked
recurrence and the FFT path.

For each length ``L`` and each method, one forward + backward pass of
``LearnableREM.product(V, method=...)`` with ``V`` of shape ``[batch, heads, L, head_dim]`` (float32,
CPU), gradients flowing to ``V`` and to every REM scalar:

- ``dense``: builds ``P`` ``[H, L, L]`` then ``P @ V`` (what an O(L^2) implementation does);
- ``scan``:  the recurrence the REM encodes, a chunk of ``ceil(sqrt(L))`` steps at a time
  (``tsrec.nn.rem.recurrence_apply``), ``O(L^1.5)``, memory linear in ``L``;
- ``fft``:   the Toeplitz product as an FFT convolution along time, memory linear in ``L``.

Each (method, L) case runs in a fresh subprocess so that its peak memory is its own: the peak
resident set size (``VmHWM``, reset through ``/proc/self/clear_refs`` when the kernel allows,
else ``ru_maxrss``) minus the resident size just before the first REM call (after the inputs
exist). That counts every allocation torch makes on the CPU, which ``tracemalloc`` does not see.
Dense cases whose *lower bound* on memory exceeds ``--mem-cap-gb`` are not run: the dense path
holds ``P`` and, in the backward pass, ``dL/dP`` (``[H, L, L]`` each, the batch folded into the
product's columns), ``8 * H * L^2`` bytes.

Usage::

    python -m benchmarks.rem_speed [--lengths 96 336 ...] [--repeats N] [--out benchmarks/results/rem_speed.md]
"""

from __future__ import annotations

import argparse
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
import time
from pathlib import Path

from benchmarks.common import cpu_model, git_commit, git_dirty, mem_total_gb, reset_peak_rss, status_kb

DEFAULT_LENGTHS = (96, 336, 720, 1440, 2880, 8192)
METHODS = ("dense", "scan", "fft")
KINDS = (2, 1, 1, 2, 1, 1)  # 8 heads, every kind present
DILATION = 24


# ----------------------------------------------------------------------------------------------
# Worker: one (method, L) case, run in its own process.
# ----------------------------------------------------------------------------------------------

def _setup(length: int, batch: int, heads: int, dim: int, masked: bool, threads: int | None):
    import torch

    from tsrec.config import RSAConfig
    from tsrec.nn.rem import LearnableREM

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    kinds = KINDS if heads == sum(KINDS) else (heads, 0, 0, 0, 0, 0)
    rem = LearnableREM(RSAConfig(kinds=kinds, dilation=DILATION, periods=(8.0,), dilated_periods=(8.0,)),
                       masked=masked)
    values = torch.randn(batch, heads, length, dim, requires_grad=True)
    grad_out = torch.randn(batch, heads, length, dim)

    def step(method: str) -> None:
        out = rem.product(values, method=method)
        out.backward(grad_out)
        values.grad = None
        rem.zero_grad(set_to_none=True)

    return step, torch.get_num_threads()


def memory_case(method: str, length: int, batch: int, heads: int, dim: int, masked: bool,
                threads: int | None) -> dict:
    """Peak memory of the first (cold) forward+backward pass of one method, in this fresh process."""
    tiny, _ = _setup(8, 1, heads, 4, masked, threads)
    tiny(method)  # load lazily initialised kernels and libraries before measuring
    step, n_threads = _setup(length, batch, heads, dim, masked, threads)
    rss_before = status_kb("VmRSS")
    hwm_reset = reset_peak_rss()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    t0 = time.perf_counter()
    step(method)
    cold = time.perf_counter() - t0
    if hwm_reset:
        peak_kb = status_kb("VmHWM")
    else:  # ru_maxrss cannot be reset: only growth beyond the process's earlier peak is seen
        peak_kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, maxrss_before)
    return {"method": method, "length": length, "cold_s": cold,
            "peak_growth_mb": (peak_kb - rss_before) / 1024, "peak_rss_mb": peak_kb / 1024,
            "peak_source": "VmHWM after clear_refs" if hwm_reset else "ru_maxrss", "threads": n_threads}


def timing_case(methods: list[str], length: int, batch: int, heads: int, dim: int, masked: bool,
                threads: int | None, repeats: int, warmup: int, min_time: float, max_repeats: int) -> dict:
    """Forward+backward times of the methods at one length, interleaved pass by pass (so that load from
    other processes hits both alike); at least ``repeats`` passes each, more for short cases until
    ``min_time`` seconds per method have been timed."""
    step, n_threads = _setup(length, batch, heads, dim, masked, threads)
    for method in methods:
        for _ in range(warmup):
            step(method)
    times: dict[str, list[float]] = {m: [] for m in methods}
    r = 0
    while r < max_repeats and (r < repeats or min(sum(t) for t in times.values()) < min_time):
        order = methods if r % 2 == 0 else methods[::-1]
        for method in order:
            t0 = time.perf_counter()
            step(method)
            times[method].append(time.perf_counter() - t0)
        r += 1
    return {"length": length, "times_s": times, "threads": n_threads}


# ----------------------------------------------------------------------------------------------
# Driver.
# ----------------------------------------------------------------------------------------------

def dense_lower_bound_bytes(length: int, heads: int) -> int:
    """Bytes the dense path cannot avoid: ``P`` and ``dL/dP``, ``[H, L, L]`` float32 each."""
    return 8 * heads * length * length


def _fmt_time(ts: list[float]) -> str:
    med = statistics.median(ts)
    return f"{med * 1e3:.1f} ({min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS))
    parser.add_argument("--repeats", type=int, default=3, help="least timed forward+backward passes per case")
    parser.add_argument("--min-time", type=float, default=1.0,
                        help="keep timing short cases until each method has this many seconds timed")
    parser.add_argument("--max-repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=1, help="untimed passes per method before timing")
    parser.add_argument("--batch", type=int, default=32, help="windows per batch (the Informer recipe: 32)")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--unmasked", action="store_true", help="bidirectional REMs (default: masked)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--mem-cap-gb", type=float, default=8.0,
                        help="skip dense cases whose lower bound on memory exceeds this")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: steadier on a shared machine; 0 = torch's default)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/rem_speed.md"))
    parser.add_argument("--worker-memory", nargs=2, metavar=("METHOD", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-timing", type=int, metavar="LENGTH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    masked = not args.unmasked
    shape = (args.batch, args.heads, args.head_dim)

    if args.worker_memory:
        result = memory_case(args.worker_memory[0], int(args.worker_memory[1]), *shape, masked, args.threads)
        print("RESULT " + json.dumps(result))
        return 0
    if args.worker_timing:
        result = timing_case(args.methods, args.worker_timing, *shape, masked, args.threads, args.repeats,
                             args.warmup, args.min_time, args.max_repeats)
        print("RESULT " + json.dumps(result))
        return 0

    command = "python -m benchmarks.rem_speed " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    common = ["--batch", str(args.batch), "--heads", str(args.heads), "--head-dim", str(args.head_dim),
              "--threads", str(args.threads)] + (["--unmasked"] if args.unmasked else [])
    results: dict[tuple[str, int], dict] = {}
    t_start = time.time()
    args.load_start = os.getloadavg()[0]
    for length in args.lengths:
        methods = []
        for method in args.methods:
            bound = dense_lower_bound_bytes(length, args.heads)
            if method == "dense" and bound > args.mem_cap_gb * 1024 ** 3:
                results[(method, length)] = {"skipped": f"skipped: needs >= {bound / 1024 ** 3:.1f} GB "
                                                        f"(cap {args.mem_cap_gb:g} GB)"}
                print(f"{method:5s} L={length:5d}  {results[(method, length)]['skipped']}", flush=True)
                continue
            methods.append(method)
            res = _subprocess(["--worker-memory", method, str(length)] + common)
            results[(method, length)] = res if "error" not in res else {"skipped": res["error"]}
        if not methods:
            continue
        timing = _subprocess(["--worker-timing", str(length), "--methods", *methods, "--repeats", str(args.repeats),
                              "--warmup", str(args.warmup), "--min-time", str(args.min_time),
                              "--max-repeats", str(args.max_repeats)] + common)
        for method in methods:
            r = results[(method, length)]
            if "error" in timing:
                r.setdefault("skipped", timing["error"])
            elif "skipped" not in r:
                r["times_s"] = timing["times_s"][method]
                r["threads"] = timing["threads"]
            if "times_s" in r:
                print(f"{method:5s} L={length:5d}  {_fmt_time(r['times_s'])} ms over {len(r['times_s'])} passes, "
                      f"peak +{r['peak_growth_mb']:.0f} MB", flush=True)
    elapsed = time.time() - t_start
    args.load_end = os.getloadavg()[0]

    text = render(args, results, command, masked, elapsed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


def _subprocess(worker_args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.rem_speed", *worker_args], capture_output=True,
                          text=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"worker {worker_args[:3]} failed (rc {proc.returncode}):\n{proc.stderr}", flush=True)
        return {"error": f"failed (rc {proc.returncode}): {tail[0][:80]}"}
    return json.loads(line[0][len("RESULT "):])


def _summary(args, results) -> list[str]:
    lines = []
    scanned = [L for L in args.lengths if "times_s" in results.get(("dense", L), {})
               and "times_s" in results.get(("scan", L), {})]
    if scanned:
        from tsrec.nn.rem import SCAN_MIN_LENGTH

        quicker = [L for L in scanned if statistics.median(results[("scan", L)]["times_s"])
                   < statistics.median(results[("dense", L)]["times_s"])]
        lines.append(f"The recurrence was faster than dense at L = {', '.join(map(str, quicker)) or 'none'} of "
                     f"{', '.join(map(str, scanned))}; `SCAN_MIN_LENGTH` = {SCAN_MIN_LENGTH} sends square REMs from "
                     f"L = {SCAN_MIN_LENGTH} to it.")
    both = [L for L in args.lengths if "times_s" in results.get(("dense", L), {})
            and "times_s" in results.get(("fft", L), {})]
    if both:
        faster = {L: statistics.median(results[("fft", L)]["times_s"])
                  < statistics.median(results[("dense", L)]["times_s"]) for L in both}
        fft_wins = [L for L in both if faster[L]]
        dense_wins = [L for L in both if not faster[L]]
        if not fft_wins:
            lines.append(f"Dense was faster at every length measured with both ({', '.join(map(str, both))}).")
        elif not dense_wins:
            lines.append(f"FFT was already faster at the shortest length measured with both ({both[0]}): "
                         f"the crossover lies below L = {both[0]}.")
        else:
            first_fft = min(fft_wins)
            below = max([L for L in dense_wins if L < first_fft], default=None)
            consistent = all(faster[L] for L in both if L >= first_fft)
            where = (f"between L = {below} and L = {first_fft}" if below is not None else f"at or below L = {first_fft}")
            lines.append(f"Crossover (forward+backward time): {where}; FFT is faster from L = {first_fft}"
                         + (" on." if consistent else " on, though not at every longer length (noise)."))
            from tsrec.nn.rem import DENSE_MAX_ENTRIES

            side = math.isqrt(DENSE_MAX_ENTRIES)
            ok = (below is None or side >= below) and side < first_fft
            lines.append(f"`DENSE_MAX_ENTRIES` = {DENSE_MAX_ENTRIES} sends the REMs the recurrence does not take (not "
                         f"square, or per channel) up to {side} x {side} entries to the dense path: "
                         f"{'consistent with' if ok else 'NOT consistent with'} this crossover.")
        mem = [L for L in both if results[("fft", L)]["peak_growth_mb"] < results[("dense", L)]["peak_growth_mb"]]
        if mem:
            lines.append(f"FFT used less peak memory than dense at L = {', '.join(map(str, mem))}.")
    fft_L = [L for L in args.lengths if "times_s" in results.get(("fft", L), {})]
    if len(fft_L) >= 2:
        lo, hi = fft_L[0], fft_L[-1]
        m_lo, m_hi = results[("fft", lo)]["peak_growth_mb"], results[("fft", hi)]["peak_growth_mb"]
        ratio = m_hi / max(m_lo, 1e-9)
        lines.append(f"FFT peak memory growth goes from {m_lo:.0f} MiB at L = {lo} to {m_hi:.0f} MiB at L = {hi} "
                     f"(x{ratio:.1f} for x{hi / lo:.1f} in L; x{(hi / lo) ** 2:.0f} would be quadratic).")
        prev = fft_L[-2]
        m_prev = results[("fft", prev)]["peak_growth_mb"]
        lines.append(f"From L = {prev} to L = {hi} it grows x{m_hi / max(m_prev, 1e-9):.2f} for x{hi / prev:.2f} in L "
                     f"({'about linear' if m_hi / max(m_prev, 1e-9) < 1.5 * hi / prev else 'faster than linear'}; "
                     "at short L a fixed overhead dominates).")
        if 8192 in fft_L:
            m = results[("fft", 8192)]["peak_growth_mb"]
            lines.append(f"At L = 8192 the FFT path peaks at {m:.0f} MiB ({m * 2 ** 20 / 1e9:.2f} GB) above its inputs: "
                     f"{'under' if m * 2 ** 20 < 2e9 else 'OVER'} 2 GB.")
    return lines


def render(args, results, command, masked, elapsed) -> str:
    import torch

    from tsrec.nn.rem import DENSE_MAX_ENTRIES, SCAN_MIN_LENGTH

    threads = next((r["threads"] for r in results.values() if "threads" in r), args.threads)
    mem_total = mem_total_gb()
    dirty = git_dirty(["tsrec/nn/rem.py", "benchmarks/rem_speed.py"])
    out = [
        "# REM speed: dense `P @ V` vs the chunked recurrence vs the FFT Toeplitz product",
        "",
        "One RSA layer's REM part, forward + backward (gradients to `V` and to every REM scalar), CPU, float32.",
        "",
        f"- command: `{command}`",
        f"- git commit: `{git_commit()}`" + (" (with uncommitted changes to the benchmarked files)" if dirty else ""),
        f"- machine: {cpu_model()}, {os.cpu_count()} cores visible (shared with other jobs), torch "
        f"{torch.__version__} run with {threads} thread{'s' if threads != 1 else ''} (`--threads`)" + (f", {mem_total:.0f} GB RAM" if mem_total else "") + f", Python {platform.python_version()}",
        f"- date: {_dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}; whole run {elapsed:.0f} s"
        + (f"; 1-min load average {args.load_start:.1f} at the start, {args.load_end:.1f} at the end"
           if hasattr(args, "load_end") else ""),
        f"- shapes: batch {args.batch}, {args.heads} heads, head size {args.head_dim}; "
        f"REM kinds {KINDS if args.heads == sum(KINDS) else (args.heads, 0, 0, 0, 0, 0)} (dilation {DILATION}), "
        f"{'masked' if masked else 'unmasked'}",
        f"- time: median (min-max) milliseconds per forward+backward pass; per length one fresh subprocess times "
        f"both methods alternately, {args.warmup} warm-up pass(es) each, then at least {args.repeats} timed passes "
        f"each and more (up to {args.max_repeats}) until {args.min_time:g} s per method are timed",
        "- memory: peak resident set growth of a fresh subprocess (one per method and length) during its first, "
        "cold forward+backward pass (after one tiny L = 8 pass that loads lazily initialised kernels), over its "
        "resident size just before that pass (inputs already allocated)",
        f"- `DENSE_MAX_ENTRIES` when run: {DENSE_MAX_ENTRIES} (= {DENSE_MAX_ENTRIES ** 0.5:.0f}^2); "
        f"`SCAN_MIN_LENGTH`: {SCAN_MIN_LENGTH} (square REMs from that length take the recurrence)",
        "",
    ]
    methods = [m for m in METHODS if m in args.methods]
    others = [m for m in methods if m != "dense"]
    out += ["| L | " + " | ".join(f"{m} time ms" for m in methods) + " | " + " | ".join(f"dense/{m}" for m in others)
            + " | " + " | ".join(f"{m} peak MiB" for m in methods) + " |",
            "|---:|" + "---:|" * (2 * len(methods) + len(others))]
    for L in args.lengths:
        cases = {m: results.get((m, L), {}) for m in methods}
        cells = [str(L)] + [_fmt_time(r["times_s"]) if "times_s" in r else r.get("skipped", "not run")
                            for r in cases.values()]
        d = cases.get("dense", {})
        for m in others:
            r = cases[m]
            cells.append(f"{statistics.median(d['times_s']) / statistics.median(r['times_s']):.2f}"
                         if "times_s" in d and "times_s" in r else "-")
        cells += [f"{r['peak_growth_mb']:.0f}" if "peak_growth_mb" in r else "-" for r in cases.values()]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", *_summary(args, results), ""]
    sources = {r["peak_source"] for r in results.values() if "peak_source" in r}
    if sources:
        out.append(f"Peak memory read from: {', '.join(sorted(sources))}.")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
