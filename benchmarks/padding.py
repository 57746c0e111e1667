"""What dynamic, length-grouped batches save against fixed 128-token padding.

    .venv/bin/python benchmarks/padding.py [--quick | --smoke] [--json PATH]

For each task (polarity, and the generated pair task ``synthetic-pair-3class``), tokenized at ``max_length``
128, one epoch's batches (batch 32) three ways over the same examples:

- ``fixed``: every batch padded to 128 tokens (what a static-shape pipeline does);
- ``dynamic``: random batches padded to their own longest example (``chunk_batches=1``: no length grouping);
- ``grouped``: kdgrid's batches, length-grouped within chunks, padded to their own longest example.

Reported: tokens computed per epoch (batch x width, summed), the share of them that is padding, and the ratio
fixed / grouped. Step time: one kdgrid training step (MiniLM teacher forward + a bert-tiny student's step with
soft labels + hidden_mse on Last-1) on a sample of the grouped batches and on the same batches padded to 128
(same examples, only the padding differs), scaled to the epoch; the ratio is fixed / grouped.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MINILM, NOT_MEANT_TO_BE_ACCURATE, machine, mean_step, pad_batch, teacher_path, write_json

TASKS = ("polarity", "synthetic-pair-3class")
FIXED = 128


def token_counts(batches: Any) -> dict[str, int]:
    """Tokens computed (batch x width) and real tokens over a list of batches."""
    computed = real = 0
    for batch in batches:
        mask = batch["attention_mask"]
        computed += mask.numel()
        real += int(mask.sum())
    return {"computed": computed, "real": real}


def time_steps(task: str, batches: list[dict], width: int | None, batch_size: int) -> list[float]:
    """Seconds of each kdgrid training step (teacher forward + student step) over ``batches``, each padded to
    ``width`` when given; a fresh student each call so both variants start from the same weights."""
    from kdgrid.core.model.capture import FeatureCapture
    from kdgrid.core.training.train import (
        load_job,
        make_runtime,
        set_up_trial,
        setup_student,
        teacher_capture_needs,
        teacher_forward,
        train_step,
    )
    from kdgrid.trial import Trial

    trial = Trial(
        task=task,
        teacher=teacher_path(MINILM),
        student="bert-tiny",
        init="random",
        knowledge=("hidden_mse",),
        strategy="Last-1",
        batch_size=batch_size,
        max_length=FIXED,
        epochs=1,
        options=NOT_MEANT_TO_BE_ACCURATE,
    )
    job = load_job(trial, make_runtime("cpu"))
    run = setup_student(set_up_trial(trial, job.teacher), job, None)
    capture = FeatureCapture(job.teacher_model, *teacher_capture_needs([run]))
    times = []
    for step, batch in enumerate([batches[0], *batches], start=1):  # the repeated first batch is a warm-up
        if width is not None:
            batch = pad_batch(batch, width)
        started = time.perf_counter()
        teacher = teacher_forward(job, capture, batch)
        train_step(run, job, batch, teacher, step)
        times.append(time.perf_counter() - started)
    return times


def measure_task(task: str, batch_size: int, timed_batches: int) -> dict[str, Any]:
    from kdgrid.core.data import get_task, tokenize_task, train_batches
    from kdgrid.core.model.models import load_tokenizer
    from kdgrid.core.model.shapes import resolve_teacher

    tokenizer = load_tokenizer(resolve_teacher(teacher_path(MINILM), task))
    train = tokenize_task(get_task(task), tokenizer, FIXED)["train"]
    grouped = list(train_batches(train, batch_size, 0, 0))
    dynamic = list(train_batches(train, batch_size, 0, 0, chunk_batches=1))
    out: dict[str, Any] = {"examples": len(train), "batches": len(grouped)}
    counts = {
        "fixed": {"computed": len(train) * FIXED, "real": int(train.lengths.sum())},
        "dynamic": token_counts(dynamic),
        "grouped": token_counts(grouped),
    }
    for name, count in counts.items():
        out[name] = {**count, "padding_share": 1 - count["real"] / count["computed"]}
    out["padded_token_ratio"] = counts["fixed"]["computed"] / counts["grouped"]["computed"]
    out["dynamic_over_grouped_tokens"] = counts["dynamic"]["computed"] / counts["grouped"]["computed"]
    stride = max(1, len(grouped) // timed_batches)
    sample = grouped[::stride][:timed_batches]  # every stride-th batch: a spread of widths
    scale = len(grouped) / len(sample)
    fixed_step = mean_step(time_steps(task, sample, FIXED, batch_size))
    grouped_step = mean_step(time_steps(task, sample, None, batch_size))
    out["timed_batches"] = len(sample)
    out["fixed"]["epoch_s"] = fixed_step * len(sample) * scale
    out["grouped"]["epoch_s"] = grouped_step * len(sample) * scale
    out["step_time_ratio"] = fixed_step / grouped_step
    return out


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"padding: fixed {FIXED} tokens vs dynamic vs length-grouped (batch {report['config']['batch_size']})"
    )
    for column in ("task", "batching", "tokens computed", "padding share", "epoch step time (s)"):
        table.add_column(column, justify="right")
    for task in report["tasks"]:
        figures = report[task]
        for name in ("fixed", "dynamic", "grouped"):
            row = figures[name]
            epoch = f"{row['epoch_s']:.1f}" if "epoch_s" in row else "-"
            table.add_row(task, name, f"{row['computed']:,}", f"{row['padding_share']:.0%}", epoch)
        table.add_row(task, "fixed / grouped tokens", f"{figures['padded_token_ratio']:.2f}x", "", "")
        table.add_row(task, "fixed / grouped step time", f"{figures['step_time_ratio']:.2f}x", "", "")
    Console(width=160).print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="time 6 batches per task")
    parser.add_argument("--smoke", action="store_true", help="time 2 batches of 8 (tests)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--timed-batches", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.timed_batches, args.batch_size = 2, 8
    elif args.quick:
        args.timed_batches = 6
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    config = {"batch_size": args.batch_size, "timed_batches": args.timed_batches, "max_length": FIXED}
    report: dict[str, Any] = {"config": config, "machine": machine(), "tasks": list(TASKS)}
    for task in TASKS:
        report[task] = measure_task(task, args.batch_size, args.timed_batches)
    print_table(report)
    write_json(args.json, report)


if __name__ == "__main__":
    main()
