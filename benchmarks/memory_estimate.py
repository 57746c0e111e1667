"""The planner's memory estimate against the measured peak of real jobs on the CPU.

    .venv/bin/python benchmarks/memory_estimate.py [--quick | --smoke] [--json PATH]

For each group size N (default 1, 5, 20): one job of N bert-tiny students (random init; the paper's knowledge
types and strategies in turn, as in grid_throughput.py) on polarity, batch 32, every batch padded/truncated to
exactly 128 tokens, 2 optimizer steps and the end-of-epoch evaluation (on one dev batch), run through
`run_job` in a fresh subprocess with a teacher (a randomly initialised BERT-base shape by default, or the
offline MiniLM). Measured: the process's peak resident memory (``ru_maxrss``) minus its resident memory just
before the job (the baseline the estimate leaves out: torch, transformers and kdgrid imported and warmed up by a
tiny model's step, the tokenizer and the tokenized task). Estimated:
`kdgrid.grid.estimate_job_memory_gb` of the same trials. The ratio estimate / measured says how much room the
planner keeps (> 1: it over-estimates, the safe side).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BERT_BASE,
    MINILM,
    bench_options,
    emit,
    fix_batch_width,
    machine,
    peak_rss_mb,
    require_fixed_batches,
    run_worker,
    teacher_path,
    write_json,
)

TASK = "polarity"
MIB = 2**20


def current_rss_mb() -> float:
    """This process's resident memory now, in MiB (``VmRSS`` of ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def group_trials(teacher: str, students: int, steps: int, batch_size: int, length: int) -> list[Any]:
    """``students`` bert-tiny trials of one group: knowledge i mod 10 and strategy (i + i // 10) mod 5."""
    from kdgrid.paper import PAPER_KNOWLEDGE, PAPER_STRATEGIES
    from kdgrid.trial import Trial

    return [
        Trial(
            task=TASK,
            teacher=teacher,
            student="bert-tiny",
            init="random",
            knowledge=(PAPER_KNOWLEDGE[i % len(PAPER_KNOWLEDGE)],),
            strategy=PAPER_STRATEGIES[(i + i // len(PAPER_KNOWLEDGE)) % len(PAPER_STRATEGIES)],
            beta=1.0,
            batch_size=batch_size,
            max_length=length,
            epochs=1,
            max_train_samples=batch_size * steps,
            seed=0,
            options=bench_options(batch_size),
        )
        for i in range(students)
    ]


def warm_up(trial: Any) -> None:
    """Bring into the process what the estimate leaves out (libraries imported on first use, the tokenizer,
    the tokenized data) before the baseline is read: a 1-layer width-32 BERT's forward and backward, and the
    task tokenized with the teacher's tokenizer (a job reads it again from the disk cache)."""
    import torch

    from kdgrid.core.data import get_task
    from kdgrid.core.data.tokenization import tokenize_task
    from kdgrid.core.model.models import bert_config, load_tokenizer
    from kdgrid.core.model.shapes import resolve_teacher, student_shape

    task = get_task(trial.task)
    teacher = resolve_teacher(trial.teacher, trial.task)
    tokenize_task(task, load_tokenizer(teacher), trial.max_length, max_train_samples=trial.max_train_samples)
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification(bert_config(student_shape("w32-l1"), task.num_labels))
    ids = torch.ones(2, 8, dtype=torch.long)
    model(input_ids=ids, attention_mask=ids, output_hidden_states=True).logits.sum().backward()


def worker_main(args: argparse.Namespace) -> None:
    import gc

    import torch

    from kdgrid.core.training.train import run_job
    from kdgrid.grid import estimate_job_memory_gb

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    fix_batch_width(args.length)
    trials = group_trials(args.teacher_path, args.students, args.steps, args.batch_size, args.length)
    warm_up(trials[0])
    gc.collect()
    baseline = current_rss_mb()
    results = run_job(trials, device="cpu")
    failed = [r.error_message for r in results if r.status != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} trial(s) failed: {failed[0]}")
    require_fixed_batches()
    measured = peak_rss_mb() - baseline
    estimate = estimate_job_memory_gb(trials) * 1024
    emit(
        {
            "students": args.students,
            "baseline_rss_mb": round(baseline, 1),
            "measured_mb": round(measured, 1),
            "estimate_mb": round(estimate, 1),
            "estimate_over_measured": estimate / measured,
        }
    )


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    config = report["config"]
    table = Table(
        title=f"memory estimate vs measured peak RSS: bert-tiny students, {config['teacher']} teacher, "
        f"batch {config['batch_size']} x {config['length']} tokens, {config['steps']} steps"
    )
    for column in ("students", "baseline RSS MiB", "measured MiB", "estimate MiB", "estimate / measured"):
        table.add_column(column, justify="right")
    for row in report["runs"]:
        table.add_row(
            str(row["students"]),
            f"{row['baseline_rss_mb']:.0f}",
            f"{row['measured_mb']:.0f}",
            f"{row['estimate_mb']:.0f}",
            f"{row['estimate_over_measured']:.2f}x",
        )
    Console(width=140).print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="groups of 1 and 5, two workers at a time")
    parser.add_argument("--smoke", action="store_true", help="groups of 1 and 2, MiniLM, batch 4 (tests)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--sizes", default="1,5,20", help="comma-separated group sizes")
    parser.add_argument("--teacher", default=BERT_BASE, choices=(MINILM, BERT_BASE))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (0: torch default)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--students", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--teacher-path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.teacher, args.batch_size, args.length = "1,2", MINILM, 4, 32
    elif args.quick:
        args.sizes = "1,5"
    if args.worker:
        worker_main(args)
        return

    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    config = {k: getattr(args, k) for k in ("teacher", "steps", "batch_size", "length", "threads")}
    config["sizes"] = sizes
    path = teacher_path(args.teacher)  # written once, before any worker needs it

    def measure(students: int) -> dict[str, Any]:
        common = [
            "--worker", "--students", str(students), "--teacher-path", path, "--steps", str(args.steps),
            "--batch-size", str(args.batch_size), "--length", str(args.length), "--threads", str(args.threads),
        ]  # fmt: skip
        return run_worker(Path(__file__), common)

    # --quick and --smoke run two workers at a time (one per core, each on one thread) to stay under a minute;
    # a full run measures one group after the other.
    side_by_side = (args.quick or args.smoke) and args.threads == 1 and (os.cpu_count() or 1) >= 2
    config["workers_side_by_side"] = 2 if side_by_side else 1
    with ThreadPoolExecutor(max_workers=config["workers_side_by_side"]) as pool:
        runs = list(pool.map(measure, sizes))
    ratios = [run["estimate_over_measured"] for run in runs]
    report: dict[str, Any] = {
        "config": config,
        "machine": machine(),
        "runs": runs,
        "min_estimate_over_measured": min(ratios),
        "max_estimate_over_measured": max(ratios),
    }
    print_table(report)
    write_json(args.json, report)
    if not args.json:
        print(json.dumps({str(run["students"]): round(run["estimate_over_measured"], 2) for run in runs}))


if __name__ == "__main__":
    main()
