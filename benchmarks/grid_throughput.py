"""What a grid costs: per-trial training vs kdgrid's grouped jobs vs the lower bound.

    .venv/bin/python benchmarks/grid_throughput.py [--quick | --smoke] [--cases grid[,seeds]] [--json PATH]

The grid: bert-tiny students (random init) x the paper's 10 knowledge types x its 5 matching strategies = 50 trials
on the polarity task, batch 32, every batch padded/truncated to exactly 64 tokens, a fixed number of optimizer
steps, run three ways for each teacher (the offline MiniLM 6 x 384, and a randomly initialised BERT-base shape
12 x 768):

- ``per_trial``: each trial alone through `run_job([trial])`: its own teacher forward every step;
- ``grouped``: `run_job(all trials)`: one teacher forward per batch shared by the group;
- ``lower_bound``: the teacher's forward alone over the same batches, plus each student's training steps alone
  against precomputed teacher features (with the teacher-side loss targets of `kdgrid.core.teacher.targets`
  computed once per batch, by the first student that needs each), timed separately and summed.

The seeds case (``--cases seeds``, not run by default): the first ``--seed-students`` (10) trials of that grid, each with ``--seeds``
(5) student seeds = 50 trials, run two ways:

- ``seeds_one_job``: ``seeds: 5`` (`kdgrid.grid.expand.seed_variants`): the five seeds share one data order, so
  all 50 trials are one job with one teacher forward per batch;
- ``seeds_per_seed_jobs``: the same students and seeds with the data order tied to the seed (kdgrid before
  ``data_seed``): one job per seed, five teacher forwards per batch of the grid.

Both are planned by `kdgrid.grid.plan.plan_jobs` (the worker checks the job counts: 1 and 5).

Times are per optimizer step (the first step of each run is a warm-up and is left out of the mean), so loading,
set-up and the end-of-epoch evaluation are not counted (the evaluation still runs, on one dev batch: the trials'
``max_dev_samples``). Every worker checks that training drew its batches at the fixed width (``fixed_width_batches``
in its JSON) and refuses to report otherwise. ``per_trial`` may time a sample of the trials
(``--per-trial-sample``) and scale to the grid; the JSON says how many it timed. Each configuration runs in its
own subprocess, so its peak RSS is its own (``--smoke``, which measures nothing, runs them all in one).

Every step is timed in wall seconds and in the worker's CPU seconds (``grid_step_cpu_s``, `time.process_time`):
on a shared machine the wall time of a step grows with the load, its CPU time much less, so the ``_cpu`` ratios
compare processes that ran at different moments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BERT_BASE,
    TEACHERS,
    TINY,
    bench_options,
    emit,
    fix_batch_width,
    fixed_batches_served,
    machine,
    mean_step,
    memory_figures,
    require_fixed_batches,
    run_worker,
    teacher_path,
    write_json,
)

MODES = ("per_trial", "grouped", "lower_bound")
SEED_MODES = ("seeds_one_job", "seeds_per_seed_jobs")
CASES = {"grid": MODES, "seeds": SEED_MODES}
TASK = "polarity"


def grid_trials(teacher: str, n_trials: int, steps: int, batch_size: int, length: int) -> list[Any]:
    """The first ``n_trials`` of knowledge x strategy, in an order that spreads both axes (trial i takes
    knowledge i mod 10 and strategy (i + i // 10) mod 5), so a small grid still covers every knowledge type."""
    from kdgrid.paper import PAPER_KNOWLEDGE, PAPER_STRATEGIES
    from kdgrid.trial import Trial

    trials = []
    for index in range(n_trials):
        knowledge = PAPER_KNOWLEDGE[index % len(PAPER_KNOWLEDGE)]
        strategy = PAPER_STRATEGIES[(index + index // len(PAPER_KNOWLEDGE)) % len(PAPER_STRATEGIES)]
        trials.append(
            Trial(
                task=TASK,
                teacher=teacher,
                student="bert-tiny",
                init="random",
                knowledge=(knowledge,),
                strategy=strategy,
                beta=1.0,
                batch_size=batch_size,
                max_length=length,
                epochs=1,
                max_train_samples=batch_size * steps,
                seed=0,
                options=bench_options(batch_size),
            )
        )
    return trials


def seed_trials(
    teacher: str, students: int, seeds: int, steps: int, batch_size: int, length: int, *, shared: bool
) -> list[Any]:
    """The seeds case: the first ``students`` trials of `grid_trials`, each with student seeds 0..seeds-1; with
    ``shared`` the seeds share seed 0's data order (``seeds: N``), else each seed draws its own (one job each)."""
    import dataclasses

    from kdgrid.grid.expand import seed_variants

    base = grid_trials(teacher, students, steps, batch_size, length)
    if shared:
        return [variant for trial in base for variant in seed_variants(trial, seeds)]
    return [dataclasses.replace(trial, seed=seed) for trial in base for seed in range(seeds)]


def sample_indices(n_trials: int, sample: int) -> list[int]:
    """Which trials ``per_trial`` times: steps of 11 through the grid (mod its size), so 10 samples of the
    50-trial grid take each knowledge type once and every strategy twice."""
    chosen: list[int] = []
    index = 0
    while len(chosen) < min(sample, n_trials):
        if index % n_trials not in chosen:
            chosen.append(index % n_trials)
        index += 11 if (index + 11) % n_trials not in chosen else 1
    return chosen


# ---------------------------------------------------------------------------------------------------- workers


class Clock:
    """Wall seconds (`time.perf_counter`) and this process's CPU seconds (`time.process_time`, all its threads)
    of the same intervals. On a shared machine the wall time of a step grows with the load (the step waits for a
    core); its CPU time barely does, so CPU-second ratios compare steps timed at different moments."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._start: tuple[float, float] | None = None

    def start(self) -> None:
        self._start = (time.perf_counter(), time.process_time())

    def stop(self) -> None:
        assert self._start is not None, "Clock.stop before Clock.start"
        self.wall.append(time.perf_counter() - self._start[0])
        self.cpu.append(time.process_time() - self._start[1])

    def lap(self) -> None:
        """Close the interval since the last `start` / `lap` (if any) and open the next."""
        if self._start is not None:
            self.stop()
        self.start()


def _timed_job(trials: list[Any]) -> Clock:
    """Run one job; return the wall and CPU seconds of each shared step (teacher forward + every student's
    step) after the first."""
    from kdgrid.core.training.train import run_job

    clock = Clock()

    def on_step(done: int, total: int) -> None:
        clock.lap()

    # on_step fires after each shared step, so the gaps between its calls are steps 2..N (step 1, the warm-up,
    # also holds the job's start and is not timed).
    results = run_job(trials, device="cpu", on_step=on_step)
    failed = [r for r in results if r.status != "done"]
    if failed:
        raise RuntimeError(
            f"{len(failed)} trial(s) failed: {failed[0].error_type}: {failed[0].error_message}"
        )
    return clock


def _job_step(trials: list[Any]) -> tuple[float, float]:
    """One job's mean (wall, CPU) seconds per step, the warm-up step left out."""
    clock = _timed_job(trials)
    return mean_step([0.0, *clock.wall]), mean_step([0.0, *clock.cpu])


def worker_per_trial(trials: list[Any], sample: int) -> dict[str, Any]:
    chosen = [trials[i] for i in sample_indices(len(trials), sample)]
    steps = [_job_step([trial]) for trial in chosen]
    # mean seconds per step of one trial (its teacher + its student), wall and CPU
    step = sum(w for w, _ in steps) / len(steps)
    cpu = sum(c for _, c in steps) / len(steps)
    return {
        "timed_trials": len(chosen),
        "step_s_per_trial": step,
        "grid_step_s": step * len(trials),
        "grid_step_cpu_s": cpu * len(trials),
    }


def worker_grouped(trials: list[Any]) -> dict[str, Any]:
    wall, cpu = _job_step(trials)
    return {"grid_step_s": wall, "grid_step_cpu_s": cpu}


def worker_seeds(trials: list[Any], expected_jobs: int) -> dict[str, Any]:
    """The jobs `plan_jobs` makes of ``trials`` (their count checked), run one after the other; the grid step is
    the sum of the jobs' mean steps (each job's teacher forward once per batch, plus its students' steps)."""
    from kdgrid.grid.plan import plan_jobs

    jobs = plan_jobs(trials)
    if len(jobs) != expected_jobs:
        raise RuntimeError(f"expected {expected_jobs} job(s) for {len(trials)} trials, planned {len(jobs)}")
    steps = [_job_step(job) for job in jobs]
    return {
        "jobs": len(jobs),
        "job_step_s": [w for w, _ in steps],
        "grid_step_s": sum(w for w, _ in steps),
        "grid_step_cpu_s": sum(c for _, c in steps),
    }


def worker_lower_bound(trials: list[Any], steps: int) -> dict[str, Any]:
    """The teacher's forward alone, then each student's steps against the stored teacher features."""
    from kdgrid.core.data import train_batches
    from kdgrid.core.model.capture import FeatureCapture
    from kdgrid.core.teacher.targets import TeacherTargets
    from kdgrid.core.training.train import (
        load_job,
        make_runtime,
        set_up_trial,
        setup_student,
        teacher_capture_needs,
        teacher_forward,
        train_step,
    )

    job = load_job(trials[0], make_runtime("cpu"))
    batches = list(train_batches(job.tokenized["train"], trials[0].batch_size, trials[0].seed, 0))[:steps]
    runs = [setup_student(set_up_trial(t, job.teacher), job, None) for t in trials]
    capture = FeatureCapture(job.teacher_model, *teacher_capture_needs(runs))
    teacher_clock, features = Clock(), []
    for batch in batches:
        teacher_clock.start()
        features.append(teacher_forward(job, capture, batch))
        teacher_clock.stop()
    # One memo of teacher-side loss targets per batch, kept across students: the first student to need a
    # target computes it, as in a grouped step (they are part of the teacher's precomputed features).
    memos = [TeacherTargets() for _ in batches]
    student_steps: list[float] = []
    student_cpu: list[float] = []
    by_knowledge: dict[str, list[float]] = {}  # where the students' time goes (the README's profile)
    for run in runs:
        clock = Clock()
        for step, (batch, teacher, memo) in enumerate(zip(batches, features, memos, strict=True), start=1):
            clock.start()
            train_step(run, job, batch, teacher, step, memo)
            clock.stop()
        student_steps.append(mean_step(clock.wall))
        student_cpu.append(mean_step(clock.cpu))
        by_knowledge.setdefault("+".join(run.trial.knowledge), []).append(student_steps[-1])
        run.model = run.optimizer = None
    teacher_step, teacher_cpu = mean_step(teacher_clock.wall), mean_step(teacher_clock.cpu)
    students = sum(student_steps)
    return {
        "teacher_step_s": teacher_step,
        "teacher_step_cpu_s": teacher_cpu,
        "students_step_s": students,
        "students_step_cpu_s": sum(student_cpu),
        "student_step_s_mean": students / len(runs),
        "student_step_s_by_knowledge": {k: sum(v) / len(v) for k, v in sorted(by_knowledge.items())},
        "grid_step_s": teacher_step + students,
        "grid_step_cpu_s": teacher_cpu + sum(student_cpu),
    }


def measure_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One mode's figures, measured in this process (after `fix_batch_width`)."""
    import torch

    torch.manual_seed(0)  # the teacher's fresh classifier head: the same in every mode and worker
    served_before = fixed_batches_served()
    if mode in SEED_MODES:
        shared = mode == "seeds_one_job"
        trials = seed_trials(
            args.teacher_path, args.seed_students, args.seeds, args.steps, args.batch_size, args.length,
            shared=shared,
        )  # fmt: skip
        result = worker_seeds(trials, 1 if shared else args.seeds)
    else:
        trials = grid_trials(args.teacher_path, args.trials, args.steps, args.batch_size, args.length)
        if mode == "per_trial":
            result = worker_per_trial(trials, args.per_trial_sample)
        elif mode == "grouped":
            result = worker_grouped(trials)
        else:
            result = worker_lower_bound(trials, args.steps)
    result["fixed_width_batches"] = require_fixed_batches(since=served_before)
    result.update(memory_figures())  # this process's peak so far: the mode's own in a worker of one mode
    return result


def worker_main(args: argparse.Namespace) -> None:
    """Measure the comma-separated modes of ``--worker`` one after the other in this process and emit
    ``{mode: figures}``."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    fix_batch_width(args.length)
    emit({mode: measure_mode(mode, args) for mode in args.worker.split(",")})


# ----------------------------------------------------------------------------------------------------- parent


def _rates(modes: dict[str, dict[str, Any]], trials: int, steps: int, batch: int) -> dict[str, Any]:
    """Each mode's figures with its wall time, trials per hour and student-examples per second."""
    out: dict[str, Any] = {}
    for mode, figures in modes.items():
        step = figures["grid_step_s"]  # seconds for one batch of the whole grid
        wall = step * steps
        out[mode] = {
            **figures,
            "wall_s": wall,
            "trials_per_hour": trials / wall * 3600,
            "examples_per_s": trials * batch / step,  # student-examples trained per second
        }
    return out


def summarise(teacher: str, modes: dict[str, dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    out = _rates(modes, config["trials"], config["steps"], config["batch_size"])
    for suffix, key in (("", "grid_step_s"), ("_cpu", "grid_step_cpu_s")):  # wall ratios, then CPU ratios
        out[f"per_trial_over_grouped{suffix}"] = modes["per_trial"][key] / modes["grouped"][key]
        out[f"grouped_over_lower_bound{suffix}"] = modes["grouped"][key] / modes["lower_bound"][key]
    out["teacher"] = teacher
    return out


def summarise_seeds(teacher: str, modes: dict[str, dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    """The seeds case: both ways' figures and how much longer one job per seed takes than one shared job."""
    trials = config["seed_students"] * config["seeds"]
    out = _rates(modes, trials, config["steps"], config["batch_size"])
    for suffix, key in (("", "grid_step_s"), ("_cpu", "grid_step_cpu_s")):
        out[f"per_seed_jobs_over_one_job{suffix}"] = (
            modes["seeds_per_seed_jobs"][key] / modes["seeds_one_job"][key]
        )
    out["teacher"] = teacher
    return out


def print_seeds_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    config = report["config"]
    table = Table(
        title=f"seeds sharing a teacher pass: {config['seeds']} seeds x {config['seed_students']} bert-tiny "
        f"students, {config['steps']} steps, batch {config['batch_size']} x {config['length']} tokens"
    )
    for column in (
        "teacher", "one job (seeds: N)", "one job per seed", "per-seed jobs / one job", "same, CPU s"
    ):  # fmt: skip
        table.add_column(column, justify="right")
    for teacher in report["teachers"]:
        figures = report["seeds"][teacher]
        one, per_seed = figures["seeds_one_job"], figures["seeds_per_seed_jobs"]
        table.add_row(
            teacher,
            f"{one['grid_step_s']:.3f} s/step ({one['jobs']} job)",
            f"{per_seed['grid_step_s']:.3f} s/step ({per_seed['jobs']} jobs)",
            f"{figures['per_seed_jobs_over_one_job']:.2f}x",
            f"{figures['per_seed_jobs_over_one_job_cpu']:.2f}x",
        )
    Console(width=160).print(table)


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    config = report["config"]
    table = Table(
        title=f"grid throughput: {config['trials']} bert-tiny trials, {config['steps']} steps, "
        f"batch {config['batch_size']} x {config['length']} tokens (per-trial timed on "
        f"{config['per_trial_sample']} and scaled)"
    )
    for column in (
        "teacher",
        "mode",
        "s / grid step",
        "CPU s / grid step",
        "wall (s)",
        "trials / h",
        "examples / s",
        "peak RSS MiB",
    ):
        table.add_column(column, justify="right")
    for teacher in report["teachers"]:
        figures = report[teacher]
        for mode in MODES:
            row = figures[mode]
            table.add_row(
                teacher,
                mode,
                f"{row['grid_step_s']:.3f}",
                f"{row['grid_step_cpu_s']:.3f}",
                f"{row['wall_s']:.1f}",
                f"{row['trials_per_hour']:.0f}",
                f"{row['examples_per_s']:.0f}",
                f"{row['peak_rss_mb']:.0f}",
            )
        for label, key in (("per-trial / grouped", "per_trial_over_grouped"),
                           ("grouped / lower bound", "grouped_over_lower_bound")):  # fmt: skip
            ratios = (f"{figures[key]:.2f}x", f"{figures[key + '_cpu']:.2f}x")
            table.add_row(teacher, label, *ratios, "", "", "", "")
    Console(width=160).print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="5 trials, 2 steps, per-trial timed on 1, two workers at a time"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tests: 2 trials, 2 steps (1 timed), batch 4 x 16 tokens, a tiny random teacher (4 x 64), every "
        "mode in one worker process",
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--per-trial-sample", type=int, default=10, help="trials timed alone (scaled to the grid)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument(
        "--teachers",
        default=",".join(TEACHERS),
        help="comma-separated: minilm,bert-base (tiny: a 4 x 64 random teacher)",
    )
    parser.add_argument(
        "--cases",
        default="grid",
        help="comma-separated: grid,seeds (the seeds case is opt-in; --smoke runs both)",
    )
    parser.add_argument("--seeds", type=int, default=5, help="the seeds case: student seeds per student")
    parser.add_argument("--seed-students", type=int, default=10, help="the seeds case: students per seed")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (0: torch default)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # comma-separated modes, measured in one process
    parser.add_argument("--teacher-path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.trials, args.steps, args.per_trial_sample, args.batch_size, args.length = 2, 2, 1, 4, 16
        args.seeds, args.seed_students, args.teachers, args.cases = 2, 2, TINY, ",".join(CASES)
    elif args.quick:
        args.trials, args.steps, args.per_trial_sample = 5, 2, 1
        args.seed_students = 2
    args.per_trial_sample = min(args.per_trial_sample, args.trials)
    if args.worker:
        unknown = sorted(set(args.worker.split(",")) - set(MODES + SEED_MODES))
        if unknown:
            parser.error(
                f"--worker {args.worker!r}: unknown {unknown}; allowed: {', '.join(MODES + SEED_MODES)}"
            )
        worker_main(args)
        return

    teachers = [t.strip() for t in args.teachers.split(",") if t.strip()]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown or not cases:
        parser.error(f"--cases {args.cases!r}: unknown {unknown}; allowed: {', '.join(CASES)}")
    config = {
        k: getattr(args, k)
        for k in (
            "trials", "steps", "per_trial_sample", "batch_size", "length", "threads", "seeds", "seed_students"
        )
    }  # fmt: skip
    config["cases"] = cases
    report: dict[str, Any] = {"config": config, "machine": machine(), "teachers": teachers}

    def measure(task: tuple[str, tuple[str, ...]]) -> dict[str, dict[str, Any]]:
        teacher, worker_modes = task
        common = [
            "--teacher-path", teacher_path(teacher), "--trials", str(args.trials), "--steps", str(args.steps),
            "--per-trial-sample", str(args.per_trial_sample), "--batch-size", str(args.batch_size),
            "--length", str(args.length), "--threads", str(args.threads), "--seeds", str(args.seeds),
            "--seed-students", str(args.seed_students),
        ]  # fmt: skip
        got = run_worker(Path(__file__), ["--worker", ",".join(worker_modes), *common])
        process_wall = got.pop("process_wall_s")
        return {mode: {**got[mode], "process_wall_s": process_wall} for mode in worker_modes}

    # A full run measures every (teacher, mode) in its own process, one after the other. --quick runs two
    # worker processes at a time, one per core (each on 1 thread), the BERT-base ones first, to stay under a
    # minute. --smoke measures nothing: every mode of its one teacher runs in one worker process (one import of
    # torch and transformers instead of five), so a mode's peak RSS there is the process's peak so far.
    side_by_side = (args.quick or args.smoke) and args.threads == 1 and (os.cpu_count() or 1) >= 2
    config["workers_side_by_side"] = 2 if side_by_side else 1
    modes = tuple(mode for case in cases for mode in CASES[case])
    config["modes_per_worker"] = len(modes) if args.smoke else 1
    if args.smoke:
        tasks = [(teacher, modes) for teacher in teachers]
    else:
        tasks = [(teacher, (mode,)) for teacher in teachers for mode in modes]
    if side_by_side:
        tasks.sort(key=lambda task: task[0] != BERT_BASE)
    for teacher in teachers:
        teacher_path(teacher)  # written once, before any worker needs it
    with ThreadPoolExecutor(max_workers=config["workers_side_by_side"]) as pool:
        measured = {
            (teacher, mode): figures
            for (teacher, _), by_mode in zip(tasks, pool.map(measure, tasks), strict=True)
            for mode, figures in by_mode.items()
        }
    ratios: dict[str, dict[str, float]] = {t: {} for t in teachers}
    if "grid" in cases:
        for teacher in teachers:
            report[teacher] = summarise(teacher, {mode: measured[(teacher, mode)] for mode in MODES}, config)
            for key in ("per_trial_over_grouped", "grouped_over_lower_bound"):
                for suffix in ("", "_cpu"):
                    ratios[teacher][key + suffix] = report[teacher][key + suffix]
        print_table(report)
    if "seeds" in cases:
        report["seeds"] = {
            teacher: summarise_seeds(teacher, {m: measured[(teacher, m)] for m in SEED_MODES}, config)
            for teacher in teachers
        }
        for teacher in teachers:
            for key in ("per_seed_jobs_over_one_job", "per_seed_jobs_over_one_job_cpu"):
                ratios[teacher][key] = report["seeds"][teacher][key]
        print_seeds_table(report)
    write_json(args.json, report)
    if not args.json:
        print(json.dumps(ratios))


if __name__ == "__main__":
    main()
