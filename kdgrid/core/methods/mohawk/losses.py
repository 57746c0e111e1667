"""MOHAWK's stage-1 and stage-2 losses (Bick et al., NeurIPS 2024, eqs. for "matrix orientation" and "hidden-state
alignment"), for one layer, padding masked.

Arguments follow kdgrid's loss conventions (docs/design.md): student first, teacher second, then the mask
``[B, L]`` (1 = real token); padded entries are *replaced* before any arithmetic, so whatever the padding holds
(even NaN) the value is that of the unpadded batch; the teacher is a fixed target (detached). Both return a
0-dim float32 tensor, unweighted.
"""

from __future__ import annotations

import torch

from kdgrid.core.model.capture import PAD_BIAS


def teacher_probabilities(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The teacher's post-softmax attention ``[B, H, L, L]`` from its pre-softmax scores (capture's, with the
    padding bias on key columns), padded keys set to exactly 0."""
    keys = mask[:, None, None, :].bool()
    return torch.softmax(scores.float().masked_fill(~keys, PAD_BIAS), dim=-1).masked_fill(~keys, 0.0)


def matrix_orientation(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stage 1: ``mean_{b,h} || M^S_{b,h} - A^T_{b,h} ||_F`` (the Frobenius norm, not squared, per example and
    head, then the mean over both), the norm over real pairs (i, j) only.

    Args:
        student: the student's mixing matrices ``[B, H, L, L]`` (teacher-forced).
        teacher: the teacher's attention probabilities ``[B, H, L, L]`` (`teacher_probabilities`).
        mask: ``[B, L]``.
    """
    real = mask.bool()
    pairs = real[:, None, :, None] & real[:, None, None, :]
    zero = torch.zeros((), dtype=torch.float32, device=student.device)
    diff = torch.where(pairs, student.float(), zero) - torch.where(pairs, teacher.detach().float(), zero)
    return torch.linalg.matrix_norm(diff, ord="fro").mean()


def hidden_alignment(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stage 2: ``mean_{b,t} || y^S_{b,t} - y^T_{b,t} ||_2`` (the L2 norm, not squared, per token, then the mean
    over the real tokens of the batch).

    Args:
        student: the student mixer sub-layer's outputs ``[B, L, d]`` (teacher-forced).
        teacher: the teacher's self-attention sub-layer outputs ``[B, L, d]``.
        mask: ``[B, L]``.
    """
    real = mask.bool()[..., None]
    zero = torch.zeros((), dtype=torch.float32, device=student.device)
    diff = torch.where(real, student.float(), zero) - torch.where(real, teacher.detach().float(), zero)
    norms = torch.linalg.vector_norm(diff, ord=2, dim=-1)  # [B, L], 0 on padded tokens
    return norms.sum() / mask.bool().sum().clamp(min=1)
