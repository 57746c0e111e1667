"""The loss on a dual-head student's distillation head (option ``dual_head_loss``; the head: `kdgrid.core.methods.dual_head.heads`).

Yang, Zong, Huang, Feng & An, "Dual-Head Knowledge Distillation: Enhancing Logits Utilization with an Auxiliary
Head" (arXiv:2411.08937, 2024) train the auxiliary head with a logit-level loss that treats each class as a binary
event of probability ``sigmoid(z / T)``; their code (penghui-yang/DHKD) uses BinaryKL-Norm for the method. With
``KL_bin(p || q) = p log(p / q) + (1 - p) log((1 - p) / (1 - q))``, every probability clamped into
[`EPS`, 1 - `EPS`], per example b (the objective averages over the batch, as their ``sum / N`` does)::

    binary_kl_norm (default):  T^2 sum_c KL_bin(1/2 || sigmoid((z^S_bc - z^T_bc) / T))
    binary_kl:                 T^2 sum_c KL_bin(sigmoid(z^T_bc / T) || sigmoid(z^S_bc / T))
    softmax:                   kdgrid's earlier form: the soft-label cross-entropy at T (`soft_label`), the loss
                               of a single-head student moved to the second head

T is the trial's soft-label temperature (the authors' default for the binary losses is 2); the T^2 is part of
the authors' definition, so ``soft_t2`` does not apply to the binary forms. Both binary forms are divergences:
0 when the head's logits equal the teacher's (BinaryKL-Norm compares logit differences only, so it is 0 for any
common shift too). They are for classification; a regression task's dual head takes ``softmax`` (its squared
distance). Torch only; the names and rules are in `kdgrid.core.methods.dual_head.spec`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kdgrid.core.methods.dual_head.spec import BINARY_KL, BINARY_KL_NORM
from kdgrid.core.teacher.targets import fixed

EPS = 1e-8  # the authors' clamp on every probability


def _binary_kl(p: Tensor, q: Tensor) -> Tensor:
    p, q = p.clamp(EPS, 1 - EPS), q.clamp(EPS, 1 - EPS)
    return p * (p.log() - q.log()) + (1 - p) * ((1 - p).log() - (1 - q).log())


def binary_loss_per_example(
    form: str, logits_s: Tensor, logits_t: Tensor, temperature: float | Tensor
) -> Tensor:
    """The loss ``[B]`` of ``form`` (`BINARY_KL_NORM` or `BINARY_KL`) between the distillation head's logits
    ``[B, C]`` and the teacher's (detached) at ``temperature`` (a float or a 0-dim tensor)."""
    z_t = fixed(logits_t)
    if form == BINARY_KL_NORM:
        per_class = _binary_kl(torch.full_like(logits_s, 0.5), torch.sigmoid((logits_s - z_t) / temperature))
    elif form == BINARY_KL:
        per_class = _binary_kl(torch.sigmoid(z_t / temperature), torch.sigmoid(logits_s / temperature))
    else:
        raise ValueError(f"no binary dual-head loss {form!r}; allowed: {BINARY_KL_NORM}, {BINARY_KL}")
    return per_class.sum(dim=-1) * temperature**2
