"""Masked distillation's options and rule, without torch (the masking itself: `kdgrid.core.methods.masking.masks`,
which states the conventions).

``mask_input`` (``teacher`` | ``student``; unset: no masking), ``mask_fraction`` (f in (0, 1), default
`DEFAULT_MASK_FRACTION`), ``mask_by`` (``random`` | ``saliency``). The option names live beside the grouping rule
in `kdgrid.trial` (teacher masking changes the shared teacher pass, so it is part of a job's key). After MaskedKD:
Son, Ryu, Lee & Lee, "The Role of Masking for Efficient Supervised Knowledge Distillation of Vision Transformers",
ECCV 2024.
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.method_registry import MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.number_range import FRACTION_OPEN
from kdgrid.suggest import choice_problem
from kdgrid.trial import MASK_BY, MASK_FRACTION, MASK_INPUT, MASKEDKD

MASK_SIDES: tuple[str, ...] = ("teacher", "student")
MASK_CRITERIA: tuple[str, ...] = ("random", "saliency", MASKEDKD)
DEFAULT_MASK_FRACTION = 0.15  # BERT's masked-LM rate


def mask_input_problem(value: Any) -> str | None:
    """Why ``mask_input`` = ``value`` is not allowed (None when it is)."""
    return choice_problem(MASK_INPUT, value, MASK_SIDES)


def mask_by_problem(value: Any) -> str | None:
    """Why ``mask_by`` = ``value`` is not allowed (None when it is)."""
    return choice_problem(MASK_BY, value, MASK_CRITERIA)


def mask_fraction_problem(value: Any) -> str | None:
    """Why ``mask_fraction`` = ``value`` is not allowed: a number in (0, 1)."""
    return FRACTION_OPEN.problem(MASK_FRACTION, value, "the share of tokens masked")


def masking_rule(facts: TrialFacts) -> list[str]:
    """``mask_fraction`` and ``mask_by`` need ``mask_input``."""
    trial = facts.trial
    if trial.option(MASK_INPUT) is None:
        stray = [name for name in (MASK_FRACTION, MASK_BY) if trial.option(name) is not None]
        return [f"option(s) {', '.join(stray)} need {MASK_INPUT} (teacher or student)"] if stray else []
    if trial.option(MASK_BY) == MASKEDKD and trial.option(MASK_INPUT) != "teacher":
        return [
            f"{MASK_BY}: {MASKEDKD} removes from the teacher's input what the student attends to least: it needs "
            f"{MASK_INPUT}: teacher"
        ]
    return []


register_option(
    MASK_INPUT,
    "text",
    None,
    "masked distillation: which side sees training inputs with tokens masked (teacher or student); unset: none",
    check=mask_input_problem,
)
register_option(
    MASK_FRACTION,
    "number",
    None,
    f"masked distillation: the share of each example's tokens masked; unset: {DEFAULT_MASK_FRACTION}",
    check=mask_fraction_problem,
)
register_option(
    MASK_BY,
    "text",
    None,
    "masked distillation: which tokens, random, saliency (those the teacher's [CLS] attends to least) or "
    "maskedkd (MaskedKD's: those the student's [CLS] attends to least, removed from the teacher's input); "
    "unset: random",
    check=mask_by_problem,
)

register_method(
    MethodSpec(
        name="masking",
        title="masked distillation: the teacher or the student sees its training inputs with tokens masked "
        "(mask_input)",
        paper="after MaskedKD: Son, Ryu, Lee & Lee, The Role of Masking for Efficient Supervised Knowledge "
        "Distillation of Vision Transformers, ECCV 2024",
        options=(MASK_INPUT, MASK_FRACTION, MASK_BY),
        rules=(("combination", masking_rule),),
        uses=lambda trial: trial.option(MASK_INPUT) is not None,
        hooks="kdgrid.core.methods.masking.masks:step_hooks",
        presets=(
            Preset(
                "paper",
                fields=(("alpha", 0.5), ("temperature", 1)),
                options=((MASK_BY, MASKEDKD), (MASK_FRACTION, 0.5)),
                adapted="MaskedKD's criterion (the student's [CLS] attention) removing half of the teacher's "
                "input tokens, gold labels at 0.5, temperature 1; patches become tokens; applies to teacher-side masking only",
                applies=lambda trial: trial.option(MASK_INPUT) == "teacher",
            ),
        ),
    )
)
