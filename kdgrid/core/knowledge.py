"""Every knowledge type of the paper (Appendix A.2) and of related work, one function per formula.

Conventions shared by every function (``docs/design.md``, "Loss conventions", restates them with each formula):

* Argument order: student first, teacher second, then the padding mask.
* Shapes: attention scores ``[B, H, L, L]`` (pre-softmax, the padding bias already added on key columns; the
  head counts of student and teacher may differ), hidden states ``[B, L, d]``, queries / keys / values
  ``[B, L, d]`` before the head split, logits ``[B, C]``, sentence vectors ``[B, d]``, mask ``[B, L]`` with 1 for
  a real token and 0 for padding.
* Padding never leaks into a loss: padded positions are replaced (not multiplied) before any arithmetic, so a
  batch with padding of any length and any content (even NaN) gives the same value as the unpadded batch.
* The teacher is a fixed target: every function calls ``.detach()`` on its teacher inputs, so gradients reach
  the student (and a projection applied to the student) only, whether or not the caller ran the teacher under
  ``torch.no_grad()``. What a function derives from the teacher alone (a Gram product, a head-mean attention
  distribution, relation log-probabilities) goes through `kdgrid.core.teacher_targets.teacher_side`, so the
  students of one group compute it once per batch.
* Each function returns a 0-dim tensor, unweighted: the objective multiplies by beta / alpha.
* Where the student must be in the teacher's width (``needs_projection`` in the registry) the caller passes the
  student already projected by a `kdgrid.core.projection.Projection`; `compute_knowledge` does that for it.

The registry `KNOWLEDGE` is filled by the `register` decorator beside each definition: a sweep may name any
registered knowledge, and the paper's written names ("attention mse", "vr", ...) are accepted through
`canonical_knowledge` / `paper_name`.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from kdgrid.core.teacher_targets import teacher_side
from kdgrid.errors import ConfigError
from kdgrid.suggest import did_you_mean

FEATURES: frozenset[str] = frozenset(
    {"scores", "hidden", "query", "key", "value", "logits", "sentence", "embeddings"}
)
Category = Literal["response", "feature", "relation"]
# How `compute_knowledge` calls a function:
#   "pair"     fn(student, teacher, mask, **options)
#   "relation" fn(student, teacher, mask, heads_s, heads_t, relation_heads, **options)
#   "soft"     fn(student_logits, teacher_logits, temperature, **options)
#   "hard"     fn(student_logits, labels, **options)
#   "batch"    fn(student_sentence, teacher_sentence, **options)   (also accepts an unused mask third)
CallStyle = Literal["pair", "relation", "soft", "hard", "batch"]
# Which layers a knowledge is applied on: the strategy's pairs, the embeddings (0, 0), or none (logits and
# sentence vectors, taken once per example).
Placement = Literal["pairs", "embeddings", "output"]


class ShapeError(ConfigError):
    """Student and teacher tensors (or the mask) do not fit together; the message gives the shapes."""


@dataclass(frozen=True)
class KnowledgeSpec:
    """What a knowledge type is and what it needs.

    Attributes:
        name: the registry name (the paper's table name for the ten paper types, e.g. ``attention_mse_sum``).
        fn: the loss function.
        needs: the features it reads, drawn from `FEATURES`.
        needs_projection: whether the student must first be projected to the teacher's width.
        category: ``response`` | ``feature`` | ``relation`` (the paper's taxonomy).
        region: where it acts: ``attention`` | ``hidden`` | ``qkv`` (the paper's three double-match regions),
            or ``logits`` | ``embeddings`` | ``sentence`` for the others.
        in_paper: one of the paper's ten intermediate knowledge types (`kdgrid.paper.PAPER_KNOWLEDGE`).
        paper_label: the name as the paper's prose writes it (``attention mse``).
        call_style: how `compute_knowledge` passes arguments (see the module comment).
        placement: ``pairs`` (each of the strategy's layer pairs), ``embeddings`` (layer 0 of both) or
            ``output`` (once per batch, no layer).
        source: where the formula comes from.
    """

    name: str
    fn: Callable[..., Tensor]
    needs: frozenset[str]
    needs_projection: bool
    category: Category
    region: str
    in_paper: bool
    paper_label: str
    call_style: CallStyle
    placement: Placement
    source: str

    def options(self) -> dict[str, Any]:
        """The keyword-only variants of `fn` with their defaults (e.g. ``{"scale": "sum"}`` for pkd)."""
        return {
            p.name: p.default
            for p in inspect.signature(self.fn).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }


KNOWLEDGE: dict[str, KnowledgeSpec] = {}
_ALIASES: dict[str, str] = {}


def register(
    name: str,
    *,
    needs: Sequence[str],
    needs_projection: bool,
    category: Category,
    region: str,
    in_paper: bool,
    paper_label: str,
    call_style: CallStyle,
    placement: Placement = "pairs",
    source: str,
    aliases: Sequence[str] = (),
) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Register the decorated loss under ``name`` (and the written ``aliases``) in `KNOWLEDGE`."""
    unknown = sorted(set(needs) - FEATURES)
    if unknown:
        raise ValueError(
            f"knowledge {name!r} needs unknown feature(s) {unknown}; allowed: {sorted(FEATURES)}"
        )

    def decorate(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        if name in KNOWLEDGE:
            raise ValueError(f"knowledge {name!r} is registered twice")
        KNOWLEDGE[name] = KnowledgeSpec(
            name=name,
            fn=fn,
            needs=frozenset(needs),
            needs_projection=needs_projection,
            category=category,
            region=region,
            in_paper=in_paper,
            paper_label=paper_label,
            call_style=call_style,
            placement=placement,
            source=source,
        )
        for alias in (name, paper_label, *aliases):
            _ALIASES[_alias_key(alias)] = name
        return fn

    return decorate


def _alias_key(name: str) -> str:
    # "Attention MSE", "attention_mse", "attention-mse" all read the same.
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


# --------------------------------------------------------------------------------------------------------------
# Validation and masking helpers
# --------------------------------------------------------------------------------------------------------------


def _shape(x: Tensor) -> str:
    return "[" + ", ".join(str(s) for s in x.shape) + "]"


def _expect_rank(x: Tensor, rank: int, loss: str, what: str, layout: str) -> None:
    if x.dim() != rank:
        raise ShapeError(f"{loss}: {what} must be {layout}, got shape {_shape(x)}")


def _expect_same_shape(s: Tensor, t: Tensor, loss: str, what: str, hint: str = "") -> None:
    if s.shape != t.shape:
        raise ShapeError(f"{loss}: student {what} {_shape(s)} and teacher {what} {_shape(t)} differ{hint}")


def _projection_hint(s: Tensor, t: Tensor) -> str:
    if s.shape[:-1] == t.shape[:-1] and s.shape[-1] != t.shape[-1]:
        return (
            f" (student width {s.shape[-1]} vs teacher width {t.shape[-1]}: project the student with "
            "kdgrid.core.projection.Projection first)"
        )
    return ""


def _expect_same_tokens(s: Tensor, t: Tensor, loss: str, what: str) -> None:
    """Student and teacher agree on batch and sequence length (the leading dims); widths or heads may differ."""
    if s.shape[0] != t.shape[0] or s.shape[-2] != t.shape[-2]:
        raise ShapeError(
            f"{loss}: student {what} {_shape(s)} and teacher {what} {_shape(t)} disagree on batch size or "
            "sequence length"
        )


def _real_tokens(mask: Tensor, batch: int, length: int, loss: str) -> Tensor:
    """The mask as bool ``[B, L]``, checked against the batch it belongs to."""
    if mask.dim() != 2 or mask.shape[0] != batch or mask.shape[1] != length:
        raise ShapeError(f"{loss}: mask must be [B, L] = [{batch}, {length}], got shape {_shape(mask)}")
    return mask.bool()


def _real_pairs(real: Tensor) -> Tensor:
    """``[B, L, L]``: (query i, key j) where both are real tokens."""
    return real[:, :, None] & real[:, None, :]


def _token_count(real: Tensor, like: Tensor) -> Tensor:
    """sum_b len_b as a float tensor (at least 1, so an all-padding batch gives 0 rather than NaN)."""
    return real.sum().to(like.dtype).clamp_min(1)


def _zero_padding(x: Tensor, real: Tensor) -> Tensor:
    """``[B, L, d]`` with padded rows replaced by zeros (replacement, so NaN/inf padding cannot leak)."""
    return x.masked_fill(~real[:, :, None], 0.0)


def _teacher_zero_padded(hidden_t: Tensor, mask: Tensor, real: Tensor) -> Tensor:
    """The teacher's ``[B, L, d]`` with padded rows zeroed, detached; once per batch for a whole group."""
    return teacher_side(("zero_padding",), (hidden_t, mask), lambda: _zero_padding(hidden_t.detach(), real))


def _masked_log_softmax(x: Tensor, pairs: Tensor) -> Tensor:
    """log-softmax over the last (key) axis with non-real (query, key) entries excluded.

    ``x`` is ``[B, ..., L, L]`` and ``pairs`` ``[B, L, L]``. Excluded entries get the dtype's most negative
    finite value (not -inf, so fully padded rows stay finite and never produce NaN gradients).
    """
    while pairs.dim() < x.dim():
        pairs = pairs.unsqueeze(1)
    return F.log_softmax(x.masked_fill(~pairs, torch.finfo(x.dtype).min), dim=-1)


def _l2_normalize(x: Tensor, eps: float) -> Tensor:
    # sqrt of a clamped square sum: the gradient stays finite at the zero vector (unlike x / x.norm()).
    return x / (x * x).sum(dim=-1, keepdim=True).clamp_min(eps * eps).sqrt()


# --------------------------------------------------------------------------------------------------------------
# Attention (feature-based, region "attention")
# --------------------------------------------------------------------------------------------------------------


def _check_scores(scores_s: Tensor, scores_t: Tensor, mask: Tensor, loss: str) -> Tensor:
    _expect_rank(scores_s, 4, loss, "student scores", "[B, H, L, L]")
    _expect_rank(scores_t, 4, loss, "teacher scores", "[B, H, L, L]")
    if scores_s.shape[0] != scores_t.shape[0] or scores_s.shape[2:] != scores_t.shape[2:]:
        raise ShapeError(
            f"{loss}: student scores {_shape(scores_s)} and teacher scores {_shape(scores_t)} disagree on "
            "batch size or sequence length (head counts may differ)"
        )
    if scores_s.shape[-1] != scores_s.shape[-2]:
        raise ShapeError(f"{loss}: scores must be square over (query, key), got shape {_shape(scores_s)}")
    return _real_tokens(mask, scores_s.shape[0], scores_s.shape[-1], loss)


def _head_probs(scores: Tensor, pairs: Tensor) -> Tensor:
    """Per-head attention probabilities ``[B, H, L, L]`` over real keys (0 on padded keys)."""
    return _masked_log_softmax(scores, pairs).exp().masked_fill(~pairs[:, None], 0.0)


@register(
    "attention_mse_sum",
    needs=["scores"],
    needs_projection=False,
    category="feature",
    region="attention",
    in_paper=True,
    paper_label="attention mse",
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
    pairs = _real_pairs(real)

    def head_sum(scores: Tensor) -> Tensor:
        maps = scores if on == "scores" else _head_probs(scores, pairs)
        # Pairs are the same for every head: mask after the head sum (one [B, L, L] pass instead of [B, H, L, L];
        # a padded entry, whatever its value, only reaches its own position, which the mask replaces).
        return maps.sum(dim=1).masked_fill(~pairs, 0.0)

    sum_s = head_sum(scores_s)
    sum_t = teacher_side(("attention_mse_sum", on), (scores_t, mask), lambda: head_sum(scores_t.detach()))
    lengths = real.sum(dim=1).to(sum_s.dtype)
    return (sum_s - sum_t).pow(2).sum() / (lengths * lengths).sum().clamp_min(1)


@register(
    "attention_ce_mean",
    needs=["scores"],
    needs_projection=False,
    category="feature",
    region="attention",
    in_paper=True,
    paper_label="attention ce",
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
    pairs = _real_pairs(real)

    def log_head_mean(scores: Tensor) -> Tensor:
        # Mean over heads first: the masked log-softmax then replaces every non-real pair (a padded entry only
        # reaches its own position, the same for every head).
        return _masked_log_softmax(scores.mean(dim=1), pairs)

    def teacher_probs() -> Tensor:
        if on == "scores":
            return log_head_mean(scores_t.detach()).exp()
        return _head_probs(scores_t.detach(), pairs).mean(dim=1)

    if on == "scores":
        log_p_s = log_head_mean(scores_s)
    else:
        log_p_s = _head_probs(scores_s, pairs).mean(dim=1).clamp_min(torch.finfo(scores_s.dtype).tiny).log()
    p_t = teacher_side(("attention_ce_mean", on), (scores_t, mask), teacher_probs)
    cross = (p_t * log_p_s).masked_fill(~pairs, 0.0).sum(dim=-1)
    return -cross.masked_fill(~real, 0.0).sum() / _token_count(real, cross)


# --------------------------------------------------------------------------------------------------------------
# Hidden states (feature-based, region "hidden")
# --------------------------------------------------------------------------------------------------------------


def _check_hidden_same(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, loss: str) -> Tensor:
    _expect_rank(hidden_s, 3, loss, "student hidden states", "[B, L, d]")
    _expect_rank(hidden_t, 3, loss, "teacher hidden states", "[B, L, d]")
    _expect_same_shape(hidden_s, hidden_t, loss, "hidden states", _projection_hint(hidden_s, hidden_t))
    return _real_tokens(mask, hidden_s.shape[0], hidden_s.shape[1], loss)


def _check_hidden_tokens(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, loss: str) -> Tensor:
    _expect_rank(hidden_s, 3, loss, "student hidden states", "[B, L, d]")
    _expect_rank(hidden_t, 3, loss, "teacher hidden states", "[B, L, d]")
    _expect_same_tokens(hidden_s, hidden_t, loss, "hidden states")
    return _real_tokens(mask, hidden_s.shape[0], hidden_s.shape[1], loss)


def _masked_mse(hidden_s: Tensor, hidden_t: Tensor, mask: Tensor, real: Tensor) -> Tensor:
    h_s = _zero_padding(hidden_s, real)
    h_t = _teacher_zero_padded(hidden_t, mask, real)
    return (h_s - h_t).pow(2).sum() / (_token_count(real, h_s) * hidden_s.shape[-1])


@register(
    "hidden_mse",
    needs=["hidden"],
    needs_projection=True,
    category="feature",
    region="hidden",
    in_paper=True,
    paper_label="hidden mse",
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
    real = _check_hidden_same(hidden_s, hidden_t, mask, "hidden_mse")
    return _masked_mse(hidden_s, hidden_t, mask, real)


@register(
    "cos",
    needs=["hidden"],
    needs_projection=True,
    category="feature",
    region="hidden",
    in_paper=True,
    paper_label="cos",
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
    real = _check_hidden_same(hidden_s, hidden_t, mask, "cos")
    h_s = _l2_normalize(_zero_padding(hidden_s, real), eps)
    h_t = teacher_side(
        ("cos", eps), (hidden_t, mask), lambda: _l2_normalize(_zero_padding(hidden_t.detach(), real), eps)
    )
    per_token = 1.0 - (h_s * h_t).sum(dim=-1)
    return per_token.masked_fill(~real, 0.0).sum() / _token_count(real, per_token)


@register(
    "pkd",
    needs=["hidden"],
    needs_projection=True,
    category="feature",
    region="hidden",
    in_paper=True,
    paper_label="pkd",
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
    _check_hidden_same(hidden_s, hidden_t, mask, "pkd")
    if scale not in ("sum", "mean"):
        raise ConfigError(f"pkd: scale={scale!r} is not one of 'sum', 'mean'")
    c_s = _l2_normalize(hidden_s[:, 0], eps)
    c_t = _l2_normalize(hidden_t.detach()[:, 0], eps)
    loss = (c_s - c_t).pow(2).sum(dim=-1).mean()
    return loss / hidden_s.shape[-1] if scale == "mean" else loss


# --------------------------------------------------------------------------------------------------------------
# Hidden-state relations (relation-based, region "hidden")
# --------------------------------------------------------------------------------------------------------------


@register(
    "mmd",
    needs=["hidden"],
    needs_projection=False,
    category="relation",
    region="hidden",
    in_paper=True,
    paper_label="mmd",
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
    real = _check_hidden_tokens(hidden_s, hidden_t, mask, "mmd")
    h2_s = hidden_s if second_s is None else second_s
    h2_t = hidden_t if second_t is None else second_t
    _expect_same_shape(hidden_s, h2_s, "mmd", "H_1 / H_2 hidden states")
    _expect_same_shape(hidden_t, h2_t, "mmd", "H_1 / H_2 hidden states")
    if scale not in ("width", "length"):
        raise ConfigError(f"mmd: scale={scale!r} is not one of 'width', 'length'")
    pairs = _real_pairs(real)
    lengths = real.sum(dim=1).to(hidden_s.dtype)

    def similarity(h1: Tensor, h2: Tensor) -> Tensor:
        gram = _zero_padding(h1, real) @ _zero_padding(h2, real).transpose(1, 2)
        return gram / (h1.shape[-1] if scale == "width" else lengths.clamp_min(1)[:, None, None])

    gram_s = similarity(hidden_s, h2_s)
    gram_t = teacher_side(
        ("mmd", scale), (hidden_t, h2_t, mask), lambda: similarity(hidden_t.detach(), h2_t.detach())
    )
    squared = (gram_s - gram_t).pow(2).masked_fill(~pairs, 0.0)
    return squared.sum() / (lengths * lengths).sum().clamp_min(1)


@register(
    "gram",
    needs=["hidden"],
    needs_projection=True,
    category="relation",
    region="hidden",
    in_paper=True,
    paper_label="gram",
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
    real = _check_hidden_same(hidden_s, hidden_t, mask, "gram")
    h2_s = hidden_s if second_s is None else second_s
    h2_t = hidden_t if second_t is None else second_t
    _expect_same_shape(hidden_s, h2_s, "gram", "H_1 / H_2 hidden states")
    _expect_same_shape(hidden_t, h2_t, "gram", "H_1 / H_2 hidden states")
    batch, length, width = hidden_s.shape
    lengths = real.sum(dim=1).to(hidden_s.dtype).clamp_min(1)
    a_s = _zero_padding(hidden_s, real)
    b_s = a_s if h2_s is hidden_s else _zero_padding(h2_s, real)
    a_t = _teacher_zero_padded(hidden_t, mask, real)
    b_t = a_t if h2_t is hidden_t else _zero_padding(h2_t.detach(), real)
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


# --------------------------------------------------------------------------------------------------------------
# Query / key / value relations (relation-based, region "qkv"; MiniLMv2)
# --------------------------------------------------------------------------------------------------------------


def _relation_kl(
    x_s: Tensor,
    x_t: Tensor,
    mask: Tensor,
    heads_s: int | None,
    heads_t: int | None,
    relation_heads: int | None,
    loss: str,
) -> Tensor:
    _expect_rank(x_s, 3, loss, "student projections", "[B, L, d]")
    _expect_rank(x_t, 3, loss, "teacher projections", "[B, L, d]")
    _expect_same_tokens(x_s, x_t, loss, "projections")
    real = _real_tokens(mask, x_s.shape[0], x_s.shape[1], loss)
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
    pairs = _real_pairs(real)
    log_s = _split_relation_log_probs(_zero_padding(x_s, real), pairs, r)
    log_t = teacher_side(
        ("relation", r),
        (x_t, mask),
        lambda: _split_relation_log_probs(_zero_padding(x_t.detach(), real), pairs, r),
    )
    kl = (log_t.exp() * (log_t - log_s)).masked_fill(~pairs[:, None], 0.0).sum(dim=-1)
    return kl.sum() / (r * _token_count(real, kl))


def _split_relation_log_probs(x: Tensor, pairs: Tensor, heads: int) -> Tensor:
    """``[B, L, d]`` -> log softmax_j(x_i . x_j / sqrt(d / R)) per relation head, ``[B, R, L, L]``."""
    b, length, width = x.shape
    head_width = width // heads
    x = x.reshape(b, length, heads, head_width).transpose(1, 2)
    return _masked_log_softmax(x @ x.transpose(-1, -2) / math.sqrt(head_width), pairs)


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


def _relation_spec(name: str, label: str, aliases: Sequence[str]) -> Callable[..., Any]:
    return register(
        name,
        needs=[name.split("_")[0]],
        needs_projection=False,
        category="relation",
        region="qkv",
        in_paper=True,
        paper_label=label,
        call_style="relation",
        source="paper Appendix A.2 (query/key/value relation); MiniLMv2",
        aliases=aliases,
    )


@_relation_spec("query_relation", "query relation", ["qr", "q relation", "qq relation", "query"])
def query_relation(
    q_s: Tensor,
    q_t: Tensor,
    mask: Tensor,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
) -> Tensor:
    return _relation_kl(q_s, q_t, mask, heads_s, heads_t, relation_heads, "query_relation")


@_relation_spec("key_relation", "key relation", ["kr", "k relation", "kk relation", "key"])
def key_relation(
    k_s: Tensor,
    k_t: Tensor,
    mask: Tensor,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
) -> Tensor:
    return _relation_kl(k_s, k_t, mask, heads_s, heads_t, relation_heads, "key_relation")


@_relation_spec("value_relation", "value relation", ["vr", "v relation", "vv relation", "value"])
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


# --------------------------------------------------------------------------------------------------------------
# Responses (logits)
# --------------------------------------------------------------------------------------------------------------


def _is_regression(logits: Tensor, regression: bool | None) -> bool:
    return logits.shape[-1] == 1 if regression is None else regression


@register(
    "soft_label",
    needs=["logits"],
    needs_projection=False,
    category="response",
    region="logits",
    in_paper=False,
    paper_label="soft label",
    call_style="soft",
    placement="output",
    source="paper eq. 9 (soft targets); Hinton et al.; TextBrewer kd_ce_loss / kd_mse_loss",
    aliases=["soft", "kd", "soft labels", "soft targets"],
)
def soft_label(
    logits_s: Tensor,
    logits_t: Tensor,
    temperature: float = 1.0,
    *,
    t2: bool = False,
    regression: bool | None = None,
) -> Tensor:
    """Soft-target loss at temperature T, averaged over the batch.

    Classification (``[B, C]``, C > 1)::

        loss = - mean_b sum_c softmax(z^T_b / T)_c log softmax(z^S_b / T)_c

    Regression (``[B, 1]`` or ``regression=True``; STS-B)::

        loss = mean_b ((z^S_b - z^T_b) / T)^2

    Args:
        logits_s: student logits ``[B, C]``.
        logits_t: teacher logits ``[B, C]`` (detached).
        temperature: T > 0.
        t2: multiply by T^2 (Hinton's gradient-scale correction). Default False: the paper's numbers
            (TextBrewer's kd_ce_loss / kd_mse_loss, the temperatures of its Table 4) have no T^2.
        regression: force the regression form; default: regression iff C == 1.
    """
    _expect_rank(logits_s, 2, "soft_label", "student logits", "[B, C]")
    _expect_same_shape(logits_s, logits_t, "soft_label", "logits")
    if not temperature > 0:
        raise ConfigError(f"soft_label: temperature must be > 0, got {temperature}")
    z_s, z_t = logits_s / temperature, logits_t.detach() / temperature
    if _is_regression(logits_s, regression):
        loss = (z_s - z_t).pow(2).mean()
    else:
        loss = -(F.softmax(z_t, dim=-1) * F.log_softmax(z_s, dim=-1)).sum(dim=-1).mean()
    return loss * temperature**2 if t2 else loss


@register(
    "hard_label",
    needs=["logits"],
    needs_projection=False,
    category="response",
    region="logits",
    in_paper=False,
    paper_label="hard label",
    call_style="hard",
    placement="output",
    source="paper eq. 9 (hard labels, weight alpha)",
    aliases=["hard", "hard labels"],
)
def hard_label(logits_s: Tensor, labels: Tensor, *, regression: bool | None = None) -> Tensor:
    """Supervised loss on the gold labels, averaged over the batch (the objective weights it by alpha).

    Classification: ``mean_b -log softmax(z^S_b)_{y_b}`` (labels ``[B]`` integer classes).
    Regression (``[B, 1]`` logits or ``regression=True``): ``mean_b (z^S_b - y_b)^2`` (labels ``[B]`` floats).
    """
    _expect_rank(logits_s, 2, "hard_label", "student logits", "[B, C]")
    if labels.dim() != 1 or labels.shape[0] != logits_s.shape[0]:
        raise ShapeError(
            f"hard_label: labels must be [B] = [{logits_s.shape[0]}] for logits {_shape(logits_s)}, "
            f"got shape {_shape(labels)}"
        )
    if _is_regression(logits_s, regression):
        if logits_s.shape[-1] != 1:
            raise ShapeError(f"hard_label: regression needs logits [B, 1], got shape {_shape(logits_s)}")
        return (logits_s[:, 0] - labels.to(logits_s.dtype)).pow(2).mean()
    return F.cross_entropy(logits_s, labels.long())


# --------------------------------------------------------------------------------------------------------------
# From related work: TinyBERT, linear CKA, contrastive (InfoNCE) distillation, ReAugKD
# --------------------------------------------------------------------------------------------------------------


@register(
    "embedding_mse",
    needs=["embeddings"],
    needs_projection=True,
    category="feature",
    region="embeddings",
    in_paper=False,
    paper_label="embedding mse",
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
    real = _check_hidden_same(emb_s, emb_t, mask, "embedding_mse")
    return _masked_mse(emb_s, emb_t, mask, real)


@register(
    "cka",
    needs=["hidden"],
    needs_projection=False,
    category="relation",
    region="hidden",
    in_paper=False,
    paper_label="cka",
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
    real = _check_hidden_tokens(hidden_s, hidden_t, mask, "cka")
    x = _centre_over_tokens(_zero_padding(hidden_s, real), real).flatten(0, 1)

    def teacher_part() -> tuple[Tensor, Tensor]:
        y = _centre_over_tokens(_zero_padding(hidden_t.detach(), real), real).flatten(0, 1)
        return y, (y.T @ y).pow(2).sum().clamp_min(eps).sqrt()

    y, self_y = teacher_side(("cka", eps), (hidden_t, mask), teacher_part)
    cross = (y.T @ x).pow(2).sum()
    self_x = (x.T @ x).pow(2).sum().clamp_min(eps).sqrt()
    return 1.0 - cross / (self_x * self_y)


def _centre_over_tokens(h: Tensor, real: Tensor) -> Tensor:
    """Subtract the mean over all real tokens of the batch; padded rows stay zero. ``[B, L, d]``."""
    mean = h.sum(dim=(0, 1)) / _token_count(real, h)
    return (h - mean).masked_fill(~real[:, :, None], 0.0)


def _check_sentences(s: Tensor, t: Tensor, loss: str) -> None:
    _expect_rank(s, 2, loss, "student sentence vectors", "[B, d]")
    _expect_rank(t, 2, loss, "teacher sentence vectors", "[B, d]")
    _expect_same_shape(s, t, loss, "sentence vectors", _projection_hint(s, t))


@register(
    "contrastive",
    needs=["sentence"],
    needs_projection=True,
    category="feature",
    region="sentence",
    in_paper=False,
    paper_label="contrastive",
    call_style="batch",
    placement="output",
    source="InfoNCE between sentence vectors (CoDIR, KDFA)",
    aliases=["infonce", "info nce"],
)
def contrastive(
    sentence_s: Tensor, sentence_t: Tensor, mask: Tensor | None = None, *, tau: float = 0.07
) -> Tensor:
    """InfoNCE between student and teacher sentence vectors over the batch.

    With cosine similarities ``s_ik = cos(x^S_i, x^T_k)``, the teacher vector of the same example the positive
    and the other examples' teacher vectors the negatives::

        loss = - mean_i log( exp(s_ii / tau) / sum_k exp(s_ik / tau) )

    Args:
        sentence_s: student sentence vectors projected to the teacher's width ``[B, d_T]``.
        sentence_t: teacher sentence vectors ``[B, d_T]`` (detached).
        mask: unused (sentence vectors carry no padding); accepted so that every knowledge function takes
            (student, teacher, mask).
        tau: the temperature, > 0 (default 0.07, SupCon's temperature). Named
            ``tau`` so it is never confused with the soft-label temperature T.

    Not zero on identical inputs (its floor depends on how distinct the batch's vectors are); needs B >= 2 to
    carry any signal.
    """
    _check_sentences(sentence_s, sentence_t, "contrastive")
    if not tau > 0:
        raise ConfigError(f"contrastive: tau must be > 0, got {tau}")
    logits = _l2_normalize(sentence_s, 1e-12) @ _l2_normalize(sentence_t.detach(), 1e-12).T / tau
    return F.cross_entropy(logits, torch.arange(logits.shape[0], device=logits.device))


@register(
    "reaug_relation",
    needs=["sentence"],
    needs_projection=True,
    category="relation",
    region="sentence",
    in_paper=False,
    paper_label="reaug relation",
    call_style="batch",
    placement="output",
    source="ReAugKD (Zhang et al., 2023) eq. 1-3",
    aliases=["reaugkd", "reaug"],
)
def reaug_relation(
    sentence_s: Tensor,
    sentence_t: Tensor,
    mask: Tensor | None = None,
    *,
    tau: float = 0.07,
    normalize: bool = True,
) -> Tensor:
    """ReAugKD's relational loss: KL between teacher-teacher and student-teacher similarity distributions.

    With z the teacher vectors and x the student vectors of the batch (eq. 1 and 2; the paper's
    ``exp(z_i . z_j)/tau`` is read as ``exp(z_i . z_j / tau)``)::

        q_ij    = softmax_j(z_i . z_j / tau)        (teacher anchor i over teacher vectors j)
        qbar_ij = softmax_j(x_i . z_j / tau)        (student anchor i over teacher vectors j)
        loss    = mean_i sum_j q_ij (log q_ij - log qbar_ij)          = mean_i KL(q_i || qbar_i)   (eq. 3)

    Args:
        sentence_s: student sentence vectors in the teacher's width ``[B, d_T]`` (ReAugKD projects the
            teacher down with a SupCon-trained head; here a `Projection` maps the student up).
        sentence_t: teacher sentence vectors ``[B, d_T]`` (detached).
        mask: unused (sentence vectors carry no padding); accepted for the (student, teacher, mask) form.
        tau: the temperature, > 0 (default 0.07, ReAugKD's SupCon temperature).
        normalize: L2-normalise both sides first (default True: the paper speaks of cosine similarities).

    Zero when the student vectors equal the teacher's.
    """
    _check_sentences(sentence_s, sentence_t, "reaug_relation")
    if not tau > 0:
        raise ConfigError(f"reaug_relation: tau must be > 0, got {tau}")
    x, z = sentence_s, sentence_t.detach()
    if normalize:
        x, z = _l2_normalize(x, 1e-12), _l2_normalize(z, 1e-12)
    log_q = F.log_softmax(z @ z.T / tau, dim=-1)
    log_qbar = F.log_softmax(x @ z.T / tau, dim=-1)
    return (log_q.exp() * (log_q - log_qbar)).sum(dim=-1).mean()


# --------------------------------------------------------------------------------------------------------------
# Names, the paper's lists, and one uniform way to call any knowledge
# --------------------------------------------------------------------------------------------------------------


def canonical_knowledge(name: str) -> str:
    """The registry name for a registry name, the paper's written name or an alias (case, spaces, ``_`` and
    ``-`` ignored): ``"Attention MSE"`` -> ``attention_mse_sum``, ``"vr"`` -> ``value_relation``.

    Raises ConfigError listing the valid names.
    """
    if not isinstance(name, str) or _alias_key(name) not in _ALIASES:
        raise ConfigError(
            f"unknown knowledge {name!r}; valid names: {', '.join(KNOWLEDGE)} "
            f"(the paper's written names such as 'attention mse' or 'vr' are accepted too)"
            f"{did_you_mean(str(name), KNOWLEDGE)}"
        )
    return _ALIASES[_alias_key(name)]


# The three regions of the double-match study, in the order the paper's pair names put them.
DOUBLE_MATCH_REGIONS: tuple[str, ...] = ("attention", "hidden", "qkv")


def canonical_pair(first: str, second: str) -> tuple[str, str]:
    """Two knowledge names (any alias) in the paper's order: by region (attention, hidden, qkv), then name."""
    a, b = canonical_knowledge(first), canonical_knowledge(second)
    if a == b:
        raise ConfigError(f"a double match needs two different knowledge types, got {a!r} twice")
    order = {region: i for i, region in enumerate(DOUBLE_MATCH_REGIONS)}
    key_a = (order.get(KNOWLEDGE[a].region, len(order)), a)
    key_b = (order.get(KNOWLEDGE[b].region, len(order)), b)
    return (a, b) if key_a <= key_b else (b, a)


def paper_name(name: str) -> str:
    """Map a name as the paper (or its OCR'd tables) writes it to the registry name.

    ``paper_name("attention mse") == "attention_mse_sum"``, ``paper_name("query relation") ==
    "query_relation"``, ``paper_name("vr") == "value_relation"``. A combined cell such as
    ``"attention ce, vr"`` is not one name: split it first (or use `canonical_pair`). The written form of a
    registry name is ``KNOWLEDGE[name].paper_label``.
    """
    return canonical_knowledge(name)


def get_knowledge(name: str) -> KnowledgeSpec:
    """The spec of a knowledge type by any accepted name; ConfigError listing the valid names otherwise."""
    return KNOWLEDGE[canonical_knowledge(name)]


def term_name(name: str, layer_pair: tuple[int, int] | None) -> str:
    """The name of one loss term: ``hidden_mse@2-12`` for a layer pair, the knowledge name alone otherwise.

    Used as the key of a term in result rows and of its projection in a checkpoint.
    """
    return name if layer_pair is None else f"{name}@{layer_pair[0]}-{layer_pair[1]}"


def term_pairs(name: str, strategy_pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int] | None]:
    """The layer pairs one knowledge is applied on, given the matching strategy's pairs.

    ``pairs`` placement: the strategy's pairs; ``embeddings``: ``[(0, 0)]``; ``output``: ``[None]`` (one term).
    """
    placement = get_knowledge(name).placement
    if placement == "pairs":
        return list(strategy_pairs)
    if placement == "embeddings":
        return [(0, 0)]
    return [None]


def compute_knowledge(
    name: str,
    student: Mapping[str, Tensor],
    teacher: Mapping[str, Tensor],
    mask: Tensor | None = None,
    *,
    projection: Callable[[Tensor], Tensor] | None = None,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
    temperature: float = 1.0,
    labels: Tensor | None = None,
    options: Mapping[str, Any] | None = None,
) -> Tensor:
    """Compute any registered knowledge from feature dicts, so a training loop needs no per-loss code.

    Args:
        name: a knowledge name (any alias).
        student, teacher: the features of one matched layer pair (or of the output), keyed by the names in
            ``spec.needs``: ``scores`` ``[B, H, L, L]``, ``hidden`` / ``embeddings`` / ``query`` / ``key`` /
            ``value`` ``[B, L, d]``, ``logits`` ``[B, C]``, ``sentence`` ``[B, d]``. Extra keys are ignored.
        mask: ``[B, L]``, 1 = real token (needed by every ``pair`` / ``relation`` knowledge).
        projection: applied to the student's feature first when ``spec.needs_projection`` (e.g. a
            `kdgrid.core.projection.Projection`); ``None`` means the widths already agree.
        heads_s, heads_t, relation_heads: head counts for the q/k/v relations (heads_s or relation_heads
            is required; see `query_relation`).
        temperature: the soft-label temperature T.
        labels: gold labels ``[B]`` for ``hard_label``.
        options: the knowledge's keyword variants (``{"scale": "mean"}`` for pkd); unknown keys raise.
    """
    spec = get_knowledge(name)
    opts = dict(options or {})
    allowed = spec.options()
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise ConfigError(
            f"knowledge {spec.name!r} has no option(s) {unknown}; allowed: {sorted(allowed) or 'none'}"
        )
    if spec.call_style == "hard":
        if labels is None:
            raise ConfigError("knowledge 'hard_label' needs the gold labels (labels=...)")
        return spec.fn(_feature(spec, student, "logits", "student"), labels, **opts)
    (need,) = spec.needs
    s = _feature(spec, student, need, "student")
    t = _feature(spec, teacher, need, "teacher")
    if spec.needs_projection and projection is not None:
        if mask is not None and s.dim() == 3 and tuple(mask.shape) == tuple(s.shape[:2]):
            # Zero the padding before projecting: a non-finite padded vector would otherwise turn the
            # projection's weight gradient (a sum over all positions) into NaN.
            s = _zero_padding(s, mask.bool())
        s = projection(s)
    if spec.call_style == "soft":
        return spec.fn(s, t, temperature, **opts)
    if spec.call_style == "batch":
        return spec.fn(s, t, **opts)
    if mask is None:
        raise ConfigError(f"knowledge {spec.name!r} needs the padding mask [B, L]")
    if spec.call_style == "relation":
        return spec.fn(s, t, mask, heads_s, heads_t, relation_heads, **opts)
    return spec.fn(s, t, mask, **opts)


def _feature(spec: KnowledgeSpec, features: Mapping[str, Tensor], need: str, side: str) -> Tensor:
    if need not in features:
        raise ConfigError(
            f"knowledge {spec.name!r} needs the {side} feature {need!r}; given: {sorted(features) or 'none'}"
        )
    return features[need]
