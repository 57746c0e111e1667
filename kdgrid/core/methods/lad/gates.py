"""LAD's gate blocks (option ``lad_form: gates``, the default of ``strategy: LAD``): the teacher's layers aggregated
shallow to deep by a chain of highway gates, and each student layer's target the aggregate at its teacher layer.

Lin, Chen & Kao, "LAD: Layer-Wise Adaptive Distillation for BERT Model Compression", Sensors 23(3), 1483, 2023, as
the authors' code computes it (IKMLab/LAD: ``fine_tune/model/_gate.py``'s ``HighwayGate``,
``fine_tune/util/train_LAD.py``): with ``f_t`` the teacher's hidden states on layer t (``[B, L, d_T]``)::

    a_1 = f_1                                                   (the first block passes its layer through)
    g_t = sigmoid(W_t a_{t-1} + b_t)                            W_t: [d_T, d_T], Xavier-uniform; b_t as nn.Linear's
    a_t = LayerNorm_[L, d_T](f_t * g_t + a_{t-1} * (1 - g_t))    t = 2..L_T

where the LayerNorm normalises each example over its positions and width together (eps 1e-5), with an affine of
shape ``[max_length, d_T]`` per block, sliced to the batch's length L (the authors pad every batch to the maximum
length; kdgrid's batches may be shorter, and the statistics then run over the batch's L positions). Student layer
i's target is ``a_{n(i)}``, n(i) its nominal teacher layer (``max(1, floor(i L_T / L_S))``; the authors' ``k i``,
``k = L_T / L_S``, for depths that divide). The blocks learn through the student's loss on the aggregate (the
teacher's features are detached); they train with the student (the authors give them their own AdamW at 1/20 to
1/100 of the student's learning rate: ``learned_lr_scale`` sets a multiple). The knowledge must read hidden states
(a ``[B, L, d_T]`` representation, as the paper's hidden-state loss). ``lad_form: softmax`` is kdgrid's earlier
form (`kdgrid.core.methods.lad.gate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from kdgrid.core.mapping import LayerMapping
from kdgrid.core.matching import MappingContext

LAYER_NORM_EPS = 1e-5  # torch's LayerNorm default, the authors' module


class LadGateBlocks(LayerMapping):
    """One highway gate block per teacher layer after the first, and their LayerNorm affines."""

    def __init__(self, context: MappingContext) -> None:
        super().__init__(context)
        width, blocks = context.teacher_width, context.teacher_layers - 1
        self.gates = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))
        for gate in self.gates:
            nn.init.xavier_uniform_(gate.weight)
        self.norm_weight = nn.Parameter(torch.ones(blocks, context.max_length, width))
        self.norm_bias = nn.Parameter(torch.zeros(blocks, context.max_length, width))
        self.targets = {student: teacher for student, teacher in context.pairs}
        self.register_buffer("last_gate_means", torch.zeros(blocks, dtype=torch.float64))

    def aggregate(self, teacher: Sequence[Tensor]) -> list[Tensor]:
        """``a_1 .. a_{L_T}`` from the teacher's layers ``f_1 .. f_{L_T}`` (``[B, L, d_T]`` each)."""
        aggregated = [teacher[0]]
        length = teacher[0].shape[1]
        if length > self.norm_weight.shape[1]:
            raise ValueError(f"LAD's gate blocks were built for {self.norm_weight.shape[1]} positions, got {length}")
        for t, gate in enumerate(self.gates):
            previous = aggregated[-1]
            opening = torch.sigmoid(gate(previous))
            mixed = teacher[t + 1] * opening + previous * (1 - opening)
            shape = (length, mixed.shape[-1])
            aggregated.append(
                F.layer_norm(mixed, shape, self.norm_weight[t, :length], self.norm_bias[t, :length], LAYER_NORM_EPS)
            )
            if self.training and torch.is_grad_enabled():
                self.last_gate_means[t] = opening.detach().double().mean()
        return aggregated

    def forward(self, feature: str, student_layer: int, student: Tensor, teacher: Sequence[Tensor]) -> Tensor:
        if student.dim() != 3 or teacher[0].shape[-1] != self.norm_weight.shape[-1]:
            raise ValueError(
                f"LAD's gate blocks aggregate [B, L, {self.norm_weight.shape[-1]}] hidden states; got {feature} of "
                f"shape {list(teacher[0].shape)}"
            )
        return self.aggregate(teacher)[self.targets[student_layer] - 1]

    def summary(self) -> dict[str, Any]:
        """The form, each student layer's teacher layer, and each block's mean gate opening on its last training
        batch (the weight of the new layer against the aggregate so far)."""
        return {
            "method": "LAD",
            "form": "gates",
            "targets": [self.targets[i] for i in sorted(self.targets)],
            "last_gate_means": self.last_gate_means.cpu().tolist(),
        }
