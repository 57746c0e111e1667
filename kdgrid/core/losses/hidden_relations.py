"""Hidden-state relations (relation-based, region ``hidden``): MMD and Gram (paper eq. 15, 16)."""

from __future__ import annotations

from typing import Literal

from torch import Tensor

from kdgrid.core.knowledge import register
from kdgrid.core.losses._common import (
    expect_same_shape,
    real_pairs,
    teacher_zero_padded,
    zero_padding,
)
from kdgrid.core.losses.hidden import check_hidden_same, check_hidden_tokens
from kdgrid.core.teacher.targets import fixed, teacher_side
from kdgrid.errors import ConfigError


@register(
    "mmd",
    needs=["hidden"],
    needs_projection=False,
    category="relation",
    region="hidden",
    call_style="pair",
    source="paper eq. 15; TextBrewer mmd_loss (an NST variant)",
    aliases=["nst"],
)
def mmd(
    hidden_s: Tensor,
    hidden_t: Tensor,
    mask: Tensor,
    *,
    second_s: Tensor | None = None,
    second_t: Tensor | None = None,
    scale: Literal["width", "length"] = "width",
) -> Tensor:
    """Squared error between the token-token similarity matrices (paper eq. 15); widths may differ.

    With ``G = H_1 H_2^T / d`` on each side (``[B, L, L]``, each side divided by its own width)::

        loss = sum_b sum_{i, j real} (G^S_bij - G^T_bij)^2 / sum_b len_b^2

    Args:
        hidden_s: student hidden states ``[B, L, d_S]`` (no projection: the L x L matrices compare directly).
        hidden_t: teacher hidden states ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token; only pairs of real tokens count.
        second_s, second_t: H_2 of eq. 15 (another layer's hidden states, same shapes); default H_2 = H_1,
            the single-layer reading the grid uses (docs/design.md).
        scale: ``"width"`` (default, docs/design.md and TextBrewer's unmasked branch: divide by d) or
            ``"length"``: divide by each example's real length len_b instead. TextBrewer's masked branch
            divides by the padded length, which makes the loss depend on padding; ``"length"`` is its
            padding-free reading.
    """
    real = check_hidden_tokens(hidden_s, hidden_t, mask, "mmd")
    h2_s = hidden_s if second_s is None else second_s
    h2_t = hidden_t if second_t is None else second_t
    expect_same_shape(hidden_s, h2_s, "mmd", "H_1 / H_2 hidden states")
    expect_same_shape(hidden_t, h2_t, "mmd", "H_1 / H_2 hidden states")
    if scale not in ("width", "length"):
        raise ConfigError(f"mmd: scale={scale!r} is not one of 'width', 'length'")
    pairs = real_pairs(real)
    lengths = real.sum(dim=1).to(hidden_s.dtype)

    def similarity(h1: Tensor, h2: Tensor) -> Tensor:
        gram = zero_padding(h1, real) @ zero_padding(h2, real).transpose(1, 2)
        return gram / (h1.shape[-1] if scale == "width" else lengths.clamp_min(1)[:, None, None])

    gram_s = similarity(hidden_s, h2_s)
    gram_t = teacher_side(
        ("mmd", scale), (hidden_t, h2_t, mask), lambda: similarity(fixed(hidden_t), fixed(h2_t))
    )
    squared = (gram_s - gram_t).pow(2).masked_fill(~pairs, 0.0)
    return squared.sum() / (lengths * lengths).sum().clamp_min(1)


@register(
    "gram",
    needs=["hidden"],
    needs_projection=True,
    category="relation",
    region="hidden",
    call_style="pair",
    source="paper eq. 16; TextBrewer fsp_loss (an FSP variant)",
    aliases=["fsp"],
)
def gram(
    hidden_s: Tensor,
    hidden_t: Tensor,
    mask: Tensor,
    *,
    second_s: Tensor | None = None,
    second_t: Tensor | None = None,
) -> Tensor:
    """Mean squared error between the feature-feature Gram matrices (paper eq. 16).

    With padded rows zeroed and ``G_b = H_1b^T H_2b / len_b`` (``[B, d_T, d_T]``) on each side::

        loss = sum_b sum_{p, q} (G^S_bpq - G^T_bpq)^2 / (B * d_T * d_T)

    Args:
        hidden_s: student hidden states projected to the teacher's width ``[B, L, d_T]``.
        hidden_t: teacher hidden states ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token; padded tokens add nothing to G, len_b counts real tokens.
        second_s, second_t: H_2 of eq. 16 (default H_2 = H_1, as the grid uses it).
    """
    real = check_hidden_same(hidden_s, hidden_t, mask, "gram")
    h2_s = hidden_s if second_s is None else second_s
    h2_t = hidden_t if second_t is None else second_t
    expect_same_shape(hidden_s, h2_s, "gram", "H_1 / H_2 hidden states")
    expect_same_shape(hidden_t, h2_t, "gram", "H_1 / H_2 hidden states")
    batch, length, width = hidden_s.shape
    lengths = real.sum(dim=1).to(hidden_s.dtype).clamp_min(1)
    a_s = zero_padding(hidden_s, real)
    b_s = a_s if h2_s is hidden_s else zero_padding(h2_s, real)
    a_t = teacher_zero_padded(hidden_t, mask, real)
    b_t = a_t if h2_t is hidden_t else zero_padding(fixed(h2_t), real)
    if 4 * length >= width:
        g_t = teacher_side(("gram", "features"), (a_t, b_t), lambda: a_t.transpose(1, 2) @ b_t)
        per_example = (a_s.transpose(1, 2) @ b_s - g_t).pow(2).sum(dim=(1, 2))
    else:
        per_example = _gram_error_by_tokens(a_s, b_s, a_t, b_t)
    return (per_example / (lengths * lengths)).sum() / (batch * width * width)


def _gram_error_by_tokens(a_s: Tensor, b_s: Tensor, a_t: Tensor, b_t: Tensor) -> Tensor:
    """``||A_s^T B_s - A_t^T B_t||_F^2`` per example from ``[L, L]`` products only, ``[B]``.

    For d > 4 L this is cheaper than building the ``[d, d]`` Gram matrices (4 L^2 d instead of L d^2
    multiply-adds per example; d = 768, L = 64: 3x fewer). With ``D_A = A_s - A_t`` and ``D_B = B_s - B_t``,
    ``A_s^T B_s - A_t^T B_t = D_A^T B_s + A_t^T D_B``, and by ``<X^T Y, U^T V> = <X U^T, Y V^T>``::

        ||.||^2 = <D_A D_A^T, B_s B_s^T> + <A_t A_t^T, D_B D_B^T> + 2 <D_A A_t^T, B_s D_B^T>

    Every term is of the order of the difference, so nothing cancels catastrophically when the student nears
    the teacher (the naive ``||G_s||^2 - 2 <G_s, G_t> + ||G_t||^2`` loses all digits there).
    """

    def outer(x: Tensor, y: Tensor) -> Tensor:
        return x @ y.transpose(1, 2)

    d_a = a_s - a_t
    same = a_s is b_s and a_t is b_t
    d_b = d_a if same else b_s - b_t
    d_a_d_a = outer(d_a, d_a)
    d_b_d_b = d_a_d_a if same else outer(d_b, d_b)
    a_t_a_t = teacher_side(("gram", "token products"), (a_t,), lambda: outer(a_t, a_t))
    b_s_b_s = outer(b_s, b_s)
    first = (d_a_d_a * b_s_b_s).sum(dim=(1, 2))
    second = (a_t_a_t * d_b_d_b).sum(dim=(1, 2))
    cross = (outer(d_a, a_t) * outer(b_s, d_b)).sum(dim=(1, 2))
    return first + second + 2 * cross
