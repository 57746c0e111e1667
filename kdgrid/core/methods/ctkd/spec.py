"""Learned temperatures: the option ``temperature_learner`` and its rules, without torch.

``temperature_learner: ctkd`` replaces the trial's fixed soft-label temperature with a learned one (CTKD: Li, Li,
Yang, Yang, Cheng & Yang, "Curriculum Temperature for Knowledge Distillation", AAAI 2023; the module is
`kdgrid.core.methods.ctkd.temperature`). Its options (registered here):

- ``ctkd_min_temperature``, ``ctkd_max_temperature``: the range the learned temperature is kept in (a sigmoid);
  the trial's ``temperature`` is where it starts and must lie strictly inside;
- ``ctkd_lambda_max``: the gradient-reversal strength at the end of its curriculum;
- ``ctkd_ramp``: the fraction of training over which the strength rises from 0 to ``ctkd_lambda_max`` by half a
  cosine (CTKD's curriculum), then stays there;
- ``ctkd_form``: ``paper`` (default), the authors' module and schedule (zhengli97/CTKD): the temperature starts at
  ``theta = 1`` (T = 1 + 20 sigmoid(1) = 15.62 in the default range [1, 21]) whatever the trial's ``temperature``,
  the strength ramps over ``10 / 240`` of training (their 10 of 240 epochs) unless ``ctkd_ramp`` says otherwise,
  and the soft term is multiplied by T^2 (they reverse ``KL x T^2``) unless ``soft_t2`` says otherwise; or
  ``kdgrid``, kdgrid's earlier form: the temperature starts at the trial's ``temperature`` (strictly inside the
  range), the ramp is the whole of training, and ``soft_t2`` keeps its own default (off).

`learner_problems` refuses the combinations that cannot run: a ``ctkd_*`` option without the learner, a start
outside the range, a temperature schedule beside it (both would set the temperature), or a soft-label weight of 0
(the temperature would receive no gradient: nothing would be learned).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any

from kdgrid.core.method_registry import MethodMemory, MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.options import MIN_TEMPERATURE, register_option, schedule_option
from kdgrid.core.schedules import NO_TEMPERATURE_LEARNER, TEMPERATURE_LEARNER, register_temperature_learner
from kdgrid.number_range import NumberRange

CTKD = "ctkd"

CTKD_MIN = "ctkd_min_temperature"
CTKD_MAX = "ctkd_max_temperature"
CTKD_LAMBDA = "ctkd_lambda_max"
CTKD_RAMP = "ctkd_ramp"
CTKD_FORM = "ctkd_form"
PAPER_FORM, KDGRID_FORM = "paper", "kdgrid"
CTKD_FORMS: tuple[str, ...] = (PAPER_FORM, KDGRID_FORM)
CTKD_DEFAULTS: dict[str, float] = {CTKD_MIN: 1.0, CTKD_MAX: 21.0, CTKD_LAMBDA: 1.0}
PAPER_THETA_0 = 1.0  # the authors' initial logit: T = 1 + 20 sigmoid(1) = 15.62
PAPER_RAMP = 10 / 240  # the authors' ramp: 10 of 240 epochs
KDGRID_RAMP = 1.0  # kdgrid's earlier ramp: the whole of training
CTKD_OPTIONS: tuple[str, ...] = (*CTKD_DEFAULTS, CTKD_RAMP, CTKD_FORM)


def ctkd_form(options: Mapping[str, Any]) -> str:
    """The trial's CTKD form, ``paper`` unless ``ctkd_form`` says ``kdgrid``."""
    return str(options.get(CTKD_FORM, PAPER_FORM))


def ctkd_form_problem(value: object) -> str | None:
    """Why ``value`` is not a CTKD form (None when it is)."""
    if isinstance(value, str) and value in CTKD_FORMS:
        return None
    return f"option {CTKD_FORM}={value!r} is invalid; allowed: {', '.join(CTKD_FORMS)}"


def ctkd_start(options: Mapping[str, Any], temperature: float) -> float:
    """Where the learned temperature starts: the authors' ``theta = 1`` in the trial's range (``paper``), or the
    trial's ``temperature`` (``kdgrid``)."""
    if ctkd_form(options) == KDGRID_FORM:
        return temperature
    low, high = (float(options.get(key, CTKD_DEFAULTS[key])) for key in (CTKD_MIN, CTKD_MAX))
    return low + (high - low) / (1.0 + math.exp(-PAPER_THETA_0))


def soft_t2_default(options: Mapping[str, Any]) -> bool:
    """``soft_t2`` when the trial leaves it unset: on for CTKD's paper form (the authors reverse ``KL x T^2``),
    off otherwise (the option's own default)."""
    return options.get(TEMPERATURE_LEARNER, NO_TEMPERATURE_LEARNER) == CTKD and ctkd_form(options) == PAPER_FORM


def ramp_problem(value: object) -> str | None:
    """Why ``value`` is not a ramp fraction in (0, 1] (None when it is)."""
    return NumberRange(low=0, high=1, low_open=True).problem(CTKD_RAMP, value, "a fraction of training")


def ctkd_settings(options: Mapping[str, Any]) -> dict[str, float]:
    """The four CTKD settings of a trial's options, defaults filled in (the ramp's by the form)."""
    ramp = PAPER_RAMP if ctkd_form(options) == PAPER_FORM else KDGRID_RAMP
    return {
        **{key: float(options.get(key, default)) for key, default in CTKD_DEFAULTS.items()},
        CTKD_RAMP: float(options.get(CTKD_RAMP, ramp)),
    }


def learned_temperature_parameters(options: Mapping[str, Any]) -> int:
    """The parameters a trial's temperature learner adds (CTKD: one logit)."""
    return 1 if options.get(TEMPERATURE_LEARNER, NO_TEMPERATURE_LEARNER) == CTKD else 0


def learner_problems(
    options: Mapping[str, Any], temperature: float, soft_weight: float, temperature_schedule: str
) -> list[str]:
    """What makes the trial's temperature learner impossible (empty when it can run, or when there is none)."""
    learner = options.get(TEMPERATURE_LEARNER, NO_TEMPERATURE_LEARNER)
    if learner != CTKD:
        stray = sorted(key for key in CTKD_OPTIONS if key in options)
        return [f"option(s) {stray} need {TEMPERATURE_LEARNER}: {CTKD}"] if stray else []
    settings = ctkd_settings(options)
    low, high = settings[CTKD_MIN], settings[CTKD_MAX]
    problems: list[str] = []
    if not low < high:
        problems.append(f"{CTKD_MIN}={low:g} must be below {CTKD_MAX}={high:g}")
    elif ctkd_form(options) == KDGRID_FORM and not low < temperature < high:
        problems.append(
            f"{TEMPERATURE_LEARNER}: {CTKD} starts at the trial's temperature, which must lie strictly between "
            f"{CTKD_MIN}={low:g} and {CTKD_MAX}={high:g}; got temperature={temperature:g}"
        )
    if temperature_schedule != "constant":
        problems.append(
            f"{TEMPERATURE_LEARNER}: {CTKD} learns the temperature; temperature_schedule must be constant, "
            f"got {temperature_schedule!r}"
        )
    if soft_weight == 0:
        problems.append(
            f"{TEMPERATURE_LEARNER}: {CTKD} learns the temperature through the soft-label loss, but soft_weight is 0"
        )
    return problems


@register_temperature_learner(CTKD)
def build_ctkd(start: float, options: dict[str, Any]) -> Any:
    """CTKD's learned temperature (`kdgrid.core.methods.ctkd.temperature.LearnedTemperature`, a torch module imported by name on first
    use, so that registering it needs no torch) with the trial's CTKD settings, starting where its form says
    (`ctkd_start`: ``start`` is the trial's temperature)."""
    settings = ctkd_settings(options)
    module = importlib.import_module("kdgrid.core.methods.ctkd.temperature")
    return module.LearnedTemperature(
        ctkd_start(options, start),
        settings[CTKD_MIN],
        settings[CTKD_MAX],
        settings[CTKD_LAMBDA],
        settings[CTKD_RAMP],
        form=ctkd_form(options),
    )


def learner_rule(facts: TrialFacts) -> list[str]:
    """`learner_problems` of a trial."""
    trial = facts.trial
    options = dict(trial.options)
    schedule = str(options.get(schedule_option("temperature"), "constant"))
    return learner_problems(options, trial.temperature, trial.soft_weight, schedule)


def learner_memory(facts: TrialFacts) -> MethodMemory:
    """CTKD's one temperature logit (`learned_temperature_parameters`)."""
    return MethodMemory(parameters=learned_temperature_parameters(dict(facts.trial.options)))


register_option(
    CTKD_MIN, "number", CTKD_DEFAULTS[CTKD_MIN], "ctkd: the lowest temperature it may learn", minimum=MIN_TEMPERATURE
)
register_option(
    CTKD_MAX, "number", CTKD_DEFAULTS[CTKD_MAX], "ctkd: the highest temperature it may learn", minimum=MIN_TEMPERATURE
)
register_option(
    CTKD_LAMBDA,
    "number",
    CTKD_DEFAULTS[CTKD_LAMBDA],
    "ctkd: the gradient-reversal strength at the end of its cosine curriculum",
    minimum=0,
)
register_option(
    CTKD_RAMP,
    "number",
    None,
    "ctkd: the fraction of training over which the reversal strength rises to ctkd_lambda_max; unset: 10/240 "
    "(the authors' 10 of 240 epochs) under ctkd_form paper, 1 under kdgrid",
    check=ramp_problem,
)
register_option(
    CTKD_FORM,
    "text",
    PAPER_FORM,
    "ctkd: paper (the authors' start theta = 1, i.e. T = 15.62, their ramp and KL x T^2) or kdgrid (start at the "
    "trial's temperature, ramp over all of training, soft_t2's own default)",
    check=ctkd_form_problem,
)

register_method(
    MethodSpec(
        name="ctkd",
        title="CTKD: the soft-label temperature learned adversarially, with a cosine curriculum "
        "(temperature_learner: ctkd)",
        paper="Li, Li, Yang, Yang, Cheng & Yang, Curriculum Temperature for Knowledge Distillation, AAAI 2023",
        options=CTKD_OPTIONS,
        rules=(("options", learner_rule),),
        memory=learner_memory,
        uses=lambda trial: trial.option(TEMPERATURE_LEARNER) == CTKD,
        presets=(
            Preset(
                "paper",
                options=((CTKD_FORM, PAPER_FORM),),
                adapted="the authors' temperature module and schedule (the defaults, written into the trial); their "
                "SGD at lr 0.05 is a CIFAR recipe that leaves a random BERT-tiny at chance (as DOT's does): the "
                "study's optimizer and learning rate are kept",
            ),
        ),
        hooks="kdgrid.core.methods.ctkd.temperature:step_hooks",
    )
)
