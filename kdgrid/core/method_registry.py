"""The method registry: each method kdgrid knows (built-in or a plugin's), with its rules and its costs, without
torch.

A method is what a trial turns on beside the paper's objective (a learned temperature, a learnable strategy, a
projector ensemble, an optimiser, masking, ...). Each built-in one lives in a folder of its own under
`kdgrid.core.methods` whose torch-free ``spec.py`` calls `register_method` when it is imported; a plugin does the
same from its own module (docs/extending.md). Nothing in this registry, nor in the other registries
(`kdgrid.core.options`, `kdgrid.core.matching`, `kdgrid.core.example_weights`, `kdgrid.core.schedules`), names a
method: they ask every registered `MethodSpec`:

- ``rules``: what the method refuses before anything runs, at one of the `STAGES` of
  `kdgrid.core.trial_rules.trial_problems` (``options``: once every option is well-formed; ``values``: with the
  task's kind; ``combination``: with the two shapes and the layer pairs, where known; ``terms``: with the
  number of projected loss terms, counted from the shapes and pairs as the objective builds the terms
  (`kdgrid.core.knowledge.projected_term_count`), so ``plan`` and the trainer refuse alike);
- ``learns``: whether a trial has a learned part of this method's beside the student (its parameters then take
  ``learned_lr_scale``);
- ``memory``: what one of its trials adds to a job's memory (`MethodMemory`: parameters, and bytes per parameter
  of the student beside AdamW's), read by the planner's estimate (`kdgrid.grid.memory_estimate`);
- ``hooks``: its part in a student's training (``"module:function"``: the function builds the trial's
  `kdgrid.core.step_hooks.StepHooks`; imported on first use, for the trials it is ``uses``-d by);
- ``evaluates_only``: whether a trial trains nothing in its job (it evaluates a student trained by another
  trial, loaded after the job's students are freed: the estimate counts none of its training memory);
- ``own_loss``: whether a trial trains on the method's own loss in place of eq. 9 (its hooks give the terms:
  `kdgrid.core.step_hooks.StepHooks.own_values`), so that soft_weight = 0, alpha = 0 and no knowledge still
  leave it something to learn from.
- ``presets``: its recipes a sweep study can name (``preset: paper``, `Preset`): the Trial fields and options the
  recipe sets on the trials that use the method, where the study leaves them unset (`kdgrid.grid.presets`).

The built-ins register on the first import of any ``kdgrid.core`` module (`kdgrid.core.__init__` loads the list
in `kdgrid.core.methods`), so every process that reads a registry knows them, as it knows a plugin it loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kdgrid.core.step_hooks import StepHooks

if TYPE_CHECKING:  # annotations only: the registry imports no shape module
    from kdgrid.core.model.shapes import StudentShape
    from kdgrid.trial import Trial

Stage = Literal["options", "values", "combination", "terms"]
STAGES: tuple[Stage, ...] = ("options", "values", "combination", "terms")


@dataclass(frozen=True)
class TrialFacts:
    """What a rule or a memory count may read about a trial beside the trial itself, each None where it is not
    known yet (a shape only the network could tell, an unknown task).

    Attributes:
        trial: the trial.
        student, teacher: their shapes (``combination`` rules and memory counts).
        pairs: the (student layer, teacher layer) pairs of its strategy; None where they cannot be known.
        regression: whether the task is a regression (``values`` rules).
        learns_beside_the_student: whether the trial has a learned part beside the student (a learnable
            strategy's mapping, a temperature learner, or a method whose ``learns`` says so).
        projected_terms: how many loss terms are projected (``terms`` rules).
        projection_parameters: the parameters of the trial's projections, one projector per projected term
            (memory counts: a method that multiplies them adds the extra copies).
    """

    trial: Trial
    student: StudentShape | None = None
    teacher: StudentShape | None = None
    pairs: list[tuple[int, int]] | None = None
    regression: bool | None = None
    learns_beside_the_student: bool = False
    projected_terms: int | None = None
    projection_parameters: int = 0


Rule = Callable[[TrialFacts], list[str]]
"""A method's rule: the problems of a trial (messages; empty when it can run)."""


@dataclass(frozen=True)
class MethodMemory:
    """What one trial of a method adds to its job's memory: ``parameters`` beside the student's (16 bytes each,
    with AdamW's state) and ``bytes_per_parameter`` more for every parameter of the student (a gradient split's
    second gradient, a lookahead's copies)."""

    parameters: int = 0
    bytes_per_parameter: int = 0


@dataclass(frozen=True)
class Preset:
    """A method's recipe under a name a sweep study can set (``preset: paper``).

    Attributes:
        name: the preset's name (``paper``: the recipe of the method's paper).
        fields: Trial fields it sets, ``(field, value)`` pairs as a sweep file writes them (``("lr", 0.05)``).
        options: trial options it sets, ``(option, value)`` pairs.
        adapted: what of the paper's recipe had to be adapted to BERT-style students (and why), or what it
            leaves to the study; shown in the docs' table of methods.
        applies: which of the method's trials it applies to (None: every trial the method ``uses``), e.g. the
            projector ensemble's recipe to ensembles only, not to every projection.
    """

    name: str
    fields: tuple[tuple[str, Any], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()
    adapted: str = ""
    applies: Callable[[Trial], bool] | None = None


@dataclass(frozen=True)
class MethodSpec:
    """One method.

    Attributes:
        name: its folder's name (``ctkd``, ``dual_head``), unique.
        title: one line for the docs' list of methods and for messages.
        paper: the paper it implements (authors, title, venue, year), or where kdgrid's own variant comes from.
        options: the trial options it owns (each registered with `kdgrid.core.options.register_option`).
        rules: its rules by stage.
        learns: whether a trial has a learned part of this method's (None: never).
        memory: what a trial of it adds to a job's memory, from the trial's facts (None: nothing).
        uses: whether a trial uses the method (None: never; its hooks are built for those that do).
        hooks: ``"module:function"``, the function ``trial -> StepHooks`` of its part in the training step.
        evaluates_only: whether a trial of it trains nothing in its job (None: every trial trains).
        own_loss: whether a trial of it trains on the method's own loss in place of eq. 9 (None: never).
        depends_on: the methods whose modules its own may import (a declared dependency).
        presets: its named recipes (`Preset`), each applied to the trials it ``uses`` by a study naming it.
    """

    name: str
    title: str
    paper: str
    options: tuple[str, ...] = ()
    rules: tuple[tuple[Stage, Rule], ...] = ()
    learns: Callable[[Trial], bool] | None = None
    memory: Callable[[TrialFacts], MethodMemory] | None = None
    uses: Callable[[Trial], bool] | None = None
    hooks: str | None = None
    evaluates_only: Callable[[Trial], bool] | None = None
    own_loss: Callable[[Trial], bool] | None = None
    depends_on: tuple[str, ...] = field(default=())
    presets: tuple[Preset, ...] = ()


METHODS: dict[str, MethodSpec] = {}


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add a method; registering the same spec again is harmless.

    Raises:
        ValueError: another method of that name is registered, or a rule names an unknown stage.
    """
    for stage, _ in spec.rules:
        if stage not in STAGES:
            raise ValueError(f"method {spec.name!r}: unknown rule stage {stage!r}; allowed: {', '.join(STAGES)}")
    known = METHODS.get(spec.name)
    if known is not None and known != spec:
        raise ValueError(f"method {spec.name!r} is already registered ({known.title})")
    METHODS[spec.name] = spec
    return spec


def registered_methods() -> list[MethodSpec]:
    """Every registered method, in registration order (the built-ins first, in `kdgrid.core.methods`' order)."""
    return list(METHODS.values())


def method_rules(stage: Stage) -> Iterable[Rule]:
    """The rules of every method at ``stage``, in registration order."""
    for spec in METHODS.values():
        yield from (rule for rule_stage, rule in spec.rules if rule_stage == stage)


def run_rules(stage: Stage, facts: TrialFacts) -> list[str]:
    """The problems every method's rules at ``stage`` find in a trial."""
    return [problem for rule in method_rules(stage) for problem in rule(facts)]


def preset_names() -> list[str]:
    """The names of every registered method's presets, sorted."""
    return sorted({preset.name for spec in METHODS.values() for preset in spec.presets})


def presets_named(name: str) -> list[tuple[MethodSpec, Preset]]:
    """Each registered method with a preset called ``name``, with that preset, in registration order."""
    return [(spec, preset) for spec in METHODS.values() for preset in spec.presets if preset.name == name]


def learns_beside_the_student(trial: Trial) -> bool:
    """Whether a method of the trial has a learned part (``learns``) beside the student."""
    return any(spec.learns is not None and spec.learns(trial) for spec in METHODS.values())


def method_memory(facts: TrialFacts) -> MethodMemory:
    """What the trial's methods add to its job's memory, summed over every registered method."""
    parameters = per_parameter = 0
    for spec in METHODS.values():
        if spec.memory is not None:
            cost = spec.memory(facts)
            parameters += cost.parameters
            per_parameter += cost.bytes_per_parameter
    return MethodMemory(parameters, per_parameter)


def evaluates_only(trial: Trial) -> bool:
    """Whether a method of the trial makes it train nothing in its job (``evaluates_only``)."""
    return any(spec.evaluates_only is not None and spec.evaluates_only(trial) for spec in METHODS.values())


def trains_on_own_loss(trial: Trial) -> bool:
    """Whether a method of the trial replaces eq. 9 with its own loss (``own_loss``)."""
    return any(spec.own_loss is not None and spec.own_loss(trial) for spec in METHODS.values())


def step_hooks(trial: Trial) -> list[StepHooks]:
    """The hooks of every registered method the trial uses, in registration order: each method's factory
    (``MethodSpec.hooks``, imported by name here, so that registering needs no torch) called with the trial."""
    hooks: list[StepHooks] = []
    for spec in METHODS.values():
        if spec.hooks is None or spec.uses is None or not spec.uses(trial):
            continue
        module, _, name = spec.hooks.partition(":")
        built = getattr(importlib.import_module(module), name)(trial)
        if built is not None:
            hooks.append(built)
    return hooks
