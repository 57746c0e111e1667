"""The layer curriculum's part in a student's training (`kdgrid.core.step_hooks.StepHooks`): its stages built from
the objective's terms and its options (the last stage; the optimizer across stages: a fresh one is cleared at each
stage's first step), the stage of each step (in a layer stage only that stage's terms count in the step's total),
its stages recorded once the student is set up (a stage that would get no step is refused there), and after each
backward pass the layers outside the current stage get no gradient (`kdgrid.core.methods.layer_curriculum.spec`)."""

from __future__ import annotations

from typing import Any

from kdgrid.core.methods.layer_curriculum.spec import (
    DEFAULT_LAST,
    DEFAULT_STAGE_OPTIMIZER,
    EXTRA_KEY,
    LAYER_CURRICULUM,
    LAYER_CURRICULUM_LAST,
    LAYER_CURRICULUM_OPTIMIZER,
    Curriculum,
    drop_frozen_gradients,
)
from kdgrid.core.step_hooks import StepHooks
from kdgrid.trial import Trial


class CurriculumHooks(StepHooks):
    """One student's curriculum and its current stage."""

    def __init__(self, trial: Trial) -> None:
        self.boundaries = trial.option(LAYER_CURRICULUM)
        self.last = str(trial.option(LAYER_CURRICULUM_LAST) or DEFAULT_LAST)
        self.optimizer = str(trial.option(LAYER_CURRICULUM_OPTIMIZER) or DEFAULT_STAGE_OPTIMIZER)
        self.curriculum: Curriculum | None = None
        self.stage = 0

    def build_objective(self, objective: Any) -> None:
        named = [(term.name, term.pair) for term in objective.terms]
        self.curriculum = Curriculum.of(self.boundaries, named, self.last, self.optimizer)

    def set_progress(self, objective: Any, step_index: int, total_steps: int) -> None:
        assert self.curriculum is not None
        self.stage = self.curriculum.stage(step_index, total_steps)

    def step_weights(self, objective: Any, weights: dict[str, float]) -> dict[str, float]:
        assert self.curriculum is not None
        staged = self.curriculum.stage_terms(self.stage)
        return weights if staged is None else {name: w if name in staged else 0 for name, w in weights.items()}

    def before_step(self, run: Any, job: Any, step: int) -> None:
        assert self.curriculum is not None
        if self.curriculum.restarts_optimizer(step - 1, job.steps_per_epoch * run.trial.epochs):
            run.optimizer.state.clear()  # a stage's first step under a fresh optimizer per stage: a new Adam

    def formulation(self, objective: Any) -> dict[str, str]:
        assert self.curriculum is not None
        return {LAYER_CURRICULUM_LAST: self.curriculum.last, LAYER_CURRICULUM_OPTIMIZER: self.curriculum.optimizer}

    def set_up(self, run: Any, job: Any) -> None:
        assert self.curriculum is not None
        run.result.extra[EXTRA_KEY] = self.curriculum.summary(job.steps_per_epoch * run.trial.epochs)

    def after_backward(self, run: Any) -> None:
        assert self.curriculum is not None
        drop_frozen_gradients(run.model.named_parameters(), self.curriculum.trainable_layers(self.stage))


def step_hooks(trial: Trial) -> CurriculumHooks:
    """The hooks of a trial with ``layer_curriculum``."""
    return CurriculumHooks(trial)
