"""Attention maps (feature-based, region ``attention``): the paper's attention MSE and CE (eq. 10, 11)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from kdgrid.core.knowledge import ShapeError, register
from kdgrid.core.losses._common import (
    expect_rank,
    masked_log_softmax,
    real_pairs,
    real_tokens,
    shape,
    token_count,
)
from kdgrid.core.teacher.targets import fixed, teacher_side
from kdgrid.errors import ConfigError


def _check_scores(scores_s: Tensor, scores_t: Tensor, mask: Tensor, loss: str) -> Tensor:
    expect_rank(scores_s, 4, loss, "student scores", "[B, H, L, L]")
    expect_rank(scores_t, 4, loss, "teacher scores", "[B, H, L, L]")
    if scores_s.shape[0] != scores_t.shape[0] or scores_s.shape[2:] != scores_t.shape[2:]:
        raise ShapeError(
            f"{loss}: student scores {shape(scores_s)} and teacher scores {shape(scores_t)} disagree on "
            "batch size or sequence length (head counts may differ)"
        )
    if scores_s.shape[-1] != scores_s.shape[-2]:
        raise ShapeError(f"{loss}: scores must be square over (query, key), got shape {shape(scores_s)}")
    return real_tokens(mask, scores_s.shape[0], scores_s.shape[-1], loss)


def _head_probs(scores: Tensor, pairs: Tensor) -> Tensor:
    """Per-head attention probabilities ``[B, H, L, L]`` over real keys (0 on padded keys)."""
    return masked_log_softmax(scores, pairs).exp().masked_fill(~pairs[:, None], 0.0)


@register(
    "attention_mse_sum",
    needs=["scores"],
    needs_projection=False,
    category="feature",
    region="attention",
    call_style="pair",
    source="paper eq. 10; TextBrewer att_mse_sum_loss",
    aliases=["att mse", "attn mse", "attention mse sum", "att mse sum"],
)
def attention_mse_sum(
    scores_s: Tensor, scores_t: Tensor, mask: Tensor, *, on: Literal["scores", "probs"] = "scores"
) -> Tensor:
    """Squared error between the head-summed attention maps (paper eq. 10).

    With ``A = sum_h scores[:, h]`` on each side (each side sums its own heads, so head counts may differ and a
    12-head teacher map is on a larger scale than a 2-head student map, as in the paper)::

        loss = sum_b sum_{i, j real} (A^S_bij - A^T_bij)^2 / sum_b len_b^2

    Args:
        scores_s: student attention scores ``[B, H_S, L, L]``, pre-softmax, padding bias on key columns.
        scores_t: teacher attention scores ``[B, H_T, L, L]`` (detached).
        mask: ``[B, L]``, 1 = real token. Only pairs (i, j) with both tokens real count.
        on: ``"scores"`` (default; the paper's numbers: TextBrewer's att_mse_sum on pre-softmax scores, as in
            TinyBERT) or ``"probs"``: the same on per-head softmax probabilities over the real keys.

    Returns:
        0-dim tensor; zero when the head-summed maps agree on every real pair.
    """
    real = _check_scores(scores_s, scores_t, mask, "attention_mse_sum")
    if on not in ("scores", "probs"):
        raise ConfigError(f"attention_mse_sum: on={on!r} is not one of 'scores', 'probs'")
    pairs = real_pairs(real)

    def head_sum(scores: Tensor) -> Tensor:
        maps = scores if on == "scores" else _head_probs(scores, pairs)
        # Pairs are the same for every head: mask after the head sum (one [B, L, L] pass instead of [B, H, L, L];
        # a padded entry, whatever its value, only reaches its own position, which the mask replaces).
        return maps.sum(dim=1).masked_fill(~pairs, 0.0)

    sum_s = head_sum(scores_s)
    sum_t = teacher_side(("attention_mse_sum", on), (scores_t, mask), lambda: head_sum(fixed(scores_t)))
    lengths = real.sum(dim=1).to(sum_s.dtype)
    return (sum_s - sum_t).pow(2).sum() / (lengths * lengths).sum().clamp_min(1)


@register(
    "attention_ce_mean",
    needs=["scores"],
    needs_projection=False,
    category="feature",
    region="attention",
    call_style="pair",
    source="paper eq. 11; TextBrewer att_ce_mean_loss",
    aliases=["att ce", "attn ce", "attention ce mean", "att ce mean"],
)
def attention_ce_mean(
    scores_s: Tensor, scores_t: Tensor, mask: Tensor, *, on: Literal["scores", "probs"] = "scores"
) -> Tensor:
    """Cross-entropy between the head-averaged attention distributions (paper eq. 11).

    With ``P = softmax_j(mean_h scores[:, h])`` over real keys j on each side (head counts may differ)::

        loss = - sum_b sum_{i real} sum_{j real} P^T_bij log P^S_bij / sum_b len_b

    i.e. a row-wise cross-entropy averaged over every real query row of the batch together.

    Args:
        scores_s: student attention scores ``[B, H_S, L, L]``, pre-softmax, padding bias on key columns.
        scores_t: teacher attention scores ``[B, H_T, L, L]`` (detached).
        mask: ``[B, L]``, 1 = real token; padded keys are excluded from both softmaxes, padded query rows
            from the average.
        on: ``"scores"`` (default; the paper's numbers: TextBrewer's att_ce_mean averages the pre-softmax
            scores over heads, then applies one softmax) or ``"probs"``: average the per-head probabilities.

    Returns:
        0-dim tensor. Not zero on identical inputs: its minimum is the teacher rows' entropy.
    """
    real = _check_scores(scores_s, scores_t, mask, "attention_ce_mean")
    if on not in ("scores", "probs"):
        raise ConfigError(f"attention_ce_mean: on={on!r} is not one of 'scores', 'probs'")
    pairs = real_pairs(real)

    def log_head_mean(scores: Tensor) -> Tensor:
        # Mean over heads first: the masked log-softmax then replaces every non-real pair (a padded entry only
        # reaches its own position, the same for every head).
        return masked_log_softmax(scores.mean(dim=1), pairs)

    def teacher_probs() -> Tensor:
        if on == "scores":
            return log_head_mean(fixed(scores_t)).exp()
        return _head_probs(fixed(scores_t), pairs).mean(dim=1)

    if on == "scores":
        log_p_s = log_head_mean(scores_s)
    else:
        log_p_s = _head_probs(scores_s, pairs).mean(dim=1).clamp_min(torch.finfo(scores_s.dtype).tiny).log()
    p_t = teacher_side(("attention_ce_mean", on), (scores_t, mask), teacher_probs)
    cross = (p_t * log_p_s).masked_fill(~pairs, 0.0).sum(dim=-1)
    return -cross.masked_fill(~real, 0.0).sum() / token_count(real, cross)
