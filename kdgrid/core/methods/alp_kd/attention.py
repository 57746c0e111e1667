"""ALP-KD: attention over the teacher's layers from the student layer's representation.

Passban, Wu, Rezagholizadeh & Liu, "ALP-KD: Attention-Based Layer Projection for Knowledge Distillation", AAAI
2021. For each example, student layer i attends over every teacher layer with its [CLS] vector, and the attended
combination of the teacher's layers is its target:

    q_i = W h_S^i[CLS]  (W = identity when d_S = d_T, as in the paper; else a learned [d_T, d_S] map, no bias)
    a_it = softmax_t(q_i . h_T^t[CLS] / s)         s = 1 (option alp_kd_scale: none, the paper) or sqrt(d_T)
    target_i = sum_t a_it f_t                      (per example; f_t: the teacher's feature on layer t)

The weights depend on the example and on the student, whose gradient flows through them as well as through the
knowledge term. The feature must be ``[B, L, d]`` (hidden states, Q, K or V: its position 0 is the [CLS] token,
always a real token); validation refuses knowledge on attention scores. The attention each student layer gave the
teacher's layers is recorded for the row (`AlpAttention.summary`): its mean over every training example the
mapping saw, and its mean over the last batch, as buffers checkpointed with the trial. Only training batches
count (module in training mode, gradients on: ``beta: auto``'s calibration batches do not), each example once per
student layer however many knowledge terms sit on that layer; terms on different features (hidden states and V,
say) attend differently, and a batch then records the mean of their weights. docs/learned_methods.md
states the conventions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from kdgrid.core.mapping import LayerMapping
from kdgrid.core.matching import MappingContext
from kdgrid.core.methods.alp_kd.spec import ALP_KD_SCALE
from kdgrid.errors import ConfigError


@dataclass
class _LayerBatch:
    """One student layer's terms in the current batch: ``base`` the weight sum before the batch ``[L_T]``,
    ``term_sum`` the sum over its terms of each term's weights summed over the batch ``[L_T]``."""

    base: Tensor
    term_sum: Tensor
    terms: int = 0


class AlpAttention(LayerMapping):
    """Per example and student layer, softmax attention over the teacher's layers from the [CLS] vectors."""

    def __init__(self, context: MappingContext) -> None:
        super().__init__(context)
        d_s, d_t = context.student_width, context.teacher_width
        self.query: nn.Linear | None = None if d_s == d_t else nn.Linear(d_s, d_t, bias=False)
        scale = context.options.get(ALP_KD_SCALE, "none")
        self.divisor = math.sqrt(d_t) if scale == "sqrt_width" else 1.0
        shape = (context.student_layers, context.teacher_layers)
        # float64 sums so that a long run's mean does not drift; part of the checkpoint (resume bit for bit)
        self.register_buffer("weight_sum", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("weight_count", torch.zeros(context.student_layers, dtype=torch.float64))
        self.register_buffer("last_weights", torch.zeros(shape, dtype=torch.float64))
        self._batch: dict[int, _LayerBatch] = {}  # this batch's terms so far, by student layer (0-based)

    def attention(self, student: Tensor, teacher: Sequence[Tensor]) -> Tensor:
        """The weights ``[B, L_T]`` of one student layer: softmax over t of ``q . h_T^t[CLS] / s``."""
        if student.dim() != 3:
            raise ConfigError(
                f"ALP-KD attends with [B, L, d] features; got a student feature of shape {list(student.shape)}"
            )
        query = student[:, 0]
        if self.query is not None:
            query = self.query(query)
        keys = torch.stack([layer[:, 0] for layer in teacher], dim=1)  # [B, L_T, d_T]
        return (torch.einsum("bd,btd->bt", query, keys) / self.divisor).softmax(dim=-1)

    def begin_batch(self) -> None:
        self._batch = {}

    def forward(self, feature: str, student_layer: int, student: Tensor, teacher: Sequence[Tensor]) -> Tensor:
        weights = self.attention(student, teacher)
        if self.training and torch.is_grad_enabled():  # not auto-weight calibration nor any evaluation
            self._record(student_layer - 1, weights.detach().double())
        return torch.einsum("bt,bt...->b...", weights, torch.stack(list(teacher), dim=1))

    def _record(self, row: int, weights: Tensor) -> None:
        """Add one term's weights ``[B, L_T]`` on student layer ``row + 1`` to the statistics: a batch's examples
        count once per student layer, however many terms that layer has; the batch's contribution is the mean over
        its terms of each term's weights (equal for terms reading the same feature)."""
        with torch.no_grad():
            if row not in self._batch:  # this batch's first term on the layer
                self._batch[row] = _LayerBatch(self.weight_sum[row].clone(), torch.zeros_like(weights[0]))
                self.weight_count[row] += weights.shape[0]
            batch = self._batch[row]
            batch.term_sum += weights.sum(dim=0)
            batch.terms += 1
            self.weight_sum[row] = batch.base + batch.term_sum / batch.terms
            self.last_weights[row] = batch.term_sum / (batch.terms * weights.shape[0])

    def summary(self) -> dict[str, Any]:
        """``weights``: per student layer, the attention on each teacher layer averaged over every training
        example (a layer never trained: an empty list); ``last_batch_weights``: over the last batch."""
        mean = [
            (total / count).tolist() if count > 0 else []
            for total, count in zip(self.weight_sum.cpu(), self.weight_count.cpu().tolist(), strict=True)
        ]
        return {
            "method": "ALP-KD",
            "weights": mean,
            "last_batch_weights": self.last_weights.cpu().tolist(),
            "examples": [int(c) for c in self.weight_count.cpu().tolist()],
        }
