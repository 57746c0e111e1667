"""What every loss of the package shares: shape checks (one message per mismatch) and the masking helpers that
keep padding out of every loss (padded positions are replaced, never multiplied; docs/design.md, "Loss
conventions")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from kdgrid.core.knowledge import ShapeError
from kdgrid.core.teacher.targets import fixed, teacher_side


def shape(x: Tensor) -> str:
    return "[" + ", ".join(str(s) for s in x.shape) + "]"


def expect_rank(x: Tensor, rank: int, loss: str, what: str, layout: str) -> None:
    if x.dim() != rank:
        raise ShapeError(f"{loss}: {what} must be {layout}, got shape {shape(x)}")


def expect_same_shape(s: Tensor, t: Tensor, loss: str, what: str, hint: str = "") -> None:
    if s.shape != t.shape:
        raise ShapeError(f"{loss}: student {what} {shape(s)} and teacher {what} {shape(t)} differ{hint}")


def projection_hint(s: Tensor, t: Tensor) -> str:
    if s.shape[:-1] == t.shape[:-1] and s.shape[-1] != t.shape[-1]:
        return (
            f" (student width {s.shape[-1]} vs teacher width {t.shape[-1]}: project the student with "
            "kdgrid.core.model.projection.Projection first)"
        )
    return ""


def expect_same_tokens(s: Tensor, t: Tensor, loss: str, what: str) -> None:
    """Student and teacher agree on batch and sequence length (the leading dims); widths or heads may differ."""
    if s.shape[0] != t.shape[0] or s.shape[-2] != t.shape[-2]:
        raise ShapeError(
            f"{loss}: student {what} {shape(s)} and teacher {what} {shape(t)} disagree on batch size or "
            "sequence length"
        )


def real_tokens(mask: Tensor, batch: int, length: int, loss: str) -> Tensor:
    """The mask as bool ``[B, L]``, checked against the batch it belongs to."""
    if mask.dim() != 2 or mask.shape[0] != batch or mask.shape[1] != length:
        raise ShapeError(f"{loss}: mask must be [B, L] = [{batch}, {length}], got shape {shape(mask)}")
    return mask.bool()


def real_pairs(real: Tensor) -> Tensor:
    """``[B, L, L]``: (query i, key j) where both are real tokens."""
    return real[:, :, None] & real[:, None, :]


def token_count(real: Tensor, like: Tensor) -> Tensor:
    """sum_b len_b as a float tensor (at least 1, so an all-padding batch gives 0 rather than NaN)."""
    return real.sum().to(like.dtype).clamp_min(1)


def zero_padding(x: Tensor, real: Tensor) -> Tensor:
    """``[B, L, d]`` with padded rows replaced by zeros (replacement, so NaN/inf padding cannot leak)."""
    return x.masked_fill(~real[:, :, None], 0.0)


def teacher_zero_padded(hidden_t: Tensor, mask: Tensor, real: Tensor) -> Tensor:
    """The teacher's ``[B, L, d]`` with padded rows zeroed, detached; once per batch for a whole group."""
    return teacher_side(("zero_padding",), (hidden_t, mask), lambda: zero_padding(fixed(hidden_t), real))


def masked_log_softmax(x: Tensor, pairs: Tensor) -> Tensor:
    """log-softmax over the last (key) axis with non-real (query, key) entries excluded.

    ``x`` is ``[B, ..., L, L]`` and ``pairs`` ``[B, L, L]``. Excluded entries get the dtype's most negative
    finite value (not -inf, so fully padded rows stay finite and never produce NaN gradients).
    """
    while pairs.dim() < x.dim():
        pairs = pairs.unsqueeze(1)
    return F.log_softmax(x.masked_fill(~pairs, torch.finfo(x.dtype).min), dim=-1)


def l2_normalize(x: Tensor, eps: float) -> Tensor:
    # sqrt of a clamped square sum: the gradient stays finite at the zero vector (unlike x / x.norm()).
    return x / (x * x).sum(dim=-1, keepdim=True).clamp_min(eps * eps).sqrt()

