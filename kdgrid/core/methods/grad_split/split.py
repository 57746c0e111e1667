"""The task and distillation gradients of a student's step taken apart: for DOT (`kdgrid.core.methods.dot.optimizer`) and for the
logged cosine between them (option ``grad_cosine_batches``), the usual diagnosis of gradient conflict in
distillation.

- **task loss**: the weighted hard-label term, ``alpha * L_hard``;
- **distillation loss**: every other weighted term of the objective (``soft_weight * L_soft``, each knowledge
  term ``beta * L_k``, a projector penalty); a term of weight 0 is left out of both, as
  `kdgrid.core.training.objective.Objective.total` leaves it out (so task + distillation = the total).
- **cosine**: ``<g_task, g_kd> / (|g_task| |g_kd|)`` over the student model's parameters flattened into one
  vector (its encoder and its classifier; the projections are left out, since they have no task gradient); a side
  that is zero everywhere gives NaN.

The cosine is sampled on ``N`` batches per epoch, evenly spaced: batch indices ``floor(j * S / N)`` for ``j < N``
(0-based, S the batches of an epoch; every batch when ``N >= S``), and each epoch's mean is appended to the row's
``extra["grad_cosine"]`` (one number per epoch; ``extra["grad_cosine_batches"]`` the batches it averaged). Taking
the gradients apart uses ``torch.autograd.grad`` with the graph retained, so with AdamW the step itself is the
same backward pass as without the logging: logging changes nothing in training (tested bit for bit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from kdgrid.core.methods.grad_split.spec import GRAD_COSINE_BATCHES
from kdgrid.trial import Trial

TASK_TERMS = frozenset({"hard"})
COSINE_KEY = "grad_cosine"
COSINE_COUNT_KEY = "grad_cosine_batches"


def task_and_distillation(
    values: Mapping[str, torch.Tensor], weights: Mapping[str, float]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weighted task loss and the weighted distillation loss (see the module); each 0-dim."""
    zero = next(iter(values.values())).new_zeros(())
    task, distill = zero, zero
    for name, value in values.items():
        weight = weights[name]
        if weight == 0:
            continue
        if name in TASK_TERMS:
            task = task + weight * value
        else:
            distill = distill + weight * value
    return task, distill


def split_gradients(
    task: torch.Tensor, distill: torch.Tensor, params: Sequence[torch.Tensor], *, keep_graph: bool
) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
    """The gradients of ``task`` and of ``distill`` with respect to ``params`` (None where a side does not reach
    a parameter); ``keep_graph`` keeps the graph for a backward pass after."""
    g_task = (
        torch.autograd.grad(task, params, retain_graph=True, allow_unused=True)
        if task.requires_grad
        else [None] * len(params)
    )
    g_kd = (
        torch.autograd.grad(distill, params, retain_graph=keep_graph, allow_unused=True)
        if distill.requires_grad
        else [None] * len(params)
    )
    return list(g_task), list(g_kd)


def gradient_cosine(task: Sequence[torch.Tensor | None], distill: Sequence[torch.Tensor | None]) -> float:
    """Cosine between two gradients given per parameter (None = zero), over all of them flattened; NaN when
    either is zero."""
    dot = norm_t = norm_d = 0.0
    for g_t, g_d in zip(task, distill, strict=True):
        if g_t is not None:
            norm_t += float(g_t.double().pow(2).sum())
        if g_d is not None:
            norm_d += float(g_d.double().pow(2).sum())
        if g_t is not None and g_d is not None:
            dot += float((g_t.double() * g_d.double()).sum())
    if norm_t == 0 or norm_d == 0:
        return math.nan
    return dot / math.sqrt(norm_t * norm_d)


def sampled_batches(batches_per_epoch: int, count: int) -> frozenset[int]:
    """The 0-based batch indices of an epoch whose cosine is logged: ``floor(j * S / N)`` for ``j < min(N, S)``."""
    n = min(count, batches_per_epoch)
    return frozenset(j * batches_per_epoch // n for j in range(n))


@dataclass
class CosineLog:
    """One student's sampled cosines: the batches to sample, this epoch's values so far."""

    batches: frozenset[int]
    values: list[float] = field(default_factory=list)

    @classmethod
    def for_trial(cls, trial: Trial, batches_per_epoch: int) -> CosineLog | None:
        count = trial.option(GRAD_COSINE_BATCHES)
        return None if count is None else cls(sampled_batches(batches_per_epoch, int(count)))

    def close_epoch(self, extra: dict[str, object]) -> None:
        """Append this epoch's mean cosine (NaN-free values only; None when none) to ``extra``."""
        finite = [v for v in self.values if math.isfinite(v)]
        means = list(extra.get(COSINE_KEY, []))  # type: ignore[call-overload]
        counts = list(extra.get(COSINE_COUNT_KEY, []))  # type: ignore[call-overload]
        means.append(sum(finite) / len(finite) if finite else None)
        counts.append(len(finite))
        extra[COSINE_KEY], extra[COSINE_COUNT_KEY] = means, counts
        self.values = []
