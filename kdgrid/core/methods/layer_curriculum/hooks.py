"""The layer curriculum's part in a student's training (`kdgrid.core.step_hooks.StepHooks`): its stages recorded
once the student is set up (a stage that would get no step is refused there), and after each backward pass the
layers outside the current stage get no gradient (`kdgrid.core.methods.layer_curriculum.spec`)."""

from __future__ import annotations

from typing import Any

from kdgrid.core.methods.layer_curriculum.spec import EXTRA_KEY, drop_frozen_gradients
from kdgrid.core.step_hooks import StepHooks
from kdgrid.trial import Trial


class CurriculumHooks(StepHooks):
    """One student's curriculum (its stages live in its objective: `Objective.curriculum`)."""

    def set_up(self, run: Any, job: Any) -> None:
        if run.objective.curriculum is not None:
            total_steps = job.steps_per_epoch * run.trial.epochs
            run.result.extra[EXTRA_KEY] = run.objective.curriculum.summary(total_steps)

    def after_backward(self, run: Any) -> None:
        drop_frozen_gradients(run.model.named_parameters(), run.objective.trainable_layers())


def step_hooks(trial: Trial) -> CurriculumHooks:
    """The hooks of a trial with ``layer_curriculum``."""
    return CurriculumHooks()
