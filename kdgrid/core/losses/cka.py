"""Linear CKA between student and teacher token representations (Kornblith et al., ICML 2019), as a
knowledge type: one module, registered here alone."""

from __future__ import annotations

from torch import Tensor

from kdgrid.core.knowledge import register
from kdgrid.core.losses._common import (
    token_count,
    zero_padding,
)
from kdgrid.core.losses.hidden import check_hidden_tokens
from kdgrid.core.teacher.targets import fixed, teacher_side


@register(
    "cka",
    needs=["hidden"],
    needs_projection=False,
    category="relation",
    region="hidden",
    call_style="pair",
    source="linear CKA (Kornblith et al., 2019)",
    aliases=["linear cka"],
)
def cka(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, *, eps: float = 1e-12) -> Tensor:
    """One minus linear CKA between the token representations of student and teacher; widths may differ.

    The real tokens of the whole batch are pooled as N = sum_b len_b samples: X ``[N, d_S]``, Y ``[N, d_T]``,
    each column-centred over the N tokens (the same as centring the N x N kernels)::

        CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)        loss = 1 - CKA  in [0, 1]

    Invariant to rotations and isotropic scaling of either side, so no projection is needed.

    Args:
        hidden_s: student hidden states ``[B, L, d_S]``.
        hidden_t: teacher hidden states ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token; padded tokens are not samples.
        eps: floor of the denominator's squared terms.
    """
    real = check_hidden_tokens(hidden_s, hidden_t, mask, "cka")
    x = _centre_over_tokens(zero_padding(hidden_s, real), real).flatten(0, 1)

    def teacher_part() -> tuple[Tensor, Tensor]:
        y = _centre_over_tokens(zero_padding(fixed(hidden_t), real), real).flatten(0, 1)
        return y, (y.T @ y).pow(2).sum().clamp_min(eps).sqrt()

    y, self_y = teacher_side(("cka", eps), (hidden_t, mask), teacher_part)
    cross = (y.T @ x).pow(2).sum()
    self_x = (x.T @ x).pow(2).sum().clamp_min(eps).sqrt()
    return 1.0 - cross / (self_x * self_y)


def _centre_over_tokens(h: Tensor, real: Tensor) -> Tensor:
    """Subtract the mean over all real tokens of the batch; padded rows stay zero. ``[B, L, d]``."""
    mean = h.sum(dim=(0, 1)) / token_count(real, h)
    return (h - mean).masked_fill(~real[:, :, None], 0.0)
