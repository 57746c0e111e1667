"""The trial options kdgrid reads (``Trial.options``): each declared once, with its type, default and meaning.

A trial's ``options`` mapping holds two kinds of keys:

- a registered option (``soft_t2``, ``max_grad_norm``, ...): declared with `register_option`, one call each: the
  options of the objective and the extension points here, a method's in its own spec (`kdgrid.core.methods`), a
  plugin's in the plugin;
- ``{knowledge}.{variant}`` (``pkd.scale``): a keyword variant of a knowledge of the trial, declared by the
  knowledge function's own signature in `kdgrid.core.losses` (its type hint gives the allowed values).

`option_problems` checks a trial's options against both (unknown keys, values of the wrong type), so a misspelt
or mistyped option is refused by ``kdgrid plan`` instead of being read as something else while training.
"""

from __future__ import annotations

import math
import numbers
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kdgrid.core import knowledge as registry
from kdgrid.core.example_weights import DEFAULT_EXAMPLE_WEIGHT, example_weight_problem
from kdgrid.core.pretrained.recipe_names import INIT_RECIPE, init_recipe_problem
from kdgrid.core.schedules import (
    DEFAULT_SCHEDULE,
    NO_TEMPERATURE_LEARNER,
    SCHEDULED,
    TEMPERATURE_LEARNER,
    schedule_problem,
    temperature_learner_problem,
)
from kdgrid.core.teacher.options import TEACHER_GATE, TEACHER_LABEL_ORDER, gate_problem, label_order_problem
from kdgrid.errors import KdgridError
from kdgrid.number_range import POSITIVE, NumberRange
from kdgrid.suggest import did_you_mean
from kdgrid.trial import DATA_SEED, SEED_LIMIT

# What a value of each kind of option must be, and how a message names it.
OptionKind = typing.Literal["bool", "int", "number", "text", "int_list", "number_list", "labels"]
KIND_WORDS: dict[str, str] = {
    "bool": "true or false",
    "int": "an integer",
    "number": "a finite number",
    "text": "a string",
    "int_list": "a list of integers",
    "number_list": "a list of finite numbers",
    "labels": "a list of label names or ids",
}

# Option name: score each dev set on its first N examples only (smoke runs; `kdgrid.sweep_run.smoke_trial`).
MAX_DEV_SAMPLES = "max_dev_samples"

# The smallest temperature allowed: the soft labels are softmax(logits / T), and below this T the logits of a
# trained classifier (magnitudes up to about 20) give a one-hot target, or overflow float16 (max 65504) under AMP
# for logits / T above that: the loss turns infinite or NaN instead of teaching anything.
MIN_TEMPERATURE = 0.01

# Option names of the extension points: the per-example weight (`kdgrid.core.example_weights`) and, for each
# scheduled value (`kdgrid.core.schedules.SCHEDULED`), its schedule and its value at the last step.
EXAMPLE_WEIGHT = "example_weight"


def schedule_option(target: str) -> str:
    """The option naming ``target``'s schedule (``temperature_schedule``)."""
    return f"{target}_schedule"


def end_option(target: str) -> str:
    """The option giving ``target``'s value at the last step (``temperature_end``)."""
    return f"{target}_end"


def naming(key: str, problem: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    """``problem`` with its message prefixed by the option it is about."""

    def check(value: Any) -> str | None:
        found = problem(value)
        return None if found is None else f"option {key}={value!r} is invalid: {found}"

    return check


# Warm-up batches that calibrate ``beta: auto`` knowledge weights (option ``auto_batches``).
DEFAULT_AUTO_BATCHES = 10


@dataclass(frozen=True)
class OptionSpec:
    """One registered option.

    Attributes:
        name: the key in a trial's ``options``.
        kind: ``bool`` | ``int`` | ``number`` (finite) | ``text`` | ``int_list``.
        default: the value when the option is not given (``None``: off; ``null`` may then be written too).
        meaning: one line for messages and listings.
        minimum: for ``int`` and ``number``: the smallest value allowed.
        below: for ``int`` and ``number``: every value allowed is smaller than this.
        check: for an option whose rule is more than its kind: ``check(value)`` says why a value is not allowed
            (None when it is), in place of the kind's rule.
    """

    name: str
    kind: OptionKind
    default: Any
    meaning: str
    minimum: float | None = None
    check: Callable[[Any], str | None] | None = None
    below: float | None = None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not allowed for this option (None when it is)."""
        if value is None and self.default is None:
            return None
        if self.check is not None:
            return self.check(value)
        fits = _fits(self.kind, value) and (
            self.kind not in ("int", "number") or NumberRange(low=self.minimum, integer=self.kind == "int").contains(value)
        )
        if fits and self.below is not None and not NumberRange(high=self.below, high_open=True).contains(value):
            return (
                f"option {self.name}={value!r} is invalid; allowed: below {self.below:.0f} ({self.meaning})"
            )
        if fits:
            return None
        wanted = KIND_WORDS[self.kind]
        if self.minimum is not None:
            wanted += f" >= {self.minimum:g}"
        if self.default is None:
            wanted += " or null"
        return f"option {self.name}={value!r} is invalid; allowed: {wanted} ({self.meaning})"


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive_number_problem(value: Any) -> str | None:
    """Why ``value`` is not a finite number > 0 (None when it is)."""
    return None if POSITIVE.contains(value) else f"allowed: {POSITIVE.describe()}"


def _fits(kind: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return _is_number(value) and math.isfinite(value)
    if kind == "text":
        return isinstance(value, str)
    if kind == "number_list":
        return isinstance(value, list | tuple) and all(_fits("number", v) for v in value)
    if kind == "labels":
        return isinstance(value, list | tuple) and all(isinstance(v, str) or _fits("int", v) for v in value)
    return isinstance(value, list | tuple) and all(_fits("int", v) for v in value)


OPTIONS: dict[str, OptionSpec] = {}


def register_option(
    name: str,
    kind: OptionKind,
    default: Any,
    meaning: str,
    *,
    minimum: float | None = None,
    check: Callable[[Any], str | None] | None = None,
    below: float | None = None,
) -> OptionSpec:
    """Declare an option a trial may set; registering the same declaration twice is harmless.

    Raises:
        ValueError: a different option of that name is already declared, or an unknown kind.
    """
    if kind not in KIND_WORDS:
        raise ValueError(f"option {name!r}: unknown kind {kind!r}; allowed: {', '.join(KIND_WORDS)}")
    spec = OptionSpec(name, kind, default, meaning, minimum, check, below)
    if OPTIONS.get(name, spec) != spec:
        raise ValueError(f"option {name!r} is already declared differently: {OPTIONS[name]}")
    OPTIONS[name] = spec
    return spec


register_option(
    "soft_t2", "bool", False, "multiply the soft-label loss by T^2; the paper's numbers have none"
)
register_option(
    "max_grad_norm", "number", None, "clip the gradient norm to this (no clipping by default)", minimum=0
)
register_option(
    "auto_batches", "int", DEFAULT_AUTO_BATCHES, "warm-up batches that calibrate beta: auto", minimum=1
)
register_option(
    "preload_layers",
    "int_list",
    None,
    "init preload: the teacher layers (1-based) copied, one per student layer",
)
register_option(
    DATA_SEED,
    "int",
    None,
    "the seed of the data order (shuffling, batches); unset: the trial's seed. Trials that differ only in seed "
    "and share a data_seed train in one job on identical batches (docs/seeds.md)",
    minimum=0,
    below=SEED_LIMIT,
)
register_option(
    INIT_RECIPE,
    "text",
    None,
    "init general_distillation / pretrain: start from the checkpoint of this pre-training recipe (a bundled "
    "name or a recipe file; kdgrid.core.pretrained.needed), completed by the trial's student and teacher",
    check=init_recipe_problem,
)
register_option(
    MAX_DEV_SAMPLES,
    "int",
    None,
    "score on the first N examples of each dev set only (smoke runs: scores not comparable with full ones; "
    "the teacher gate still uses the whole dev set)",
    minimum=1,
)
register_option(
    TEACHER_LABEL_ORDER,
    "labels",
    None,
    "the task label each teacher output means, e.g. [contradiction, entailment, neutral]; the teacher's "
    "logits are re-ordered to the task's order (kdgrid.core.teacher.label_order)",
    check=label_order_problem,
)
register_option(
    EXAMPLE_WEIGHT,
    "text",
    DEFAULT_EXAMPLE_WEIGHT,
    "how much each example's soft-label loss counts, a registered weight function (kdgrid.core.example_weights); "
    "the weights of a batch average 1",
    check=naming(EXAMPLE_WEIGHT, example_weight_problem),
)
register_option(
    TEMPERATURE_LEARNER,
    "text",
    NO_TEMPERATURE_LEARNER,
    "a module that learns the soft-label temperature with the student (kdgrid.core.schedules, e.g. CTKD's); "
    "none: the temperature is the trial's, or its schedule's",
    check=naming(TEMPERATURE_LEARNER, temperature_learner_problem),
)
for _target in SCHEDULED:
    register_option(
        schedule_option(_target),
        "text",
        DEFAULT_SCHEDULE,
        f"how {_target} moves from its start to {end_option(_target)} over the training steps, a registered "
        "schedule (kdgrid.core.schedules)",
        check=naming(schedule_option(_target), schedule_problem),
    )
    register_option(
        end_option(_target),
        "number",
        None,
        f"{_target} at the last step (its schedule goes there); unset: its start",
        minimum=MIN_TEMPERATURE if _target == "temperature" else 0,
    )
register_option(
    TEACHER_GATE,
    "bool",
    True,
    "false skips the teacher gate: the teacher is not meant to be accurate (rows record it)",
    check=gate_problem,
)

def _knowledge_option_problem(
    key: str, value: Any, knowledge: Iterable[str], skip: Iterable[str]
) -> str | None:
    """Why ``{knowledge}.{variant}`` = ``value`` is not allowed: the knowledge must be one the trial uses (and
    not one of ``skip``, whose variants the objective sets itself), the variant a keyword of its function, the
    value of the type its hint names (a ``Literal`` lists the allowed values)."""
    name, _, variant = key.partition(".")
    try:
        spec = registry.get_knowledge(name)
    except KdgridError as error:
        return f"option {key!r}: {error}"
    if name != spec.name:  # the objective reads variants under the registry's name only
        return f"option {key!r}: write it as {spec.name}.{variant}"
    usable = sorted(set(knowledge) - set(skip))
    if spec.name not in usable:
        return f"option {key!r} sets a variant of {spec.name!r}, which the trial does not use; its knowledge: {usable or 'none'}"
    hints = typing.get_type_hints(spec.fn)  # the loss's own module: importing it imports torch
    allowed = {n: hints.get(n) for n in spec.options() if _settable(hints.get(n))}
    if variant not in allowed:
        return f"option {key!r}: knowledge {spec.name!r} has no option {variant!r}; allowed: {sorted(allowed) or 'none'}"
    hint = allowed[variant]
    if typing.get_origin(hint) is typing.Literal:
        choices = typing.get_args(hint)
        ok, wanted = value in choices and isinstance(value, str), ", ".join(map(str, choices))
    elif hint is bool:
        ok, wanted = isinstance(value, bool), KIND_WORDS["bool"]
    else:  # float: a scale, epsilon or temperature
        ok, wanted = _is_number(value) and math.isfinite(value) and value > 0, "a positive number"
    return None if ok else f"option {key}={value!r} is invalid; allowed: {wanted}"


def _settable(hint: Any) -> bool:
    """Whether a variant can be written in a trial file (tensors and internal flags cannot)."""
    return hint in (bool, float) or typing.get_origin(hint) is typing.Literal


def unknown_option_message(key: str) -> str:
    """The one message of an option name that is neither an option nor ``{knowledge}.{variant}``, with the
    closest names first (`kdgrid.suggest`)."""
    return (
        f"unknown option {key!r}; allowed: {', '.join(sorted(OPTIONS))}, or "
        "'{knowledge}.{variant}' for a variant of a knowledge of the trial (e.g. pkd.scale)"
        f"{did_you_mean(key, OPTIONS)}"
    )


def option_problems(
    options: Iterable[tuple[str, Any]], knowledge: Iterable[str], *, response_knowledge: Iterable[str] = ()
) -> list[str]:
    """Every problem of a trial's ``options`` (empty when all are fine): unknown keys (naming the allowed ones)
    and values of the wrong type. ``knowledge`` is the trial's; variants of ``response_knowledge`` are refused
    (the objective sets them: ``soft_t2`` is the option for the soft loss)."""
    problems: list[str] = []
    knowledge = tuple(knowledge)
    for key, value in options:
        if key in OPTIONS:
            problem = OPTIONS[key].problem(value)
        elif "." in key:
            problem = _knowledge_option_problem(key, value, knowledge, response_knowledge)
        else:
            problem = unknown_option_message(key)
        if problem:
            problems.append(problem)
    return problems
