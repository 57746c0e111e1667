"""LAD's gate: each student layer's target is a learned convex combination of every teacher layer.

Lin, Chen & Kao, "LAD: Layer-Wise Adaptive Distillation for BERT Model Compression", Sensors 23(3), 2023:
gate blocks aggregate the teacher's layers so that no teacher layer is skipped, and each student layer learns
from the aggregate. kdgrid's form of it: student layer i has a gate of L_T learned logits ``g_i``, and its
target is

    target_i = sum_{t=1..L_T} w_it f_t,        w_i = softmax(g_i)  (weights >= 0, summing to 1)

where ``f_t`` is the teacher's feature (hidden states ``[B, L, d_T]``, attention scores, Q/K/V) on layer t. The
gate starts uniform (``g = 0``: the mean of the teacher's layers) and trains with the student under its AdamW
(a 2-D parameter, so with the trial's weight decay, which pulls it back towards uniform). The weights are the
same for every example; `LadGate.summary` gives them, one row per student layer, to the row's ``extra.mapping``.
docs/learned_methods.md states the conventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from kdgrid.core.mapping import LayerMapping
from kdgrid.core.matching import MappingContext


class LadGate(LayerMapping):
    """Learned logits ``[L_S, L_T]``; the target of student layer i is the softmax-weighted sum of the teacher's
    layers (any feature: the weights multiply whole tensors)."""

    def __init__(self, context: MappingContext) -> None:
        super().__init__(context)
        self.gate = nn.Parameter(torch.zeros(context.student_layers, context.teacher_layers))

    def weights(self) -> Tensor:
        """The gate's weights ``[L_S, L_T]`` (each row sums to 1)."""
        return self.gate.softmax(dim=-1)

    def forward(self, feature: str, student_layer: int, student: Tensor, teacher: Sequence[Tensor]) -> Tensor:
        weights = self.gate[student_layer - 1].softmax(dim=-1).to(teacher[0].dtype)
        return torch.einsum("t,t...->...", weights, torch.stack(list(teacher)))

    def summary(self) -> dict[str, Any]:
        """``weights``: one row per student layer 1..L_S, the weight of each teacher layer 1..L_T."""
        return {"method": "LAD", "weights": self.weights().detach().cpu().double().tolist()}
