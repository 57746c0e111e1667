"""`TemperatureLearner`: the module a learned soft-label temperature is (registered with
`kdgrid.core.schedules.register_temperature_learner`, chosen by the option ``temperature_learner``).

The trial's objective builds it once (under the trial's seed, after the projections and a learnable strategy's
mapping) and owns it: its parameters are trained by the student's AdamW, saved in every epoch checkpoint and
restored on resume; its `summary` goes to the row's ``extra`` as ``learned_temperature`` when the trial finishes
(`kdgrid.core.training.objective.Objective.learned_parts`). Each step it gives the temperature from the training progress
and the value the schedule would give, as a 0-dim tensor that may carry a graph: the soft-label losses divide by
it, so gradients reach its parameters. The soft term's gradient with respect to it is that of
``KL(p_T || p_S)``, not of the cross-entropy (whose teacher-entropy part grows with T whatever the student does;
`kdgrid.core.training.objective.Objective.soft_value`). An adversarial temperature (CTKD, Li et al., AAAI 2023) reverses the
gradient inside ``forward``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from kdgrid.core.schedules import NO_TEMPERATURE_LEARNER, TEMPERATURE_LEARNERS, temperature_learner_problem
from kdgrid.errors import ConfigError


class TemperatureLearner(nn.Module):
    """The interface (subclass it; build the parameters in ``__init__(start, options)``)."""

    def forward(self, progress: float, scheduled: float) -> Tensor:
        """The temperature of this step, > 0, a 0-dim tensor.

        Args:
            progress: the training progress in [0, 1] (`kdgrid.core.schedules.progress`).
            scheduled: the temperature the trial's schedule gives now (its ``temperature`` when unscheduled).
        """
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        """What the row records of it (JSON-able); empty by default."""
        return {}


def build_temperature_learner(name: str, start: float, options: dict[str, Any]) -> TemperatureLearner | None:
    """The trial's temperature learner (None for ``none``).

    Raises:
        ConfigError: an unregistered name (naming the allowed ones).
        TypeError: the factory built something other than a `TemperatureLearner`.
    """
    if name == NO_TEMPERATURE_LEARNER:
        return None
    problem = temperature_learner_problem(name)
    if problem:
        raise ConfigError(problem)
    module = TEMPERATURE_LEARNERS[name](start, options)
    if not isinstance(module, TemperatureLearner):
        raise TypeError(
            f"temperature learner {name!r} built a {type(module).__name__}, not a "
            "kdgrid.core.temperature_learner.TemperatureLearner"
        )
    return module
