"""Sentence vectors (region ``sentence``, once per batch): contrastive InfoNCE distillation and ReAugKD's relational
loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from kdgrid.core.knowledge import register
from kdgrid.core.losses._common import (
    expect_rank,
    expect_same_shape,
    l2_normalize,
    projection_hint,
)
from kdgrid.core.teacher.targets import fixed
from kdgrid.errors import ConfigError


def _check_sentences(s: Tensor, t: Tensor, loss: str) -> None:
    expect_rank(s, 2, loss, "student sentence vectors", "[B, d]")
    expect_rank(t, 2, loss, "teacher sentence vectors", "[B, d]")
    expect_same_shape(s, t, loss, "sentence vectors", projection_hint(s, t))


@register(
    "contrastive",
    needs=["sentence"],
    needs_projection=True,
    category="feature",
    region="sentence",
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
    logits = l2_normalize(sentence_s, 1e-12) @ l2_normalize(fixed(sentence_t), 1e-12).T / tau
    return F.cross_entropy(logits, torch.arange(logits.shape[0], device=logits.device))


@register(
    "reaug_relation",
    needs=["sentence"],
    needs_projection=True,
    category="relation",
    region="sentence",
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
    x, z = sentence_s, fixed(sentence_t)
    if normalize:
        x, z = l2_normalize(x, 1e-12), l2_normalize(z, 1e-12)
    log_q = F.log_softmax(z @ z.T / tau, dim=-1)
    log_qbar = F.log_softmax(x @ z.T / tau, dim=-1)
    return (log_q.exp() * (log_q - log_qbar)).sum(dim=-1).mean()
