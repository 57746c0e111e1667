"""A separate learning rate for the parameters a method learns beside the student (trial option
``learned_lr_scale``): a learnable strategy's mapping (LAD's gate, ALP-KD's map), a learned temperature (CTKD's)
and learned loss weights (LKD's).

At the learning rates BERT students use (1e-5 to 1e-4), AdamW moves each of these by about the learning rate per
step, so over a few thousand steps a gate logit or a temperature barely leaves its start. With the option set to
m, they get their own AdamW parameter groups (the same weight-decay rule: 2-D weights decayed, biases and 0-/1-D
parameters not) whose learning rate is ``m x lr``, under the trial's same warm-up and linear decay; the student
and its projections keep ``lr``. Unset (the default), the optimiser is built exactly as before: one learning rate
for everything, the same parameter groups, the same numbers. Torch-free: the grid validates the option.
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.optimizers import LEARNED_LR_SCALE
from kdgrid.core.options import naming, positive_number_problem, register_option


def learned_lr_problems(trial: Any, learns: bool) -> list[str]:
    """Why ``learned_lr_scale`` cannot go with the trial (empty when it can, or without the option): ``learns``
    says whether the trial has a learned part (a learnable strategy, a temperature learner, learned weights)."""
    if trial.option(LEARNED_LR_SCALE) is None or learns:
        return []
    return [
        f"option {LEARNED_LR_SCALE} scales the learning rate of a method's learned parameters, and this trial has "
        "none: it needs a learnable strategy (LAD, ALP-KD), temperature_learner ctkd, or lkd_holdout"
    ]


def learned_lr_rule(facts: TrialFacts) -> list[str]:
    """`learned_lr_problems` of a trial, knowing whether it learns beside the student."""
    return learned_lr_problems(facts.trial, facts.learns_beside_the_student)


register_option(
    LEARNED_LR_SCALE,
    "number",
    None,
    "the learning rate of a method's learned parameters (a learnable strategy's mapping, a learned temperature, "
    "learned loss weights) as a multiple of lr (kdgrid.core.methods.learned_lr); unset: lr",
    check=naming(LEARNED_LR_SCALE, positive_number_problem),
)

register_method(
    MethodSpec(
        name="learned_lr",
        title="learned_lr_scale: a method's learned parameters at their own multiple of the learning rate (kdgrid's)",
        paper="kdgrid's own: separate AdamW parameter groups for the parameters learned beside the student",
        options=(LEARNED_LR_SCALE,),
        rules=(("options", learned_lr_rule),),
    )
)
