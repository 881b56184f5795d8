"""Everything a lent GPU machine runs, in one call, within a wall-clock budget it enforces (issue 40).

Run through ``benchmarks/gpu_all.sh`` (which installs the bundle's wheels offline first)::

    bash benchmarks/gpu_all.sh BUNDLE OUT [--budget-s 540] [--jobs 12] [--threads 1] [--rehearse]

The stages, in this order, each a process group of its own that is stopped (SIGTERM, then SIGKILL) at
its deadline:

1. ``gpu_tests``: ``pytest -m gpu`` on :data:`GPU_TESTS`, at most :data:`TESTS_S` seconds;
2. ``table1``: the RSA paper's Table 1 at d_model 512 (``configs/paper_table_d512.toml``: informer and
   rsa_informer, 16 settings, seed 0, bf16-mixed), ``--jobs`` runs at once on the one GPU, the settings
   with the least training work first and a setting's two models together (``--order cost``); no run
   starts whose projected end lies past the stage's deadline (``--deadline``), which leaves the limits
   of the speed stages after it and :data:`MARGIN_S`;
3. ``speed``: ``benchmarks.speed`` on the GPU (:data:`SPEED_MODELS` at :data:`SPEED_LENGTHS`, bf16-mixed,
   eager, with each step's operator count), at most :data:`SPEED_S` seconds;
4. ``speed_compiled``: the same with the networks under ``torch.compile``, at most :data:`COMPILED_S`
   seconds (a length whose compiling would overrun is skipped);
5. ``study_lookback``: what the budget leaves, for issue 50's pre-registered long look-back study
   (``configs/long_lookback_five.toml``, seed 0), with the same order and deadline rules.

Every stage writes into a temporary work folder; its result CSVs, this run's log (``gpu_all.log``: every
stage's command and output) and summary (``gpu_all.json``: per stage its command, seconds and how it
ended; the GPU; the budget) are copied to ``OUT`` every :data:`COPY_EVERY_S` seconds and at the end:
at most eight files, within what a device call brings back (8 files, no folders needed). Back here,
``python -m benchmarks.run --merge OUT/paper_table.csv ...`` brings the rows into ``benchmarks/results``.

``--rehearse`` runs the same stages, code paths and configs on the CPU at toy size: ``--quick`` on
every benchmark (a tiny network, a few batches; ``benchmarks.speed --quick --device cpu``), the GPU
tests collected and skipped, within a budget of its own. ``tests/test_gpu_all.py`` rehearses the
whole script from a bundle installed offline in a clean folder, so that the first GPU call cannot
fail on a path, an import or a missing file.

The estimate that decides what the budget can hold is ``python -m benchmarks.gpu_plan`` (FLOPs
and windows of every Table 1 run, at stated throughputs; ``results/gpu_all_plan.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, command_line, git_commit, now

#: The budget of the whole script on the GPU (the issue's 9 minutes), and of a rehearsal on the CPU.
BUDGET_S = 540.0
REHEARSAL_BUDGET_S = 1200.0
TESTS_S = 60.0
#: The issue's minute. On the H200 informer alone took 20.6 s for four lengths (call 1); in call 2 a 45 s
#: stage's own budget skipped every length after the first, so a shorter stage loses the long lengths.
SPEED_S = 60.0
#: A rehearsal's stage limits are this many times the GPU's: the fixed costs (interpreters, imports, a
#: benchmark's first call) take longer on a 2-core machine than the toy sizes save.
REHEARSAL_SLOWER = 3.0
#: Left after the speed stage's deadline for copying and the summary.
MARGIN_S = 10.0
#: A stage with less time than this left is skipped (it could not finish a run).
MIN_STAGE_S = 20.0
#: Seconds a stopped stage gets between SIGTERM and SIGKILL.
GRACE_S = 5.0
COPY_EVERY_S = 5.0
#: Training runs at once: the GPU machine has 16 cores, and an eager step of these networks is bound by the
#: host's dispatch of its 929-1,579 operators (results/gpu_all_plan.md), so one process per core, leaving
#: cores for the stage runner and the data.
JOBS = 12
TABLE1 = "benchmarks/configs/paper_table_d512.toml"
LONG_LOOKBACK = "benchmarks/configs/long_lookback_five.toml"
#: The look-back study's datasets that a call carries: ETTm2 (9.3 MB) does not fit the 64 MiB that travel
#: beside Table 1's data and the wheels (the bundle is 55.7 MiB without it).
LOOKBACK_DATASETS = ("ETTh1", "ETTh2", "ETTm1", "weather")
#: The speed table's models and input lengths (issue 50: every input length, both model pairs).
SPEED_MODELS = ("informer", "rsa_informer", "patchtst", "rsa_patchtst")
SPEED_LENGTHS = (48, 96, 336, 720, 1440)
#: The compiled speed table's own budget, models and lengths: compiling a model at a length takes tens of
#: seconds, so the two model pairs at the input where RSA's overhead was measured (48) and one long input.
COMPILED_S = 120.0
COMPILED_MODELS = SPEED_MODELS
COMPILED_LENGTHS = (48, 336)
#: The files copied to OUT (at most 8 come back from a device call): a work file -> its name in OUT.
RESULT_FILES = {"paper_table.csv": "paper_table.csv", "gpu_speed.csv": "gpu_speed.csv", "speed.csv": "speed.csv",
                "compiled/gpu_speed.csv": "gpu_speed_compiled.csv", "compiled/speed.csv": "speed_compiled.csv",
                "long_lookback_five.csv": "long_lookback_five.csv"}
LOG, SUMMARY = "gpu_all.log", "gpu_all.json"
#: The modules with tests marked ``gpu`` that the stage runs (test_benchmarks' compiled speed run, 1-2 minutes
#: of compiling, does not fit its minute; the speed stage runs that code path eager).
GPU_TESTS = ("tests/test_gpu.py", "tests/test_training.py", "tests/test_srupp.py")
#: The stages of a call, in their order (module docstring); ``--stages`` runs some of them, in its order.
STAGES = ("gpu_tests", "table1", "speed", "speed_compiled", "study_lookback")


@dataclass
class Stage:
    """One stage: its command (run from the repository root), its own time limit (None: until the
    budget's end less ``reserve`` seconds kept for the stages after it)."""

    name: str
    argv: list[str]
    limit_s: float | None
    reserve_s: float = 0.0


@dataclass
class Ended:
    """How a stage ended: ``ok``, ``failed`` (exit code ``rc``), ``stopped`` at its deadline, or ``skipped``
    (``why``)."""

    name: str
    command: str
    status: str
    seconds: float = 0.0
    rc: int | None = None
    why: str = ""


@dataclass
class Plan:
    """What :func:`main` runs: the stages, the budget and where things go."""

    stages: list[Stage]
    budget_s: float
    work: Path
    out: Path
    rehearse: bool
    ended: list[Ended] = field(default_factory=list)


def stages(work: Path, *, jobs: int, threads: int, rehearse: bool, end: float,
           names: tuple[str, ...] = STAGES) -> list[Stage]:
    """The stages ``names`` (module docstring), in that order, for a budget ending at ``end`` (epoch
    seconds). A stage without a limit of its own runs until the end less a reserve: :data:`MARGIN_S` and the
    limits of the limited stages after it; a training stage's ``benchmarks.run --deadline`` is that deadline.
    ``rehearse``: the same commands at toy size on the CPU, with :data:`REHEARSAL_SLOWER` times the limits."""
    python = interpreter()
    slower = REHEARSAL_SLOWER if rehearse else 1.0
    quick = ["--quick"] if rehearse else []
    device = ["--device", "cpu"] if rehearse else ["--device", "cuda"]
    limits = {"gpu_tests": TESTS_S * slower, "speed": SPEED_S * slower, "speed_compiled": COMPILED_S * slower}

    def reserve(name: str) -> float:
        return MARGIN_S + sum(limits.get(later, 0.0) for later in names[names.index(name) + 1:])

    def training(name: str, config: str, selection: list[str], rehearsed: list[str]) -> Stage:
        argv = [*python, "-m", "benchmarks.run", config, *selection, "--out-dir", str(work), "--jobs", str(jobs),
                "--threads", str(threads), "--precision", "bf16-mixed", "--order", "cost",
                "--deadline", f"{end - reserve(name):.0f}", *quick, *(rehearsed if rehearse else [])]
        return Stage(name, argv, None, reserve_s=reserve(name))

    def build(name: str) -> Stage:
        # rehearsed: a few settings of each config take every code path; toy runs prove nothing more in number
        if name == "gpu_tests":
            return Stage(name, [*python, "-m", "pytest", "-m", "gpu", "-v", "-p", "no:cacheprovider", *GPU_TESTS],
                         limits[name], reserve_s=reserve(name))
        if name == "table1":
            return training(name, TABLE1, ["--seeds", "0"], ["--dataset", "ETTh1", "WTH", "--horizon", "24", "48"])
        if name in ("speed", "speed_compiled"):  # its own budget (which skips a length that would overrun)
            compiled = name == "speed_compiled"  # leaves time for imports
            models, lengths = (COMPILED_MODELS, COMPILED_LENGTHS) if compiled else (SPEED_MODELS, SPEED_LENGTHS)
            if rehearse:  # compiling on 2 CPU cores takes minutes a model: one pair, one length
                models, lengths = (("patchtst", "rsa_patchtst"), (96,)) if compiled else (SPEED_MODELS, (48, 96))
            return Stage(name, [*python, "-m", "benchmarks.speed", *device, "--precision", "bf16-mixed",
                                "--compile", "on" if compiled else "off", "--models", *models,
                                "--lengths", *map(str, lengths),
                                "--budget-minutes", f"{0.75 * limits[name] / 60:.2f}",
                                "--out-dir", str(work / "compiled" if compiled else work), *quick],
                         limits[name], reserve_s=reserve(name))
        return training(name, LONG_LOOKBACK, ["--seeds", "0", "--dataset", *LOOKBACK_DATASETS],
                        ["--dataset", "ETTh1", "--horizon", "96"])

    return [build(name) for name in names]


def interpreter() -> list[str]:
    """This interpreter, with ``-S`` when it runs without site-packages (a rehearsal of the GPU image)."""
    return [sys.executable, "-S"] if sys.flags.no_site else [sys.executable]


def copy_results(work: Path, out: Path) -> None:
    """Copy the result CSVs that exist in ``work`` to ``out`` (each replaced whole, never half-written)."""
    for name, target in RESULT_FILES.items():
        source = work / name
        if source.is_file():
            partial = out / f".{target}.part"
            shutil.copyfile(source, partial)
            partial.replace(out / target)


def run_stage(stage: Stage, deadline: float, plan: Plan, log: Any) -> Ended:
    """Run ``stage`` in a process group of its own until it ends or ``deadline`` (epoch seconds), copying
    results every :data:`COPY_EVERY_S`; at the deadline stop the whole group (its worker processes too)."""
    command = shlex.join(stage.argv)
    left = deadline - time.time()
    if left < MIN_STAGE_S:
        return Ended(stage.name, command, "skipped", why=f"{max(left, 0):.0f} s left of the budget")
    log.write(f"\n===== {stage.name} (at most {left:.0f} s; {now()}): {command}\n")
    log.flush()
    started = time.time()
    process = subprocess.Popen(stage.argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    status = None
    while status is None:
        try:
            rc = process.wait(timeout=max(0.1, min(COPY_EVERY_S, deadline - time.time())))
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            copy_results(plan.work, plan.out)
            if time.time() >= deadline:
                stop(process)
                status, rc = "stopped", process.returncode
    copy_results(plan.work, plan.out)
    seconds = time.time() - started
    log.write(f"===== {stage.name}: {status} after {seconds:.1f} s (exit code {rc})\n")
    log.flush()
    return Ended(stage.name, command, status, round(seconds, 1), rc)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group, then SIGKILL after :data:`GRACE_S`."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def device_facts() -> dict[str, Any]:
    """The accelerator and software this call ran on (read in a child, so this process never touches CUDA)."""
    probe = ("import json, torch, platform; c = torch.cuda.is_available(); print(json.dumps({"
             "'gpu': torch.cuda.get_device_name(0) if c else None, 'torch': torch.__version__, "
             "'cuda': torch.version.cuda, 'python': platform.python_version()}))")
    done = subprocess.run([*interpreter(), "-c", probe], capture_output=True, text=True, check=False)
    facts = json.loads(done.stdout) if done.returncode == 0 else {"probe_error": done.stderr.strip()[-2000:]}
    smi = shutil.which("nvidia-smi")
    if smi:
        facts["nvidia_smi"] = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                             capture_output=True, text=True, check=False).stdout.strip()
    facts["cpus"] = os.cpu_count()
    return facts


def write_summary(plan: Plan, started: float, facts: dict[str, Any], argv: list[str]) -> None:
    summary = {"command": command_line("benchmarks.gpu_all", argv), "commit": git_commit(), "date": now(),
               "rehearse": plan.rehearse, "budget_s": plan.budget_s, "seconds": round(time.time() - started, 1),
               **facts, "stages": [asdict(ended) for ended in plan.ended]}
    partial = plan.out / f".{SUMMARY}.part"
    partial.write_text(json.dumps(summary, indent=1) + "\n")
    partial.replace(plan.out / SUMMARY)


def run(plan: Plan, started: float, argv: list[str]) -> int:
    """Run the plan's stages within its budget from ``started``; 0 when every stage that ran ended ok."""
    facts = device_facts()
    end = started + plan.budget_s
    with (plan.out / LOG).open("a") as log:
        log.write(f"gpu_all: {json.dumps(facts)}; budget {plan.budget_s:.0f} s\n")
        for stage in plan.stages:
            stage_end = end - stage.reserve_s
            deadline = stage_end if stage.limit_s is None else min(time.time() + stage.limit_s, stage_end)
            plan.ended.append(run_stage(stage, deadline, plan, log))
            write_summary(plan, started, facts, argv)
    for ended in plan.ended:
        print(f"gpu_all: {ended.name}: {ended.status} ({ended.seconds} s){' ' + ended.why if ended.why else ''}")
    return 0 if all(ended.status in ("ok", "skipped") for ended in plan.ended) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_all", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where the results, log and summary go")
    parser.add_argument("--budget-s", type=float,
                        help=f"wall seconds for everything (default {BUDGET_S:g}; rehearsal {REHEARSAL_BUDGET_S:g})")
    parser.add_argument("--started", type=float, help="when the call began (epoch seconds; default now): the "
                                                      "budget counts from there, the wheels' install included")
    parser.add_argument("--jobs", type=int, default=JOBS, help="training runs at once on the GPU (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads of each run (default 1)")
    parser.add_argument("--rehearse", action="store_true", help="the same stages on the CPU at toy size")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=STAGES,
                        help="run these stages, in this order (default: all, in the order %(default)s)")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.jobs < 1 or args.threads < 1:
        parser.error("--jobs and --threads take whole numbers >= 1")
    started = args.started or time.time()
    budget = args.budget_s or (REHEARSAL_BUDGET_S if args.rehearse else BUDGET_S)
    end = started + budget
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tsrec-gpu-all-"))  # every file a stage writes; OUT gets the results
    plan = Plan(stages(work, jobs=args.jobs, threads=args.threads, rehearse=args.rehearse, end=end,
                       names=tuple(args.stages)),
                budget, work, args.out, args.rehearse)
    return run(plan, started, argv)


if __name__ == "__main__":
    sys.exit(main())
