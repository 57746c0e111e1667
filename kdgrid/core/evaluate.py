"""Scoring a classifier on a task's dev sets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn


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
) -> dict[str, dict[str, float]]:
    """``{dev_set: {metric: value}}`` for each tokenized dev set; the model is left in eval mode.

    No random number is drawn (eval mode: no dropout), so evaluating never moves a student's RNG stream.
    """
    from kdgrid.core.data import eval_batches
    from kdgrid.core.metrics import compute_metrics

    model.eval()
    scores: dict[str, dict[str, float]] = {}
    for name, tokenized in dev_sets.items():
        predictions, labels = [], []
        for batch in eval_batches(tokenized, batch_size):
            inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
            logits = model(**inputs).logits
            predictions.append(predictions_of(logits, task.is_regression).cpu())
            labels.append(batch["labels"])
        scores[name] = {
            k: float(v)
            for k, v in compute_metrics(
                task, torch.cat(predictions).numpy(), torch.cat(labels).numpy()
            ).items()
        }
    return scores
