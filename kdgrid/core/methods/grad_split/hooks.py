"""The gradient split's part in a student's training (`kdgrid.core.step_hooks.StepHooks`): under a
gradient-splitting optimizer (DOT) every step's task and distillation gradients are taken apart and handed to the
optimizer; on the sampled batches of ``grad_cosine_batches`` the cosine between them is recorded, and the graph is
kept for the step's usual backward pass (so logging changes nothing in training)."""

from __future__ import annotations

from typing import Any

import torch

from kdgrid.core.methods.grad_split.split import (
    CosineLog,
    gradient_cosine,
    split_gradients,
    task_and_distillation,
)
from kdgrid.core.optimizers import GRADIENT_SPLITTING, OPTIMIZER
from kdgrid.core.step_hooks import StepHooks
from kdgrid.trial import Trial


class SplitHooks(StepHooks):
    """One student's split: whether its optimizer takes the two gradients, and its sampled cosines."""

    def __init__(self, trial: Trial) -> None:
        self.to_optimizer = trial.option(OPTIMIZER) in GRADIENT_SPLITTING
        self.cosine: CosineLog | None = None

    def set_up(self, run: Any, job: Any) -> None:
        self.cosine = CosineLog.for_trial(run.trial, job.steps_per_epoch)

    def gradients(self, run: Any, job: Any, values: dict[str, torch.Tensor], step: int) -> bool:
        """Take the gradients apart where needed: every step for the optimizer (which then needs no backward
        pass: True), and on the sampled batches for the cosine (the graph kept: False)."""
        sampled = self.cosine is not None and run.steps_in_epoch in self.cosine.batches
        if not (self.to_optimizer or sampled):
            return False
        params = [p for group in run.optimizer.param_groups for p in group["params"]]
        task, distill = task_and_distillation(values, run.objective.weights())
        g_task, g_kd = split_gradients(task, distill, params, keep_graph=not self.to_optimizer)
        if sampled:
            assert self.cosine is not None
            own = {id(p) for p in run.model.parameters()}
            shared = [i for i, p in enumerate(params) if id(p) in own]
            self.cosine.values.append(gradient_cosine([g_task[i] for i in shared], [g_kd[i] for i in shared]))
            if run.curves is not None:  # the row's step curves keep the sampled cosines too
                run.curves.observe_cosine(self.cosine.values[-1])
        if not self.to_optimizer:
            return False
        run.optimizer.set_gradients(params, g_task, g_kd)
        return True

    def end_epoch(self, run: Any, job: Any, epoch: int) -> None:
        if self.cosine is not None:
            self.cosine.close_epoch(run.result.extra)


def step_hooks(trial: Trial) -> SplitHooks:
    """The hooks of a trial that splits its gradients (a splitting optimizer, or the logged cosine)."""
    return SplitHooks(trial)
