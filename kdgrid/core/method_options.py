"""The names, allowed values and rules of the options of the projector, gradient-conflict and masking methods
(registered in `kdgrid.core.options`; docs/methods.md gives each method's conventions). Torch-free: sweep
expansion and ``kdgrid plan`` read them.

An option at its default is never written into a trial, so none of these changes an existing trial id.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from kdgrid.suggest import did_you_mean
from kdgrid.trial import MASK_BY, MASK_FRACTION, MASK_INPUT

# Projectors (`kdgrid.core.projection`, `kdgrid.core.projector_penalty`).
PROJECTOR_MEMBERS = "projector_members"
PROJECTOR_SPECTRAL = "projector_spectral"
MAX_ENSEMBLE_MEMBERS = 16
DEFAULT_ENSEMBLE_MEMBERS = 3  # Chen et al. (NeurIPS 2022) use three projectors
# An ensemble member (`kdgrid.core.projection`): "mlp" (kdgrid's: Linear -> GELU -> Linear, signed outputs for
# BERT's signed hidden states) or "relu_linear" (the authors': Linear -> ReLU, for post-ReLU CNN features).
PROJECTOR_MEMBER = "projector_member"
PROJECTOR_MEMBER_KINDS: tuple[str, ...] = ("mlp", "relu_linear")
DEFAULT_PROJECTOR_MEMBER = "mlp"

# Gradient conflict (`kdgrid.core.grad_split`).
OPTIMIZER = "optimizer"
OPTIMIZERS: tuple[str, ...] = ("adamw", "dot")
DOT_DELTA = "dot_delta"
DOT_MOMENTUM = 0.9  # DOT's base momentum mu (Zhao et al., ICCV 2023, SGD with momentum 0.9)
DEFAULT_DOT_DELTA = 0.075  # Zhao et al.'s Delta: task momentum mu - Delta, distillation momentum mu + Delta
# How DOT steps a parameter with one of the two gradients only (a projection: distillation only): "paper" (the
# authors' code, mdistiller: one buffer at the mean momentum mu, weight decay on that side) or "kdgrid" (kdgrid's
# earlier form: both buffers kept, the missing gradient counted as zero, weight decay on the task side).
DOT_FORM = "dot_form"
DOT_FORMS: tuple[str, ...] = ("paper", "kdgrid")
DEFAULT_DOT_FORM = "paper"
GRAD_COSINE_BATCHES = "grad_cosine_batches"
DUAL_HEAD = "dual_head"
# The dual-head student's distillation-head loss (`kdgrid.core.dual_head_loss`): the authors' BinaryKL-Norm by
# default, their BinaryKL, or kdgrid's earlier softmax soft-label loss.
DUAL_HEAD_LOSS = "dual_head_loss"
BINARY_KL_NORM, BINARY_KL, SOFTMAX_HEAD_LOSS = "binary_kl_norm", "binary_kl", "softmax"
DUAL_HEAD_LOSSES: tuple[str, ...] = (BINARY_KL_NORM, BINARY_KL, SOFTMAX_HEAD_LOSS)
DEFAULT_DUAL_HEAD_LOSS = BINARY_KL_NORM

# Masked distillation (`kdgrid.core.masking`); the names live beside the grouping rule in `kdgrid.trial`.
MASK_SIDES: tuple[str, ...] = ("teacher", "student")
MASK_CRITERIA: tuple[str, ...] = ("random", "saliency", "maskedkd")
DEFAULT_MASK_FRACTION = 0.15  # BERT's masked-LM rate


def _choice_problem(name: str, value: Any, allowed: tuple[str, ...]) -> str | None:
    if isinstance(value, str) and value in allowed:
        return None
    hint = did_you_mean(value, allowed) if isinstance(value, str) else ""
    return f"option {name}={value!r} is invalid; allowed: {', '.join(allowed)}{hint}"


def projector_member_problem(value: Any) -> str | None:
    return _choice_problem(PROJECTOR_MEMBER, value, PROJECTOR_MEMBER_KINDS)


def dot_form_problem(value: Any) -> str | None:
    return _choice_problem(DOT_FORM, value, DOT_FORMS)


def dual_head_loss_problem(value: Any) -> str | None:
    return _choice_problem(DUAL_HEAD_LOSS, value, DUAL_HEAD_LOSSES)


def mask_input_problem(value: Any) -> str | None:
    return _choice_problem(MASK_INPUT, value, MASK_SIDES)


def mask_by_problem(value: Any) -> str | None:
    return _choice_problem(MASK_BY, value, MASK_CRITERIA)


def mask_fraction_problem(value: Any) -> str | None:
    if _is_number(value) and 0 < value < 1:
        return None
    return f"option {MASK_FRACTION}={value!r} is invalid; allowed: a number in (0, 1) (the share of tokens masked)"


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def optimizer_problem(value: Any) -> str | None:
    """Why ``optimizer`` = ``value`` is not allowed (None when it is)."""
    if isinstance(value, str) and value in OPTIMIZERS:
        return None
    hint = did_you_mean(value, OPTIMIZERS) if isinstance(value, str) else ""
    return f"option {OPTIMIZER}={value!r} is invalid; allowed: {', '.join(OPTIMIZERS)}{hint}"


def dot_delta_problem(value: Any) -> str | None:
    """Why ``dot_delta`` = ``value`` is not allowed: both momenta ``mu -+ Delta`` must lie in [0, 1)."""
    if _is_number(value) and 0 <= value < 1 - DOT_MOMENTUM:
        return None
    return (
        f"option {DOT_DELTA}={value!r} is invalid; allowed: a number in [0, {1 - DOT_MOMENTUM:g}) (DOT's Delta: "
        f"the momenta {DOT_MOMENTUM:g} - Delta and {DOT_MOMENTUM:g} + Delta must stay below 1)"
    )
