"""Learned layer mappings: LAD's gate blocks and ALP-KD's attention over teacher layers.

**LAD** (Lin, Chen & Kao, "LAD: Layer-Wise Adaptive Distillation for BERT Model Compression", Sensors 23(3), 1483,
2023), as the authors' code computes it (IKMLab/LAD: ``fine_tune/model/_gate.py``, ``fine_tune/util/train_LAD.py``,
``fine_tune/objective.py``): one highway gate block per teacher layer aggregates the teacher's hidden states
iteratively, shallow to deep, with ``a_0 = 0``::

    a_1 = h_1                                             (the first block passes its layer through)
    g_t = sigmoid(W_t a_{t-1} + b_t)                      W_t: [d, d], Xavier-uniform
    a_t = LayerNorm_[L, d](h_t * g_t + a_{t-1} * (1 - g_t))     t = 2..L_T (normalised over sequence and width)

and student layer i (1-based) learns from ``a_{k i}``, ``k = L_T // L_S``, with ``mu * MSE(h^S_i, a_{k i}) / L_S``
(``MSE`` the mean over every element). The gates get their own AdamW (learning rate 1e-6 to 5e-6 where the
student's is 1e-4, weight decay 0.01) and learn through the same loss.

**ALP-KD** (Passban, Wu, Rezagholizadeh & Liu, "ALP-KD: Attention-Based Layer Projection for Knowledge
Distillation", AAAI 2021), as its equations read and as LAD's authors re-implemented it for their comparison
(ProFatXuanAll/BERT-gang, ``fine_tune/util/train_ALP.py``): per example, student layer i attends over every teacher
layer with the [CLS] vectors, and the loss compares [CLS] vectors only::

    alpha_it = softmax_t(c^S_i . c^T_t)          c: the [CLS] hidden vector of a layer
    f_i      = sum_t alpha_it c^T_t
    L_ALP    = sum_i MSE(c^S_i, f_i)

(LAD's re-implementation divides the dot products by sqrt(d); the paper's equation does not.) Plain torch.
"""

from __future__ import annotations

import torch
from torch import nn


class HighwayChain(nn.Module):
    """LAD's gate blocks for ``layers`` teacher layers of ``length`` tokens and width ``width``."""

    def __init__(self, layers: int, length: int, width: int, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for _ in range(layers):
            bound = (6.0 / (2 * width)) ** 0.5  # Xavier-uniform of a square matrix
            self.weights.append(nn.Parameter((torch.rand(width, width, generator=generator) * 2 - 1) * bound))
            self.biases.append(nn.Parameter(torch.zeros(width)))
        self.scales = nn.ParameterList(nn.Parameter(torch.ones(length, width)) for _ in range(layers))
        self.shifts = nn.ParameterList(nn.Parameter(torch.zeros(length, width)) for _ in range(layers))

    def forward(self, teacher: list[torch.Tensor]) -> list[torch.Tensor]:
        """``a_1 .. a_{L_T}`` from the teacher's hidden states ``h_1 .. h_{L_T}`` (each ``[B, L, d]``)."""
        aggregated = [teacher[0]]
        for t in range(1, len(teacher)):
            previous = aggregated[-1]
            gate = torch.sigmoid(previous @ self.weights[t].T + self.biases[t])
            mixed = teacher[t] * gate + previous * (1 - gate)
            mean = mixed.mean(dim=(1, 2), keepdim=True)
            variance = mixed.var(dim=(1, 2), unbiased=False, keepdim=True)
            normed = (mixed - mean) / torch.sqrt(variance + 1e-5)
            aggregated.append(normed * self.scales[t] + self.shifts[t])
        return aggregated


def lad_losses(
    student: list[torch.Tensor], teacher: list[torch.Tensor], chain: HighwayChain
) -> list[torch.Tensor]:
    """``MSE(h^S_i, a_{k i})`` per student layer i (before LAD's ``mu / L_S``)."""
    aggregated = chain(teacher)
    step = len(teacher) // len(student)
    return [((s - aggregated[step * (i + 1) - 1]) ** 2).mean() for i, s in enumerate(student)]


def alp_attention(student_cls: torch.Tensor, teacher_cls: list[torch.Tensor]) -> torch.Tensor:
    """``alpha_it`` ``[B, L_T]`` from the student layer's ``[B, d]`` and the teacher layers' [CLS] vectors."""
    keys = torch.stack(teacher_cls, dim=1)  # [B, L_T, d]
    return torch.softmax(torch.einsum("bd,btd->bt", student_cls, keys), dim=-1)


def alp_loss(student_cls: torch.Tensor, teacher_cls: list[torch.Tensor]) -> torch.Tensor:
    """``MSE(c^S_i, f_i)`` of one student layer."""
    weights = alp_attention(student_cls, teacher_cls)
    target = torch.einsum("bt,btd->bd", weights, torch.stack(teacher_cls, dim=1))
    return ((student_cls - target) ** 2).mean()
