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

Each is non-decreasing in the loss. The example weight ``adakd`` (trial option ``example_weight: adakd``)
normalises them per batch as every weight is (`kdgrid.core.example_weights.normalised_weights`: ``w_i = r_i /
mean_j r_j``, so the soft loss keeps its scale); a batch whose every raw weight is 0 (a teacher certain and right on
all of it, under ``exp_inv_sqrt``) is refused there rather than silently dropped. Tensor methods only: no torch,
and nothing of kdgrid (the registry imports this module).

How this differs from the paper: AdaKD's instance weight ``alpha_i`` trades that instance's two losses against
each other, ``alpha_i L_KD,i + (1 - alpha_i) L_task,i``, unnormalised. kdgrid's ``adakd`` is an example weight:
the raw weights are divided by their batch mean (only their ratios within a batch matter) and reweight the
soft-label term alone; the hard-label term keeps the trial's ``alpha`` for every example and the knowledge terms
are unweighted. It is the paper's difficulty function used as a per-example reweighting of distillation, not its
per-instance trade-off with the task loss. ``adakd_function`` without ``example_weight: adakd`` is refused
(`function_rule`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kdgrid.core.example_weights import DEFAULT_EXAMPLE_WEIGHT, register_example_weight
from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.options import EXAMPLE_WEIGHT, register_option

Tensor = Any  # a torch tensor: only its methods are used, so this module imports no torch

ADAKD = "adakd"
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


@register_example_weight(ADAKD)
def adakd(batch: Any) -> Tensor:
    """Raw weights ``[B]`` of an `kdgrid.core.example_weights.ExampleBatch`: the option ``adakd_function`` of the
    teacher's loss per example (the example weight ``adakd``)."""
    name = batch.options.get(ADAKD_FUNCTION, DEFAULT_ADAKD_FUNCTION)
    return DIFFICULTY_FUNCTIONS[name](batch.teacher_loss.clamp_min(0))


def function_rule(facts: TrialFacts) -> list[str]:
    """``adakd_function`` chooses the function of ``example_weight: adakd``; with any other weight nothing reads it."""
    trial = facts.trial
    weight = trial.option(EXAMPLE_WEIGHT, DEFAULT_EXAMPLE_WEIGHT)
    if trial.option(ADAKD_FUNCTION) is None or weight == ADAKD:
        return []
    return [
        f"option {ADAKD_FUNCTION} chooses the function of {EXAMPLE_WEIGHT} {ADAKD!r}: it needs "
        f"{EXAMPLE_WEIGHT}: {ADAKD}, not {weight!r}"
    ]


register_option(
    ADAKD_FUNCTION,
    "text",
    DEFAULT_ADAKD_FUNCTION,
    "example_weight adakd: the function of the teacher's loss that weights each example (kdgrid.core.methods.adakd)",
    check=adakd_function_problem,
)

register_method(
    MethodSpec(
        name="adakd",
        title="AdaKD-style example weights: each example's soft loss weighted by the teacher's difficulty on it "
        "(example_weight: adakd; kdgrid's batch-normalised reading)",
        paper="Ganguly, Nayak, Rao, Deb & AP, AdaKD: Dynamic Knowledge Distillation of ASR Models using Adaptive "
        "Loss Weighting, arXiv 2405.08019, 2024",
        options=(ADAKD_FUNCTION,),
        rules=(("options", function_rule),),
    )
)
