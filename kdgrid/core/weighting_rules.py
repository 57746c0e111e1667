"""What the per-example weight and schedule options combine with: an option that would do nothing is refused
before anything runs (`weighting_problems`, part of `kdgrid.core.trial_rules.option_problems`, so ``kdgrid plan``
refuses what ``kdgrid run`` would). Torch-free; the options themselves: `kdgrid.core.options`.

- ``adakd_function`` chooses the function of ``example_weight: adakd`` or ``adakd_batchnorm``
  (`kdgrid.core.adakd`); with any other example weight nothing reads it. AdaKD's trade-off (``adakd``) needs
  weights in [0, 1], which only its own ``exp_inv_sqrt`` gives.
- ``{target}_end`` is where a ``{target}_schedule`` goes (`kdgrid.core.schedules`); under the default
  ``constant`` schedule the value stays at its start, so nothing reads it. (A non-constant schedule without its
  end is allowed: the end defaults to the start, as the schedules module documents.)
- ``knowledge_weight_schedule`` scales the knowledge terms' weights; a trial without a knowledge term (no knowledge,
  or only ``soft_label`` / ``hard_label``, which are eq. 9's own terms) has nothing for it to scale.
- ``example_weight`` other than ``uniform`` scales each example's soft-label loss; with a soft term weighted 0 at
  every step (``soft_weight`` 0, unscheduled or scheduled to end at 0) it scales nothing.
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.adakd import ADAKD, ADAKD_FUNCTION, ADAKD_WEIGHTS, DEFAULT_ADAKD_FUNCTION
from kdgrid.core.example_weights import DEFAULT_EXAMPLE_WEIGHT
from kdgrid.core.knowledge import distilled_knowledge
from kdgrid.core.options import EXAMPLE_WEIGHT, end_option, schedule_option
from kdgrid.core.schedules import DEFAULT_SCHEDULE, KNOWLEDGE_WEIGHT, SCHEDULED
from kdgrid.trial import Trial


def _set(trial: Trial, name: str) -> bool:
    return trial.option(name) is not None


def scheduled(trial: Trial, target: str) -> bool:
    """Whether ``target`` (one of `kdgrid.core.schedules.SCHEDULED`) has a schedule other than ``constant``."""
    return trial.option(schedule_option(target), DEFAULT_SCHEDULE) != DEFAULT_SCHEDULE


def soft_term_weighted(trial: Trial) -> bool:
    """Whether the soft-label term has a weight above 0 at some step: ``soft_weight`` > 0, or a non-constant
    ``soft_weight_schedule`` going to a ``soft_weight_end`` > 0."""
    end: Any = trial.option(end_option("soft_weight"))
    return trial.soft_weight > 0 or (scheduled(trial, "soft_weight") and end is not None and end > 0)


def weighting_problems(trial: Trial) -> list[str]:
    """The example-weight and schedule options that would do nothing in this trial (empty when none would);
    the options are well-formed (checked by their declarations first)."""
    problems: list[str] = []
    weight = trial.option(EXAMPLE_WEIGHT, DEFAULT_EXAMPLE_WEIGHT)
    if _set(trial, ADAKD_FUNCTION) and weight not in ADAKD_WEIGHTS:
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
    for target in SCHEDULED:
        if _set(trial, end_option(target)) and not scheduled(trial, target):
            problems.append(
                f"option {end_option(target)} is where {schedule_option(target)} goes: it needs a "
                f"{schedule_option(target)} other than {DEFAULT_SCHEDULE!r} (under {DEFAULT_SCHEDULE!r}, {target} "
                "stays at its start)"
            )
    if scheduled(trial, KNOWLEDGE_WEIGHT) and not distilled_knowledge(trial.knowledge):
        problems.append(
            f"option {schedule_option(KNOWLEDGE_WEIGHT)} scales the knowledge terms' weights: it needs knowledge "
            f"other than soft_label and hard_label; here knowledge {list(trial.knowledge)}"
        )
    if weight != DEFAULT_EXAMPLE_WEIGHT and not soft_term_weighted(trial):
        problems.append(
            f"option {EXAMPLE_WEIGHT}={weight!r} weights each example's soft-label loss: it needs soft_weight > 0 "
            f"(or a soft_weight_schedule to a soft_weight_end > 0); here soft_weight {trial.soft_weight:g}"
        )
    return problems
