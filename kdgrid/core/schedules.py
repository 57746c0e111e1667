"""Schedules over training steps: how a value moves from its start to its end as training goes on.

A schedule is a function ``(progress, start, end) -> value`` of the training progress ``p`` in [0, 1]: ``p = k /
(S - 1)`` at the k-th of a trial's S optimiser steps (k = 0, ..., S - 1; ``p = 0`` throughout when S = 1), so the
first step sees ``start`` and the last sees ``end``. Registered with `register_schedule`; the built-in ones:

==========  ===============================================================
constant    ``start`` (the default: what a trial does without a schedule)
linear      ``start + (end - start) * p``
cosine      ``end + (start - end) * (1 + cos(pi * p)) / 2``  (half a cosine, as SGDR's annealing, Loshchilov &
            Hutter, ICLR 2017, and CTKD's temperature curriculum, Li et al., AAAI 2023)
==========  ===============================================================

What a trial may schedule (`SCHEDULED`), each chosen by two trial options (`kdgrid.core.options`):
``{target}_schedule`` (a registered name, default ``constant``) and ``{target}_end`` (the value at the last step;
default: the start, so the value stays put):

- ``temperature``: the soft-label temperature, from the trial's ``temperature``;
- ``soft_weight`` and ``alpha``: the soft and hard terms' weights, from the trial's values;
- ``knowledge_weight``: a factor on every knowledge term's weight (beta, or the calibrated ``auto`` weights), from 1.

A learned temperature goes further than a schedule: a temperature learner (`register_temperature_learner`, chosen
by the option ``temperature_learner``; default ``none``) is a module with its own parameters that gives the
temperature of each step from the progress and the scheduled value, trained with the student by the same optimiser
and checkpointed with it (`kdgrid.core.temperature_learner.TemperatureLearner`): CTKD's adversarial temperature
(Li et al., AAAI 2023: trained through gradient reversal, its reversal strength on a cosine curriculum) is one.

Pure Python (no torch): the grid validates the names without loading the trainer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kdgrid.core.named_registry import registrar, registration_problem
from kdgrid.errors import ConfigError

Schedule = Callable[[float, float, float], float]

# The values a schedule can move, and where each starts (a trial field, or 1 for the knowledge-weight factor).
KNOWLEDGE_WEIGHT = "knowledge_weight"  # the factor on every knowledge term's weight
SCHEDULED: tuple[str, ...] = ("temperature", "soft_weight", "alpha", KNOWLEDGE_WEIGHT)
DEFAULT_SCHEDULE = "constant"

SCHEDULES: dict[str, Schedule] = {}


# ``@register_schedule(name)``: register the decorated ``(progress, start, end) -> value`` function as ``name``.
register_schedule = registrar(SCHEDULES, "schedule")


@register_schedule("constant")
def constant(progress: float, start: float, end: float) -> float:
    return start


@register_schedule("linear")
def linear(progress: float, start: float, end: float) -> float:
    return start + (end - start) * progress


@register_schedule("cosine")
def cosine(progress: float, start: float, end: float) -> float:
    return end + (start - end) * (1.0 + math.cos(math.pi * progress)) / 2.0


# name -> ``(start temperature, the trial's options) -> TemperatureLearner`` (a module class, or any factory).
TEMPERATURE_LEARNERS: dict[str, Callable[[float, dict[str, Any]], Any]] = {}
NO_TEMPERATURE_LEARNER = "none"
# The trial option that names a trial's temperature learner (``none``: the temperature is the trial's, or its
# schedule's).
TEMPERATURE_LEARNER = "temperature_learner"


# ``@register_temperature_learner(name)``: register the decorated ``(start temperature, options) ->
# TemperatureLearner`` factory as ``name`` (``none`` is taken: it means no learner).
register_temperature_learner = registrar(TEMPERATURE_LEARNERS, "temperature learner", {NO_TEMPERATURE_LEARNER})


def temperature_learner_problem(value: object) -> str | None:
    """Why ``value`` is not a registered temperature learner nor ``none`` (None when it is)."""
    return registration_problem(value, TEMPERATURE_LEARNERS, "temperature learner", also=[NO_TEMPERATURE_LEARNER])


def schedule_problem(value: object) -> str | None:
    """Why ``value`` is not a registered schedule name (None when it is); the message names the allowed ones."""
    return registration_problem(value, SCHEDULES, "schedule")


def progress(step_index: int, total_steps: int) -> float:
    """The progress ``k / (S - 1)`` of the k-th (0-based) of ``total_steps`` steps, clipped to [0, 1]."""
    if total_steps <= 1:
        return 0.0
    return min(1.0, max(0.0, step_index / (total_steps - 1)))


def schedule_value(name: str, progress: float, start: float, end: float) -> float:
    """The value of schedule ``name`` at ``progress``; ConfigError naming the allowed schedules otherwise."""
    problem = schedule_problem(name)
    if problem:
        raise ConfigError(problem)
    return float(SCHEDULES[name](progress, start, end))
