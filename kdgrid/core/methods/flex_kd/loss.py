"""Flex-KD's alignment loss (kdgrid's reading, `kdgrid.core.methods.flex_kd.spec`): one minus the Pearson
correlation of each student hidden dimension with the teacher dimension kept for it, over the batch's real
tokens, averaged over the dimensions."""

from __future__ import annotations

import torch

from kdgrid.core.knowledge import ShapeError, register
from kdgrid.core.teacher.targets import fixed

# Added to each column's variance before the square root: a constant column (variance 0) then has correlation
# 0 with anything instead of a division by zero.
VARIANCE_EPS = 1e-6


def correlation_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """``(1/d) sum_i (1 - rho_i)`` for rows ``[N, d]`` of both sides: rho_i the Pearson correlation of column i of
    ``student`` with column i of ``teacher`` over the N rows (population moments, `VARIANCE_EPS` in each
    variance). A 0-dim tensor in [0, 2]."""
    s = student - student.mean(0, keepdim=True)
    t = teacher - teacher.mean(0, keepdim=True)
    s = s / torch.sqrt(s.pow(2).mean(0, keepdim=True) + VARIANCE_EPS)
    t = t / torch.sqrt(t.pow(2).mean(0, keepdim=True) + VARIANCE_EPS)
    rho = (s * t).mean(0)
    return (1 - rho).mean()


@register(
    "flex_kd",
    needs=["hidden"],
    needs_projection=False,
    category="feature",
    region="hidden",
    call_style="pair",
    source="Saadi & Wang, Flex-KD, arXiv 2507.10155, 2025 (kdgrid's reading)",
    aliases=["flexkd"],
    teacher_at_student_width=True,
)
def flex_kd(hidden_s: torch.Tensor, hidden_t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`correlation_loss` over the real tokens of student hidden states ``[B, L, d_S]`` and the teacher's kept
    dimensions ``[B, L, d_S]`` (the Flex-KD hooks hand a term those: `kdgrid.core.step_hooks.StepHooks.teacher_features`);
    ``mask`` ``[B, L]``, 1 = real token. Padding is left out, never multiplied in."""
    if hidden_s.shape != hidden_t.shape:
        raise ShapeError(
            f"flex_kd compares each student dimension with the teacher dimension kept for it: student "
            f"{tuple(hidden_s.shape)} and teacher {tuple(hidden_t.shape)} must agree (the teacher's hidden state "
            "reaches this loss through the Flex-KD selection, made at a student's set-up in a job)"
        )
    real = mask.bool()
    return correlation_loss(hidden_s[real], fixed(hidden_t)[real])
