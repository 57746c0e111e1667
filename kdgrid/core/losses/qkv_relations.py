"""Query / key / value relations (relation-based, region ``qkv``): MiniLMv2's self-relations (Wang et al., ACL
Findings 2021; the paper's Appendix A.2)."""

from __future__ import annotations

import math

from torch import Tensor

from kdgrid.core.knowledge import register
from kdgrid.core.losses._common import (
    expect_rank,
    expect_same_tokens,
    masked_log_softmax,
    real_pairs,
    real_tokens,
    token_count,
    zero_padding,
)
from kdgrid.core.teacher.targets import fixed, teacher_side
from kdgrid.errors import ConfigError


def _relation_kl(
    x_s: Tensor,
    x_t: Tensor,
    mask: Tensor,
    heads_s: int | None,
    heads_t: int | None,
    relation_heads: int | None,
    loss: str,
) -> Tensor:
    expect_rank(x_s, 3, loss, "student projections", "[B, L, d]")
    expect_rank(x_t, 3, loss, "teacher projections", "[B, L, d]")
    expect_same_tokens(x_s, x_t, loss, "projections")
    real = real_tokens(mask, x_s.shape[0], x_s.shape[1], loss)
    for side, heads, width in (("student", heads_s, x_s.shape[-1]), ("teacher", heads_t, x_t.shape[-1])):
        if heads is not None and (heads < 1 or width % heads):
            raise ConfigError(f"{loss}: {side} head count {heads} does not divide its width {width}")
    r = heads_s if relation_heads is None else relation_heads
    if r is None:
        raise ConfigError(f"{loss}: give relation_heads or the student's head count heads_s")
    for side, width in (("student", x_s.shape[-1]), ("teacher", x_t.shape[-1])):
        if r < 1 or width % r:
            raise ConfigError(
                f"{loss}: relation_heads={r} must be >= 1 and divide the {side} width {width} "
                f"(student width {x_s.shape[-1]}, teacher width {x_t.shape[-1]})"
            )
    pairs = real_pairs(real)
    log_s = _split_relation_log_probs(zero_padding(x_s, real), pairs, r)
    log_t = teacher_side(
        ("relation", r),
        (x_t, mask),
        lambda: _split_relation_log_probs(zero_padding(fixed(x_t), real), pairs, r),
    )
    kl = (log_t.exp() * (log_t - log_s)).masked_fill(~pairs[:, None], 0.0).sum(dim=-1)
    return kl.sum() / (r * token_count(real, kl))


def _split_relation_log_probs(x: Tensor, pairs: Tensor, heads: int) -> Tensor:
    """``[B, L, d]`` -> log softmax_j(x_i . x_j / sqrt(d / R)) per relation head, ``[B, R, L, L]``."""
    b, length, width = x.shape
    head_width = width // heads
    x = x.reshape(b, length, heads, head_width).transpose(1, 2)
    return masked_log_softmax(x @ x.transpose(-1, -2) / math.sqrt(head_width), pairs)


_RELATION_DOC = """{title} relation of MiniLMv2 (paper Appendix A.2, "{label}"): KL(teacher || student) of the
    scaled dot-product self-relations of the {what}.

    Both sides are re-split into R relation heads (R = ``relation_heads``, default the student's head count, so
    head counts and widths of student and teacher may differ), ``X_r`` of width d/R on each side::

        P_r = softmax_j(X_r X_r^T / sqrt(d / R))      over real keys j, each side with its own d
        loss = sum_b sum_r sum_{{i real}} KL(P^T_bri || P^S_bri) / (R * sum_b len_b)

    i.e. KL summed over keys, averaged over every (example, relation head, real query row) together. The
    paper's formula divides by sqrt(d); MiniLMv2 and kdgrid use the per-head width d/R.

    Args:
        {arg}_s: student {what} ``[B, L, d_S]`` before the head split (the linear layer's output).
        {arg}_t: teacher {what} ``[B, L, d_T]`` (detached).
        mask: ``[B, L]``, 1 = real token; padded keys are excluded from the softmax, padded rows from the mean.
        heads_s, heads_t: attention head counts (each must divide its width); heads_s is R's default, heads_t
            is only checked.
        relation_heads: R; must divide both widths. One of heads_s / relation_heads is required.
    """


@register(
    "query_relation",
    needs=["query"],
    needs_projection=False,
    category="relation",
    region="qkv",
    call_style="relation",
    source="paper Appendix A.2 (query/key/value relation); MiniLMv2",
    aliases=["qr", "q relation", "qq relation", "query"],
)
def query_relation(
    q_s: Tensor,
    q_t: Tensor,
    mask: Tensor,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
) -> Tensor:
    return _relation_kl(q_s, q_t, mask, heads_s, heads_t, relation_heads, "query_relation")


@register(
    "key_relation",
    needs=["key"],
    needs_projection=False,
    category="relation",
    region="qkv",
    call_style="relation",
    source="paper Appendix A.2 (query/key/value relation); MiniLMv2",
    aliases=["kr", "k relation", "kk relation", "key"],
)
def key_relation(
    k_s: Tensor,
    k_t: Tensor,
    mask: Tensor,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
) -> Tensor:
    return _relation_kl(k_s, k_t, mask, heads_s, heads_t, relation_heads, "key_relation")


@register(
    "value_relation",
    needs=["value"],
    needs_projection=False,
    category="relation",
    region="qkv",
    call_style="relation",
    source="paper Appendix A.2 (query/key/value relation); MiniLMv2",
    aliases=["vr", "v relation", "vv relation", "value"],
)
def value_relation(
    v_s: Tensor,
    v_t: Tensor,
    mask: Tensor,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
) -> Tensor:
    return _relation_kl(v_s, v_t, mask, heads_s, heads_t, relation_heads, "value_relation")


query_relation.__doc__ = _RELATION_DOC.format(title="Query", label="query relation", what="queries", arg="q")
key_relation.__doc__ = _RELATION_DOC.format(title="Key", label="key relation", what="keys", arg="k")
value_relation.__doc__ = _RELATION_DOC.format(title="Value", label="value relation", what="values", arg="v")
