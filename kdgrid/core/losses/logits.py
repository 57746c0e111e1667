"""Responses (region ``logits``): the soft targets and the gold labels of the paper's eq. 9."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from kdgrid.core.knowledge import ShapeError, register
from kdgrid.core.losses._common import (
    expect_rank,
    expect_same_shape,
    shape,
)
from kdgrid.core.teacher.targets import fixed
from kdgrid.errors import ConfigError


def _is_regression(logits: Tensor, regression: bool | None) -> bool:
    return logits.shape[-1] == 1 if regression is None else regression


@register(
    "soft_label",
    needs=["logits"],
    needs_projection=False,
    category="response",
    region="logits",
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
        temperature: T > 0 (a float; a 0-dim tensor works too, e.g. a learned temperature).
        t2: multiply by T^2 (Hinton's gradient-scale correction). Default False: the paper's numbers
            (TextBrewer's kd_ce_loss / kd_mse_loss, the temperatures of its Table 4) have no T^2.
        regression: force the regression form; default: regression iff C == 1.
    """
    expect_rank(logits_s, 2, "soft_label", "student logits", "[B, C]")
    expect_same_shape(logits_s, logits_t, "soft_label", "logits")
    if not temperature > 0:
        raise ConfigError(f"soft_label: temperature must be > 0, got {temperature}")
    z_s, z_t = logits_s / temperature, fixed(logits_t) / temperature
    if _is_regression(logits_s, regression):
        loss = (z_s - z_t).pow(2).mean()
    else:
        loss = -(F.softmax(z_t, dim=-1) * F.log_softmax(z_s, dim=-1)).sum(dim=-1).mean()
    return loss * temperature**2 if t2 else loss


def soft_label_per_example(
    logits_s: Tensor, logits_t: Tensor, temperature: float, *, regression: bool | None = None
) -> Tensor:
    """`soft_label`'s loss of each example, ``[B]``, before the batch mean (for per-example weights,
    `kdgrid.core.example_weights`): ``- sum_c softmax(z^T_b / T)_c log softmax(z^S_b / T)_c``, or
    ``((z^S_b - z^T_b) / T)^2`` for regression. Their mean is `soft_label` (up to rounding)."""
    expect_rank(logits_s, 2, "soft_label", "student logits", "[B, C]")
    expect_same_shape(logits_s, logits_t, "soft_label", "logits")
    if not temperature > 0:
        raise ConfigError(f"soft_label: temperature must be > 0, got {temperature}")
    z_s, z_t = logits_s / temperature, fixed(logits_t) / temperature
    if _is_regression(logits_s, regression):
        return (z_s - z_t).pow(2).mean(dim=-1)
    return -(F.softmax(z_t, dim=-1) * F.log_softmax(z_s, dim=-1)).sum(dim=-1)


def teacher_entropy_per_example(logits_t: Tensor, temperature: float | Tensor) -> Tensor:
    """The entropy of the teacher's soft targets at temperature T, ``[B]`` (classification, natural log):
    ``H_b = - sum_c softmax(z^T_b / T)_c log softmax(z^T_b / T)_c``. The soft-label loss of an example is
    ``KL(p^T_b || p^S_b) + H_b``; ``H_b`` does not depend on the student, and grows with T. The teacher's logits are
    detached; a learned T (a 0-dim tensor) keeps its graph."""
    z_t = fixed(logits_t) / temperature
    return -(F.softmax(z_t, dim=-1) * F.log_softmax(z_t, dim=-1)).sum(dim=-1)


def teacher_loss_per_example(logits_t: Tensor, labels: Tensor, *, regression: bool | None = None) -> Tensor:
    """The teacher's own loss on each example, ``[B]``, detached: cross-entropy of its logits against the gold
    label (natural log), or ``(z^T_b - y_b)^2`` for regression."""
    z_t = logits_t.detach()
    if _is_regression(z_t, regression):
        return (z_t[:, 0] - labels.to(z_t.dtype)).pow(2)
    return F.cross_entropy(z_t, labels.long(), reduction="none")


@register(
    "hard_label",
    needs=["logits"],
    needs_projection=False,
    category="response",
    region="logits",
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
    expect_rank(logits_s, 2, "hard_label", "student logits", "[B, C]")
    if labels.dim() != 1 or labels.shape[0] != logits_s.shape[0]:
        raise ShapeError(
            f"hard_label: labels must be [B] = [{logits_s.shape[0]}] for logits {shape(logits_s)}, "
            f"got shape {shape(labels)}"
        )
    if _is_regression(logits_s, regression):
        if logits_s.shape[-1] != 1:
            raise ShapeError(f"hard_label: regression needs logits [B, 1], got shape {shape(logits_s)}")
        return (logits_s[:, 0] - labels.to(logits_s.dtype)).pow(2).mean()
    return F.cross_entropy(logits_s, labels.long())
