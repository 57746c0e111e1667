"""What the projector, gradient-conflict and masking options combine with: checked before anything runs, from the
trial alone (`method_problems`, part of `kdgrid.core.trial_rules.combination_problems`, so ``kdgrid plan`` refuses
what ``kdgrid run`` would) and, once the loss terms are known, from them (`term_problems`, in
`kdgrid.core.trial_setup.set_up_trial`). Torch-free. The options themselves: `kdgrid.core.method_options`.
"""

from __future__ import annotations

from kdgrid.core.method_options import (
    DOT_DELTA,
    DOT_FORM,
    DUAL_HEAD,
    DUAL_HEAD_LOSS,
    GRAD_COSINE_BATCHES,
    OPTIMIZER,
    PROJECTOR_MEMBER,
    PROJECTOR_MEMBERS,
    PROJECTOR_SPECTRAL,
)
from kdgrid.trial import MASK_BY, MASK_FRACTION, MASK_INPUT, MASKEDKD, Trial


def splits_gradients(trial: Trial) -> bool:
    """Whether the trial's step needs its task and distillation gradients apart (DOT, or the logged cosine)."""
    return trial.option(OPTIMIZER) == "dot" or trial.option(GRAD_COSINE_BATCHES) is not None


def method_problems(trial: Trial) -> list[str]:
    """The method options that cannot go with the rest of the trial (empty when all can)."""
    problems: list[str] = []
    for name in (PROJECTOR_MEMBERS, PROJECTOR_MEMBER):
        if trial.option(name) is not None and trial.projection != "ensemble":
            problems.append(f"option {name} is only for projection 'ensemble', not {trial.projection!r}")
    if trial.option(PROJECTOR_SPECTRAL) is not None and (trial.projection == "none" or not trial.knowledge):
        problems.append(
            f"option {PROJECTOR_SPECTRAL} regularises projections: it needs knowledge with a projection "
            f"(projection linear, mlp or ensemble), not projection {trial.projection!r} with knowledge "
            f"{list(trial.knowledge)}"
        )
    dot = trial.option(OPTIMIZER) == "dot"
    for name in (DOT_DELTA, DOT_FORM):
        if trial.option(name) is not None and not dot:
            problems.append(f"option {name} is only for optimizer 'dot'")
    if dot and trial.option("max_grad_norm"):
        problems.append("optimizer 'dot' does not clip gradients: leave max_grad_norm unset")
    if trial.option(DUAL_HEAD) and not (trial.alpha > 0 and trial.soft_weight > 0):
        problems.append(
            f"option {DUAL_HEAD} gives the hard and the soft loss a head each: it needs alpha > 0 and "
            f"soft_weight > 0 (here {trial.alpha:g} and {trial.soft_weight:g})"
        )
    if trial.option(DUAL_HEAD_LOSS) is not None and not trial.option(DUAL_HEAD):
        problems.append(
            f"option {DUAL_HEAD_LOSS} is the loss of a dual head's distillation head: it needs {DUAL_HEAD}"
        )
    if trial.option(MASK_INPUT) is None:
        stray = [name for name in (MASK_FRACTION, MASK_BY) if trial.option(name) is not None]
        if stray:
            problems.append(f"option(s) {', '.join(stray)} need {MASK_INPUT} (teacher or student)")
    elif trial.option(MASK_BY) == MASKEDKD and trial.option(MASK_INPUT) != "teacher":
        problems.append(
            f"{MASK_BY}: {MASKEDKD} removes from the teacher's input what the student attends to least: it needs "
            f"{MASK_INPUT}: teacher"
        )
    if splits_gradients(trial):
        task = trial.alpha > 0
        distill = trial.soft_weight > 0 or bool(trial.knowledge)
        if not (task and distill):
            what = "optimizer 'dot'" if dot else f"option {GRAD_COSINE_BATCHES}"
            problems.append(
                f"{what} needs both a task gradient (alpha > 0, here {trial.alpha:g}) and a distillation gradient "
                f"(soft_weight > 0 or knowledge; here soft_weight {trial.soft_weight:g}, knowledge "
                f"{list(trial.knowledge)})"
            )
    return problems


def term_problems(trial: Trial, projected_terms: int) -> list[str]:
    """What the trial's loss terms rule out: a spectral penalty with no projection to regularise (the student
    and the teacher have the same width, or no knowledge of the trial needs a projection)."""
    if trial.option(PROJECTOR_SPECTRAL) is not None and projected_terms == 0:
        return [
            f"option {PROJECTOR_SPECTRAL} regularises projections, but no loss term of this trial is projected "
            "(same widths, or knowledge that compares the two sides in their own widths)"
        ]
    return []
