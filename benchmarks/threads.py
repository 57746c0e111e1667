"""A job's step time with kdgrid's thread rule against torch's default thread count, on a loaded machine.

    .venv/bin/python benchmarks/threads.py [--processes 2] [--load N] [--students 2] [--steps 16]
        [--teacher minilm|tiny] [--smoke] [--json PATH]

``--processes`` training processes start at once (as ``local_workers`` does), each a job of ``--students``
students of BERT-tiny's shape (2 x 128) on a generated task, while ``--load`` other processes keep CPUs busy
(pure-Python busy loops, as other users' work; default: one per CPU). Each configuration runs twice: with
torch's default thread count (every process takes the machine's cores) and with the rule of
`kdgrid.launch.threads` (the usable CPUs divided by the training processes). For each, the figures are the mean
wall seconds of one shared step (a teacher pass and a step of every student, the first step left out) and the
CPU seconds the process spent on it (all its threads), averaged over the processes; the load average is
recorded beside them. ``--smoke``: the tiny random teacher, 4 steps, 1 process and no load (the figures then only
show that it runs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import ROOT

RESULT_PREFIX = "BENCH-RESULT "
MODES = ("torch_default", "kdgrid_rule")
BATCH = 16
LENGTH = 32


def worker(args: argparse.Namespace) -> None:
    """One training process: its threads by ``args.mode``, one job of ``args.students`` students."""
    from kdgrid.launch.threads import training_threads, use_threads

    if args.mode == "kdgrid_rule":
        use_threads(training_threads(None, args.processes))
    import torch
    from _common import bench_options, teacher_path

    from kdgrid.core.training.train import run_job
    from kdgrid.trial import Trial

    trials = [
        Trial(task=f"synthetic-single-binary-n{args.steps * BATCH}-d16", teacher=teacher_path(args.teacher),
              student="w128-l2-h2-f512", init="random", knowledge=("hidden_mse",), strategy="Last", epochs=1,
              batch_size=BATCH, max_length=LENGTH, lr=1e-3, seed=seed, options={**bench_options(16), "data_seed": 0})
        for seed in range(args.students)
    ]  # fmt: skip
    marks: list[tuple[float, float]] = []

    def on_step(done: int, total: int) -> None:
        marks.append((time.perf_counter(), time.process_time()))

    results = run_job(trials, device="cpu", on_step=on_step)
    failed = [r.error_message for r in results if r.status != "done"]
    if failed:
        raise SystemExit(f"a trial failed: {failed[0]}")
    walls = [b[0] - a[0] for a, b in itertools.pairwise(marks)]
    cpus = [b[1] - a[1] for a, b in itertools.pairwise(marks)]
    result = {
        "threads": torch.get_num_threads(),
        "step_wall_s": sum(walls) / len(walls),
        "step_cpu_s": sum(cpus) / len(cpus),
        "steps_timed": len(walls),
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def busy_loop() -> None:
    """A CPU hog (another user's work), until killed."""
    while True:
        pass


def measure(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """Start the load, then ``args.processes`` workers at once; their mean figures and the load average."""
    script = str(Path(__file__).resolve())
    load = [subprocess.Popen([sys.executable, script, "--busy"]) for _ in range(args.load)]
    try:
        time.sleep(1.0 if load else 0.0)
        command = [sys.executable, script, "--worker", "--mode", mode, "--processes", str(args.processes),
                   "--students", str(args.students), "--steps", str(args.steps), "--teacher", args.teacher]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        started = time.perf_counter()
        workers = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
            for _ in range(args.processes)
        ]
        outputs = [w.communicate() for w in workers]
        wall = time.perf_counter() - started
        load_avg = os.getloadavg()[0]
    finally:
        for process in load:
            process.kill()
            process.wait()
    figures = []
    for process, (out, err) in zip(workers, outputs, strict=True):
        lines = [line for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
        if process.returncode != 0 or not lines:
            raise SystemExit(f"worker failed ({process.returncode}):\n{err[-3000:]}")
        figures.append(json.loads(lines[-1][len(RESULT_PREFIX) :]))
    n = len(figures)
    return {
        "threads_per_process": figures[0]["threads"],
        "step_wall_s": round(sum(f["step_wall_s"] for f in figures) / n, 4),
        "step_cpu_s": round(sum(f["step_cpu_s"] for f in figures) / n, 4),
        "processes_wall_s": round(wall, 1),
        "load_1min_at_end": round(load_avg, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--load", type=int, default=None, help="busy processes beside (default: one per CPU)")
    parser.add_argument("--students", type=int, default=2)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--teacher", default="minilm", choices=("minilm", "tiny"))
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--busy", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default=MODES[0], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.busy:
        busy_loop()
    if args.worker:
        worker(args)
        return
    if args.smoke:
        args.teacher, args.steps, args.processes, args.load, args.students = "tiny", 4, 1, 0, 1
    if args.load is None:
        args.load = os.cpu_count() or 1
    from _machine import machine

    report: dict[str, Any] = {
        "machine": machine(),
        "config": {"processes": args.processes, "load": args.load, "students": args.students,
                   "steps": args.steps, "teacher": args.teacher, "batch": BATCH, "length": LENGTH},
    }
    for mode in MODES:
        report[mode] = measure(args, mode)
        print(mode, report[mode], flush=True)
    default, rule = report["torch_default"], report["kdgrid_rule"]
    report["default_over_rule_wall"] = round(default["step_wall_s"] / rule["step_wall_s"], 2)
    report["default_over_rule_cpu"] = round(default["step_cpu_s"] / rule["step_cpu_s"], 2)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
