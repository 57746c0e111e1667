"""Scoring a classifier on a task's dev sets, and timing its forward pass (the paper's latency)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from kdgrid.core.data.batching import eval_batches
from kdgrid.core.metrics import compute_metrics

LATENCY_REPEATS = 10  # timed forward passes (after two warm-up passes); the median is reported


def predictions_of(logits: torch.Tensor, regression: bool) -> torch.Tensor:
    """Class ids (argmax) for a classification task, the scalar output for a regression task."""
    return logits.squeeze(-1).float() if regression else logits.argmax(dim=-1)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    task: Any,
    dev_sets: Mapping[str, Any],
    batch_size: int,
    device: torch.device | str = "cpu",
    align: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> dict[str, dict[str, float]]:
    """``{dev_set: {metric: value}}`` for each tokenized dev set; the model is left in eval mode.

    ``align`` maps the model's logits ``[B, C]`` to the task's label order (a teacher whose classes are in
    another order, `kdgrid.core.label_order.LabelOrder.align`); None = they are in it.

    No random number is drawn (eval mode: no dropout), so evaluating never moves a student's RNG stream.
    """
    model.eval()
    scores: dict[str, dict[str, float]] = {}
    for name, tokenized in dev_sets.items():
        predictions, labels = [], []
        for batch in eval_batches(tokenized, batch_size):
            inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
            logits = model(**inputs).logits
            if align is not None:
                logits = align(logits)
            predictions.append(predictions_of(logits, task.is_regression).cpu())
            labels.append(batch["labels"])
        scores[name] = {
            k: float(v)
            for k, v in compute_metrics(
                task, torch.cat(predictions).numpy(), torch.cat(labels).numpy()
            ).items()
        }
    return scores


def measure_latency_ms(model: nn.Module, sequence_length: int) -> float:
    """Median wall time (ms) of the model's forward pass on one sequence of ``sequence_length`` tokens, batch 1,
    eval mode, on the model's device: the paper's "latency" (Table 2), measured where the trial ran (so it is
    only comparable between trials run on the same kind of machine)."""
    device = next(model.parameters()).device
    ids = torch.full((1, sequence_length), 1000, dtype=torch.long, device=device)
    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
    }
    was_training = model.training
    model.eval()
    times = []
    with torch.no_grad():
        for repeat in range(LATENCY_REPEATS + 2):  # two warm-up passes
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            model(**inputs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if repeat >= 2:
                times.append((time.perf_counter() - started) * 1000)
    model.train(was_training)
    return round(statistics.median(times), 3)
