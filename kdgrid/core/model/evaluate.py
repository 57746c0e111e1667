"""Scoring a classifier on a task's dev sets (scores and per-example predictions, one pass), and timing its forward
pass (the paper's latency)."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from kdgrid.core.data.batching import eval_batches
from kdgrid.core.data.tokenization import TokenizedSplit
from kdgrid.metrics import compute_metrics

LATENCY_REPEATS = 10  # timed forward passes (after two warm-up passes); the median is reported


def predictions_of(logits: torch.Tensor, regression: bool) -> torch.Tensor:
    """Class ids (argmax) for a classification task, the scalar output for a regression task."""
    return logits.squeeze(-1).float() if regression else logits.argmax(dim=-1)


@dataclass(frozen=True)
class DevOutcome:
    """What scoring a model on a task's dev sets gives: the scores and, per example, the predictions.

    Attributes:
        scores: ``{dev_set: {metric: value}}``.
        predicted: ``{dev_set: [N]}`` predictions in the dev set's own order (int64 class ids in the task's label
            order, float32 scores for regression).
    """

    scores: dict[str, dict[str, float]]
    predicted: dict[str, np.ndarray]


@torch.no_grad()
def evaluate_dev_sets(
    model: nn.Module,
    task: Any,
    dev_sets: Mapping[str, Any],
    batch_size: int,
    device: torch.device | str = "cpu",
    align: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> DevOutcome:
    """Score the model on each tokenized dev set in one pass, keeping every example's prediction; the model is
    left in eval mode.

    ``align`` maps the model's logits ``[B, C]`` to the task's label order (a teacher whose classes are in
    another order, `kdgrid.core.teacher.label_order.LabelOrder.align`); None = they are in it.

    The scores are computed on the batches' (length-sorted) order, as they always were; the predictions are put
    back in the dev set's order. No random number is drawn (eval mode: no dropout), so evaluating never moves a
    student's RNG stream.
    """
    model.eval()
    scores: dict[str, dict[str, float]] = {}
    predicted: dict[str, np.ndarray] = {}
    for name, tokenized in dev_sets.items():
        predictions, labels = [], []
        batches = eval_batches(tokenized, batch_size)
        for batch in batches:
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
        in_order = batches.restore_order(predictions).numpy()
        predicted[name] = in_order.astype(np.float32 if task.is_regression else np.int64)
    return DevOutcome(scores, predicted)


def gold_labels(split: TokenizedSplit, regression: bool) -> np.ndarray:
    """A dev set's gold labels ``[N]`` as predictions store them: int64 class ids, float32 scores."""
    return np.asarray(split.labels).astype(np.float32 if regression else np.int64)


def dev_fingerprint(split: TokenizedSplit) -> str:
    """Hex SHA-256 of a tokenized dev set's examples and gold labels, in order: two predictions are of the same
    examples exactly when their fingerprints match (a dev set cut to its first 64 examples has another one; so
    does the same text tokenized by another vocabulary)."""
    digest = hashlib.sha256()
    for array in (split.offsets, split.input_ids, split.token_type_ids, split.labels):
        values = np.ascontiguousarray(array)
        digest.update(f"{values.dtype.str}{values.shape}".encode())
        digest.update(values.tobytes())
    return digest.hexdigest()


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
