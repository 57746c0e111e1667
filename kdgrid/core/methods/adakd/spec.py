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
  another ``adakd_function`` is refused with it (`function_rule`).
- ``example_weight: adakd_batchnorm`` (kdgrid's earlier form) normalises the raw weights per batch as every example
  weight is (`kdgrid.core.example_weights.normalised_weights`: ``w_i = r_i / mean_j r_j``) and reweights the
  soft-label term alone; the hard term keeps the trial's ``alpha`` for every example. Only the ratios of the
  weights within a batch matter there (a batch of uniformly hard examples is weighted as one of easy ones). A
  batch whose every raw weight is 0 (a teacher certain and right on all of it, under ``exp_inv_sqrt``) is refused
  there rather than silently dropped.

Tensor methods only: no torch. ``adakd_function`` without one of the two is refused (`function_rule`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kdgrid.core.example_weights import DEFAULT_EXAMPLE_WEIGHT, register_example_weight
from kdgrid.core.method_registry import MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.options import EXAMPLE_WEIGHT, register_option
from kdgrid.core.step_hooks import StepHooks

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


@register_example_weight(ADAKD_BATCHNORM)
@register_example_weight(ADAKD)
def adakd(batch: Any) -> Tensor:
    """Raw weights ``[B]`` of an `kdgrid.core.example_weights.ExampleBatch` (registered as ``adakd_batchnorm``, and
    as ``adakd`` so that the name is known; the objective reads ``adakd`` as the trade-off, `trade_off_alphas`)."""
    return difficulty_weights(batch.teacher_loss, batch.options)


def trade_off_alphas(teacher_loss: Tensor, options: Any) -> Tensor:
    """AdaKD's ``alpha_i`` ``[B]``, unnormalised and without gradient: the weight of instance i's distillation loss,
    ``1 - alpha_i`` that of its task loss."""
    return difficulty_weights(teacher_loss, options).detach()


def function_rule(facts: TrialFacts) -> list[str]:
    """``adakd_function`` chooses the function of ``example_weight: adakd`` or ``adakd_batchnorm`` (with any
    other weight nothing reads it); AdaKD's trade-off needs weights in [0, 1], which only ``exp_inv_sqrt`` gives."""
    trial = facts.trial
    weight = trial.option(EXAMPLE_WEIGHT, DEFAULT_EXAMPLE_WEIGHT)
    problems: list[str] = []
    if trial.option(ADAKD_FUNCTION) is not None and weight not in ADAKD_WEIGHTS:
        problems.append(
            f"option {ADAKD_FUNCTION} chooses the function of {EXAMPLE_WEIGHT} {' or '.join(ADAKD_WEIGHTS)}: it "
            f"needs one of them, not {weight!r}"
        )
    function = trial.option(ADAKD_FUNCTION, DEFAULT_ADAKD_FUNCTION)
    if weight == ADAKD and function != DEFAULT_ADAKD_FUNCTION:
        problems.append(
            f"{EXAMPLE_WEIGHT}: {ADAKD} trades each instance's soft and hard losses by alpha_i in [0, 1], which only "
            f"{ADAKD_FUNCTION}: {DEFAULT_ADAKD_FUNCTION} gives; {ADAKD_FUNCTION}: {function} goes with "
            f"{EXAMPLE_WEIGHT}: adakd_batchnorm (batch-normalised weights on the soft term)"
        )
    return problems


class TradeOffHooks(StepHooks):
    """AdaKD's part in the objective under ``example_weight: adakd``: the per-instance trade-off ``alpha_i``
    between each instance's soft and hard losses (`trade_off_alphas`), and the row's record of the form."""

    def __init__(self, trial: Any) -> None:
        self.options = dict(trial.options)

    def instance_trade_off(self, objective: Any, teacher_loss: Callable[[], Tensor]) -> Tensor | None:
        return trade_off_alphas(teacher_loss(), self.options)

    def formulation(self, objective: Any) -> dict[str, str]:
        return {EXAMPLE_WEIGHT: "adakd (trade-off)"}


def step_hooks(trial: Any) -> TradeOffHooks:
    """The hooks of a trial with ``example_weight: adakd``."""
    return TradeOffHooks(trial)


register_option(
    ADAKD_FUNCTION,
    "text",
    DEFAULT_ADAKD_FUNCTION,
    "example_weight adakd or adakd_batchnorm: the function of the teacher's loss that weights each example "
    "(kdgrid.core.methods.adakd)",
    check=adakd_function_problem,
)

register_method(
    MethodSpec(
        name="adakd",
        title="AdaKD: each instance's soft and hard losses traded by the teacher's difficulty on it (example_weight: "
        "adakd; adakd_batchnorm: kdgrid's batch-normalised soft weights)",
        paper="Ganguly, Nayak, Rao, Deb & AP, AdaKD: Dynamic Knowledge Distillation of ASR Models using Adaptive "
        "Loss Weighting, arXiv 2405.08019, 2024",
        options=(ADAKD_FUNCTION,),
        rules=(("options", function_rule),),
        uses=lambda trial: trial.option(EXAMPLE_WEIGHT) == ADAKD,
        hooks="kdgrid.core.methods.adakd.spec:step_hooks",
        presets=(
            Preset(
                "paper",
                fields=(("soft_weight", 1.0), ("alpha", 1.0)),
                adapted="the paper's unweighted trade-off (soft_weight = alpha = 1: each instance's weight alone "
                "splits its distillation and task losses); the paper's ASR models and optimizer are not "
                "transferable: the study's are kept",
            ),
        ),
    )
)
