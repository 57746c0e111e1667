"""LKD's option and what it combines with (torch-free: the grid validates them; the method: `kdgrid.core.methods.lkd.lookahead`).

``lkd_holdout: f`` turns LKD on and holds out the share f of the training examples for its validation loss.
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.knowledge import distilled_knowledge
from kdgrid.core.method_registry import MethodMemory, MethodSpec, TrialFacts, register_method
from kdgrid.core.optimizers import GRADIENT_SPLITTING, OPTIMIZER
from kdgrid.core.options import register_option
from kdgrid.number_range import NumberRange
from kdgrid.trial import LKD_HOLDOUT, Trial

MAX_HOLDOUT = 0.5  # more would leave the student less to train on than it validates on


def holdout_problem(value: Any) -> str | None:
    """Why ``lkd_holdout`` = ``value`` is not allowed: a number in (0, 0.5]."""
    return NumberRange(low=0, high=MAX_HOLDOUT, low_open=True).problem(
        LKD_HOLDOUT, value, "the share of the training examples LKD holds out for its validation loss"
    )


def lkd_problems(trial: Any) -> list[str]:
    """What LKD cannot combine with (empty when it can, or without the option): fewer than two weighted terms
    (one weight alone has nothing to trade against; the soft and hard labels written as knowledge add no term:
    `kdgrid.core.knowledge.distilled_knowledge`), no task loss to validate on (alpha = 0 is fine: the held-out
    loss reads the gold labels), or a method that takes the step's gradients itself."""
    if trial.option(LKD_HOLDOUT) is None:
        return []
    problems: list[str] = []
    knowledge = distilled_knowledge(trial.knowledge)
    terms = int(trial.soft_weight > 0) + int(trial.alpha > 0) + len(knowledge)
    if terms < 2:
        problems.append(
            f"option {LKD_HOLDOUT} learns the weights of the trial's loss terms: it needs at least two (soft_weight > "
            f"0, alpha > 0, knowledge other than soft_label and hard_label, which soft_weight and alpha weigh); "
            f"here soft_weight {trial.soft_weight:g}, alpha {trial.alpha:g}, knowledge "
            f"{list(trial.knowledge)}"
        )
    clashing = [
        name
        for name, on in (
            (f"optimizer {trial.option(OPTIMIZER)}", trial.option(OPTIMIZER) in GRADIENT_SPLITTING),
            ("grad_cosine_batches", trial.option("grad_cosine_batches") is not None),
            ("layer_curriculum", trial.option("layer_curriculum") is not None),
        )
        if on
    ]
    if clashing:
        problems.append(
            f"option {LKD_HOLDOUT} takes the step's gradients apart itself: it cannot go with {', '.join(clashing)}"
        )
    return problems


def lkd_rule(facts: TrialFacts) -> list[str]:
    """`lkd_problems` of a trial."""
    return lkd_problems(facts.trial)


def uses_lkd(trial: Trial) -> bool:
    """Whether the trial learns its loss weights (``lkd_holdout`` set)."""
    return trial.option(LKD_HOLDOUT) is not None


def weighted_terms(facts: TrialFacts) -> int:
    """The loss terms whose weights LKD learns (0 without LKD): soft, hard and each knowledge on each pair (an
    upper bound: a knowledge on the embeddings or without layers counts one per pair too)."""
    trial = facts.trial
    if not uses_lkd(trial):
        return 0
    pairs = facts.pairs if trial.strategy and facts.pairs is not None else []
    return 2 + len(trial.knowledge) * max(1, len(pairs))


# Bytes of fp32: LKD holds each loss term's gradient, their weighted sum and a copy of the parameters at once.
BYTES_PER_VALUE = 4


def lkd_memory(facts: TrialFacts) -> MethodMemory:
    """One learned weight per term, and (terms + 2) more fp32 values per student parameter during its step."""
    terms = weighted_terms(facts)
    return MethodMemory(parameters=terms, bytes_per_parameter=(terms + 2) * BYTES_PER_VALUE * (terms > 0))


register_option(
    LKD_HOLDOUT,
    "number",
    None,
    "LKD: learn the loss weights by one-step lookahead on this share of the training examples, held out from "
    "training (kdgrid.core.methods.lkd); unset: fixed weights",
    check=holdout_problem,
)

register_method(
    MethodSpec(
        name="lkd",
        title="LKD: the loss terms' weights learned by one-step lookahead on held-out training data (lkd_holdout)",
        paper="Learned loss weights by bi-level optimisation with a one-step lookahead (docs/learned_methods.md)",
        options=(LKD_HOLDOUT,),
        rules=(("options", lkd_rule),),
        learns=uses_lkd,
        memory=lkd_memory,
        uses=uses_lkd,
        hooks="kdgrid.core.methods.lkd.hooks:step_hooks",
    )
)
