"""Hidden states (feature-based, region ``hidden``): hidden MSE, cosine and PKD (paper eq. 12-14), and
TinyBERT's embedding MSE (layer 0)."""

from __future__ import annotations

from typing import Literal

from torch import Tensor

from kdgrid.core.knowledge import register
from kdgrid.core.losses._common import (
    expect_rank,
    expect_same_shape,
    expect_same_tokens,
    l2_normalize,
    projection_hint,
    real_tokens,
    teacher_zero_padded,
    token_count,
    zero_padding,
)
from kdgrid.core.teacher.targets import fixed, teacher_side
from kdgrid.errors import ConfigError


def check_hidden_same(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, loss: str) -> Tensor:
    expect_rank(hidden_s, 3, loss, "student hidden states", "[B, L, d]")
    expect_rank(hidden_t, 3, loss, "teacher hidden states", "[B, L, d]")
    expect_same_shape(hidden_s, hidden_t, loss, "hidden states", projection_hint(hidden_s, hidden_t))
    return real_tokens(mask, hidden_s.shape[0], hidden_s.shape[1], loss)


def check_hidden_tokens(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, loss: str) -> Tensor:
    expect_rank(hidden_s, 3, loss, "student hidden states", "[B, L, d]")
    expect_rank(hidden_t, 3, loss, "teacher hidden states", "[B, L, d]")
    expect_same_tokens(hidden_s, hidden_t, loss, "hidden states")
    return real_tokens(mask, hidden_s.shape[0], hidden_s.shape[1], loss)


def masked_mse(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, real: Tensor) -> Tensor:
    h_s = zero_padding(hidden_s, real)
    h_t = teacher_zero_padded(hidden_t, mask, real)
    return (h_s - h_t).pow(2).sum() / (token_count(real, h_s) * hidden_s.shape[-1])


@register(
    "hidden_mse",
    needs=["hidden"],
    needs_projection=True,
    category="feature",
    region="hidden",
    call_style="pair",
    source="paper eq. 12; TinyBERT L_hidn; TextBrewer hid_mse_loss",
    aliases=["hid mse", "hidden"],
)
def hidden_mse(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor) -> Tensor:
    """Mean squared error between hidden states over real tokens (paper eq. 12, TinyBERT's L_hidn)::

        loss = sum_b sum_{i real} ||H^S W - H^T||^2_bi / (sum_b len_b * d_T)

    Args:
        hidden_s: student hidden states already projected to the teacher's width, ``[B, L, d_T]``.
        hidden_t: teacher hidden states ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token; padded tokens are excluded from sum and count.

    The paper's eq. 12 writes the projection on the teacher side; like TinyBERT and TextBrewer we project the
    student up (W: d_S -> d_T), so the target stays the teacher's own representation.
    """
    real = check_hidden_same(hidden_s, hidden_t, mask, "hidden_mse")
    return masked_mse(hidden_s, hidden_t, mask, real)


@register(
    "cos",
    needs=["hidden"],
    needs_projection=True,
    category="feature",
    region="hidden",
    call_style="pair",
    source="paper eq. 13; TextBrewer cos_loss",
    aliases=["cosine", "hidden cos"],
)
def cos(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, *, eps: float = 1e-8) -> Tensor:
    """One minus the cosine similarity per real token, averaged over the real tokens (paper eq. 13)::

        loss = sum_b sum_{i real} (1 - <h^S_bi, h^T_bi> / (||h^S_bi|| ||h^T_bi||)) / sum_b len_b

    Args:
        hidden_s: student hidden states projected to the teacher's width ``[B, L, d_T]``.
        hidden_t: teacher hidden states ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token.
        eps: lower bound on each norm (guards zero vectors).
    """
    real = check_hidden_same(hidden_s, hidden_t, mask, "cos")
    h_s = l2_normalize(zero_padding(hidden_s, real), eps)
    h_t = teacher_side(
        ("cos", eps), (hidden_t, mask), lambda: l2_normalize(zero_padding(fixed(hidden_t), real), eps)
    )
    per_token = 1.0 - (h_s * h_t).sum(dim=-1)
    return per_token.masked_fill(~real, 0.0).sum() / token_count(real, per_token)


@register(
    "pkd",
    needs=["hidden"],
    needs_projection=True,
    category="feature",
    region="hidden",
    call_style="pair",
    source="paper eq. 14; PKD's patient loss L_PT (Sun et al., 2019); TextBrewer pkd_loss",
    aliases=["patient", "patient loss", "normalized mse"],
)
def pkd(
    hidden_s: Tensor,
    hidden_t: Tensor,
    mask: Tensor,
    *,
    scale: Literal["sum", "mean"] = "sum",
    eps: float = 1e-12,
) -> Tensor:
    """PKD's patient loss on the [CLS] vectors (paper eq. 14, PKD's L_PT for one layer pair).

    With ``c = H[:, 0]`` (position 0, the [CLS] token), each L2-normalised::

        scale="sum":  loss = mean_b || c^S_b / ||c^S_b|| - c^T_b / ||c^T_b|| ||^2      (summed over the width)
        scale="mean": the same divided by d_T (a mean over all B x d_T elements)

    ``"sum"`` is the default and what the paper's numbers used (TextBrewer's pkd_loss); ``"mean"`` is the
    per-element mean of PKD's released code (``F.mse_loss`` on the normalised vectors).

    Args:
        hidden_s: student hidden states projected to the teacher's width ``[B, L, d_T]``.
        hidden_t: teacher hidden states ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``; checked for shape only (position 0 is the [CLS] token, always real).
        scale: ``"sum"`` | ``"mean"`` as above.
        eps: lower bound on the norms.
    """
    check_hidden_same(hidden_s, hidden_t, mask, "pkd")
    if scale not in ("sum", "mean"):
        raise ConfigError(f"pkd: scale={scale!r} is not one of 'sum', 'mean'")
    c_s = l2_normalize(hidden_s[:, 0], eps)
    c_t = l2_normalize(fixed(hidden_t)[:, 0], eps)
    loss = (c_s - c_t).pow(2).sum(dim=-1).mean()
    return loss / hidden_s.shape[-1] if scale == "mean" else loss



@register(
    "embedding_mse",
    needs=["embeddings"],
    needs_projection=True,
    category="feature",
    region="embeddings",
    call_style="pair",
    placement="embeddings",
    source="TinyBERT L_embd (Jiao et al., 2020)",
    aliases=["embd", "embedding", "embeddings mse"],
)
def embedding_mse(emb_s: Tensor, emb_t: Tensor, mask: Tensor) -> Tensor:
    """TinyBERT's embedding loss: MSE(E^S W_e, E^T) over real tokens, applied to layer 0 (the embeddings)::

        loss = sum_b sum_{i real} ||E^S W_e - E^T||^2_bi / (sum_b len_b * d_T)

    Args:
        emb_s: student embedding-layer output projected to the teacher's width ``[B, L, d_T]``.
        emb_t: teacher embedding-layer output ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token. (TinyBERT's code averages over padding too; we do not.)
    """
    real = check_hidden_same(emb_s, emb_t, mask, "embedding_mse")
    return masked_mse(emb_s, emb_t, mask, real)
