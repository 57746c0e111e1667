"""AdaKD-style instance weighting: an example's distillation weight grows with the teacher's difficulty on it.

Ganguly, Nayak, Rao, Deb & AP, "AdaKD: Dynamic Knowledge Distillation of ASR Models using Adaptive Loss
Weighting", 2024 (arXiv 2405.08019): sample difficulty grows with the teacher's loss, and each instance's
distillation weight is a function of it, ``e^{-1/sqrt(d)}``. Here the difficulty is the teacher's own loss on
the example, ``l_i`` (cross-entropy against the gold label, natural log; squared error for regression:
`kdgrid.core.example_weights.ExampleBatch.teacher_loss`), and the function is the option ``adakd_function``:

================  ==========================  =========================================
adakd_function    raw weight r_i              note
================  ==========================  =========================================
exp_inv_sqrt      ``exp(-1 / sqrt(l_i))``     AdaKD's (the default); 0 at l_i = 0
linear            ``l_i``                     the built-in ``teacher_loss`` weight
sqrt              ``sqrt(l_i)``
square            ``l_i ** 2``
================  ==========================  =========================================

Each is non-decreasing in the loss. Two example weights read it:

- ``example_weight: adakd`` (the paper's form) trades each instance's two losses against each other, unnormalised:
  the soft term becomes ``mean_i alpha_i soft_i`` and the hard term ``mean_i (1 - alpha_i) hard_i``, with
  ``alpha_i = r_i`` (`trade_off_alphas`), so that with ``soft_weight = alpha = 1`` the objective is AdaKD's
  ``mean_i [alpha_i L_KD,i + (1 - alpha_i) L_task,i]``: an instance the teacher finds easy leans on its task loss,
  a hard one on distillation. The trade-off needs ``alpha_i`` in [0, 1]: only ``exp_inv_sqrt`` gives that, so
  another ``adakd_function`` is refused with it (`kdgrid.core.weighting_rules`).
- ``example_weight: adakd_batchnorm`` (kdgrid's earlier form) normalises the raw weights per batch as every example
  weight is (`kdgrid.core.example_weights.normalised_weights`: ``w_i = r_i / mean_j r_j``) and reweights the
  soft-label term alone; the hard term keeps the trial's ``alpha`` for every example. Only the ratios of the
  weights within a batch matter there (a batch of uniformly hard examples is weighted as one of easy ones). A
  batch whose every raw weight is 0 (a teacher certain and right on all of it, under ``exp_inv_sqrt``) is refused
  there rather than silently dropped.

Tensor methods only: no torch, and nothing of kdgrid (the registry imports this module). ``adakd_function``
without one of the two is refused (`kdgrid.core.weighting_rules`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Tensor = Any  # a torch tensor: only its methods are used, so this module imports no torch

ADAKD = "adakd"  # AdaKD's per-instance trade-off (the paper's form)
ADAKD_BATCHNORM = "adakd_batchnorm"  # kdgrid's earlier form: batch-normalised weights on the soft term
ADAKD_WEIGHTS: tuple[str, ...] = (ADAKD, ADAKD_BATCHNORM)
ADAKD_FUNCTION = "adakd_function"
DEFAULT_ADAKD_FUNCTION = "exp_inv_sqrt"

DIFFICULTY_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "exp_inv_sqrt": lambda loss: (-loss.rsqrt()).exp(),
    "linear": lambda loss: loss,
    "sqrt": lambda loss: loss.sqrt(),
    "square": lambda loss: loss * loss,
}


def adakd_function_problem(value: object) -> str | None:
    """Why ``value`` is not an AdaKD difficulty function (None when it is); names the allowed ones."""
    if isinstance(value, str) and value in DIFFICULTY_FUNCTIONS:
        return None
    return f"option {ADAKD_FUNCTION}={value!r} is invalid; allowed: {', '.join(DIFFICULTY_FUNCTIONS)}"


def difficulty_weights(teacher_loss: Tensor, options: Any) -> Tensor:
    """``r_i`` ``[B]``: the option ``adakd_function`` (in ``options``) of the teacher's loss per example."""
    name = options.get(ADAKD_FUNCTION, DEFAULT_ADAKD_FUNCTION)
    return DIFFICULTY_FUNCTIONS[name](teacher_loss.clamp_min(0))


def adakd(batch: Any) -> Tensor:
    """Raw weights ``[B]`` of an `kdgrid.core.example_weights.ExampleBatch` (registered as ``adakd_batchnorm``, and
    as ``adakd`` so that the name is known; the objective reads ``adakd`` as the trade-off, `trade_off_alphas`)."""
    return difficulty_weights(batch.teacher_loss, batch.options)


def trade_off_alphas(teacher_loss: Tensor, options: Any) -> Tensor:
    """AdaKD's ``alpha_i`` ``[B]``, unnormalised and without gradient: the weight of instance i's distillation loss,
    ``1 - alpha_i`` that of its task loss."""
    return difficulty_weights(teacher_loss, options).detach()
