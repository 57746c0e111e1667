"""CTKD's learned temperature, trained adversarially through gradient reversal with a cosine curriculum.

Li, Li, Yang, Yang, Cheng & Yang, "Curriculum Temperature for Knowledge Distillation", AAAI 2023. The
soft-label temperature is a parameter that *maximises* the distillation loss while the student minimises it (the
temperature's gradient is that of ``KL(p_T || p_S)``, not of the cross-entropy whose teacher-entropy part grows
with T whatever the student does: `kdgrid.core.training.objective.Objective.soft_value`): a gradient-reversal layer (Ganin & Lempitsky, ICML 2015) passes the temperature forward unchanged and multiplies
its gradient by ``-lambda`` on the way back, so one optimiser step moves the student down the loss and the
temperature up it. The reversal strength follows CTKD's curriculum, easy to hard: at training progress ``p``
(`kdgrid.core.schedules.progress`),

    lambda(p) = lambda_max * (1 - cos(pi * min(1, p / ramp))) / 2         (0 at the start, lambda_max from p = ramp)

The temperature is kept in a range by a sigmoid, the authors' ``T = 1 + 20 sigmoid(theta)`` in the default range:

    T = T_min + (T_max - T_min) * sigmoid(theta),      theta_0 = logit((T_0 - T_min) / (T_max - T_min))

so it starts at T_0 (up to float32 rounding of theta_0): the authors' ``theta_0 = 1`` under ``ctkd_form: paper``
(the default; with their T^2 and their ramp of 10 / 240 of training), the trial's ``temperature`` under
``ctkd_form: kdgrid`` (`kdgrid.core.methods.ctkd.spec`). ``theta`` is a 0-dim
parameter of the trial's objective: it trains under the student's AdamW and learning rate (no weight decay, as
every 1-D parameter), is saved in the epoch checkpoints and restored on resume. The options and their rules are in
`kdgrid.core.methods.ctkd.spec`; docs/learned_methods.md states the conventions.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from kdgrid.core.methods.ctkd.spec import CTKD_FORM, ctkd_form, soft_t2_default
from kdgrid.core.schedules import schedule_value
from kdgrid.core.step_hooks import StepHooks
from kdgrid.core.temperature_learner import TemperatureLearner
from kdgrid.trial import Trial


class _ReverseGradient(torch.autograd.Function):
    """Identity forward; the gradient times ``-strength`` backward."""

    @staticmethod
    def forward(ctx: Any, value: Tensor, strength: float) -> Tensor:
        ctx.strength = strength
        return value.view_as(value)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return -ctx.strength * grad, None


def reverse_gradient(value: Tensor, strength: float) -> Tensor:
    """``value`` unchanged, whose gradient is multiplied by ``-strength`` on the way back."""
    return _ReverseGradient.apply(value, strength)


def reversal_strength(progress: float, lambda_max: float, ramp: float) -> float:
    """CTKD's cosine curriculum: ``lambda_max (1 - cos(pi min(1, p / ramp))) / 2``."""
    return schedule_value("cosine", min(1.0, progress / ramp), 0.0, lambda_max)


class LearnedTemperature(TemperatureLearner):
    """CTKD's global temperature: ``forward(progress)`` is T (0-dim) behind a gradient-reversal layer."""

    def __init__(
        self, start: float, low: float, high: float, lambda_max: float, ramp: float, form: str = "paper"
    ) -> None:
        super().__init__()
        fraction = (start - low) / (high - low)
        self.low, self.high, self.lambda_max, self.ramp, self.start = low, high, lambda_max, ramp, start
        self.form = form
        self.theta = nn.Parameter(torch.tensor(math.log(fraction / (1.0 - fraction)), dtype=torch.float32))
        self.progress = 0.0

    def value(self) -> Tensor:
        """T now (0-dim, float32), with its ordinary gradient."""
        return self.low + (self.high - self.low) * torch.sigmoid(self.theta)

    def forward(self, progress: float, scheduled: float | None = None) -> Tensor:
        """T at ``progress`` (``scheduled`` is ignored: CTKD refuses a temperature schedule beside it)."""
        self.progress = progress
        return reverse_gradient(self.value(), reversal_strength(progress, self.lambda_max, self.ramp))

    def summary(self) -> dict[str, Any]:
        """What the row records: the temperature it ends with, where it started, the strength last used."""
        return {
            "method": "CTKD",
            "form": self.form,
            "ramp": self.ramp,
            "temperature": float(self.value().detach().cpu()),
            "start": self.start,
            "range": [self.low, self.high],
            "reversal_strength": reversal_strength(self.progress, self.lambda_max, self.ramp),
        }


class CtkdHooks(StepHooks):
    """CTKD's part in the objective: the soft term's T^2 by default under the paper's form (the authors reverse
    ``KL x T^2``), and which form the row measured."""

    def __init__(self, trial: Trial) -> None:
        self.options = dict(trial.options)

    def default_soft_t2(self) -> bool | None:
        return soft_t2_default(self.options)

    def formulation(self, objective: Any) -> dict[str, str]:
        return {CTKD_FORM: ctkd_form(self.options)}


def step_hooks(trial: Trial) -> CtkdHooks:
    """The hooks of a trial with ``temperature_learner: ctkd``."""
    return CtkdHooks(trial)
