"""A trial: one student distilled once. Frozen, hashable, and identified by a hash of its canonical JSON.

The id is what the store and resume key on (docs/design.md): the same configuration gives the same id on any
machine and in any sweep. Executor settings, paths of the store and sweep/study names are not part of a trial.
Names (knowledge, strategy, student, task) are validated and canonicalised by `kdgrid.grid` before a Trial is
built; this module only fixes the fields, their defaults, the canonical form and the grouping key.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Bump only when the meaning of an existing field changes: every id changes with it.
TRIAL_ID_VERSION = 1

# The trial options that decide a trial's group, named here beside the grouping rule; their meaning and checks are
# registered in `kdgrid.core.options` and `kdgrid.core.teacher.options`.
DATA_SEED = "data_seed"
SEED_LIMIT = 2**32
"""Seeds (a trial's ``seed``, its ``data_seed``) lie in [0, SEED_LIMIT): what numpy's and torch's generators take."""
TEACHER_LABEL_ORDER = "teacher_label_order"
TEACHER_GATE = "teacher_gate"
# A teacher that is another trial's trained student (a teacher assistant, Mirzadeh et al., AAAI 2020): the
# teacher field holds ``trial:<that trial's id>``, so a dependant's id includes its assistant's id, never a path.
TRAINED_TEACHER_PREFIX = "trial:"


def trained_teacher(trial_id: str) -> str:
    """The ``teacher`` value naming the trained student of trial ``trial_id``."""
    return f"{TRAINED_TEACHER_PREFIX}{trial_id}"


def assistant_id(teacher: str) -> str | None:
    """The trial id a ``teacher`` value names (``trial:<id>``: that trial's trained student teaches), else None."""
    return teacher[len(TRAINED_TEACHER_PREFIX) :] if teacher.startswith(TRAINED_TEACHER_PREFIX) else None


def init_source_id(init_from: str | None) -> str | None:
    """The trial id an ``init_from`` value names (``trial:<id>``: the student starts from that trial's trained
    student, as a stage of MOHAWK continues the stage before), else None."""
    return None if init_from is None else assistant_id(init_from)


def source_trial_ids(trial: Any) -> tuple[str, ...]:
    """The trials whose trained students ``trial`` needs before it can run: its teacher's (a teacher assistant)
    and its initialisation's (``init_from: trial:<id>``), in that order, each at most once."""
    found = (assistant_id(trial.teacher), init_source_id(trial.init_from))
    return tuple(dict.fromkeys(trial_id for trial_id in found if trial_id is not None))


# LKD's held-out split (`kdgrid.core.methods.lkd.lookahead`): the share of the training data it holds out; it changes the batches.
LKD_HOLDOUT = "lkd_holdout"
# Options that change the shared teacher pass: trials differing in one of them are different groups.
TEACHER_PASS_OPTIONS: tuple[str, ...] = (TEACHER_GATE, TEACHER_LABEL_ORDER, LKD_HOLDOUT)
# Masked distillation (`kdgrid.core.methods.masking.masks`): which side sees masked inputs, how many tokens, chosen how. With
# ``mask_input: teacher`` the masking changes the teacher pass, so then (and only then) all three split groups.
MASK_INPUT = "mask_input"
MASK_FRACTION = "mask_fraction"
MASK_BY = "mask_by"
MASK_OPTIONS: tuple[str, ...] = (MASK_BY, MASK_FRACTION, MASK_INPUT)
# MaskedKD's criterion (``mask_by: maskedkd``): the teacher's input depends on the trial's own student, so each
# such trial has a teacher pass of its own.
MASKEDKD = "maskedkd"


DISTILLATION_FIELDS: tuple[str, ...] = ("knowledge", "strategy", "beta", "projection", "relation_heads", "options")
"""The fields that say what a student learns from its teacher besides the task's labels (`Distillation`)."""


@dataclass(frozen=True)
class Distillation:
    """The distillation terms, one spec for a task trial (`Trial`) and a pre-training recipe
    (`kdgrid.core.pretrained.recipe.PretrainRecipe`): which knowledge (0, 1 or several functions of
    ``kdgrid.core.knowledge``), between which layers (``strategy``, `kdgrid.core.matching`), weighted by ``beta``
    (paper eq. 9; a trial may say ``"auto"``), through which width ``projection`` (``linear`` | ``mlp``), with how
    many ``relation_heads`` (``None``: the student's), and the loss ``options`` (sorted ``(name, value)`` pairs).

    Both holders keep these as top-level fields of their own (`DISTILLATION_FIELDS`), so the spec is serialised
    flat: a trial's id and a recipe's key hash exactly the JSON they always did. `of` reads the spec of either
    holder; `fields` gives it back as the flat keyword arguments both take, so a recipe's terms become the trial
    the task-distillation rules and objective read (`kdgrid.pretrain.loss.distillation_trial`) field for field.
    """

    knowledge: tuple[str, ...] = ()
    strategy: str | None = None
    beta: float | str = 1.0
    projection: str = "linear"
    relation_heads: int | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, holder: Any) -> Distillation:
        """The spec of a `Trial` or a recipe (anything with the `DISTILLATION_FIELDS` as attributes)."""
        return cls(**{name: getattr(holder, name) for name in DISTILLATION_FIELDS})

    def fields(self) -> dict[str, Any]:
        """The flat keyword arguments of `Trial` and of a recipe, by field name."""
        return {name: getattr(self, name) for name in DISTILLATION_FIELDS}


def canonical_options(options: Mapping[str, Any] | Iterable[tuple[Any, Any]]) -> tuple[tuple[str, Any], ...]:
    """Options (a mapping or ``(name, value)`` pairs) as the one form a trial and a recipe keep: sorted pairs with
    names as text, so that equal options compare and hash equal."""
    pairs = options.items() if isinstance(options, Mapping) else options
    return tuple(sorted((str(name), value) for name, value in pairs))


def json_fields(holder: Any) -> dict[str, Any]:
    """Every field of a `Trial` or a recipe (a dataclass with the `DISTILLATION_FIELDS`), defaults filled in, as
    JSON-ready values: ``knowledge`` a list, ``options`` a mapping."""
    # a shallow copy: every field is a str, number or None but these two (dataclasses.asdict's deep copy was the
    # largest cost of expanding a sweep of thousands of trials)
    fields = {field.name: getattr(holder, field.name) for field in dataclasses.fields(holder)}
    fields["knowledge"] = list(holder.knowledge)
    fields["options"] = dict(holder.options)
    return fields


def versioned_json(version: int, fields: Mapping[str, Any]) -> str:
    """``fields`` with ``"v": version``, sorted keys, no whitespace: the text a trial id or a recipe key hashes."""
    return json.dumps({"v": version, **fields}, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Trial:
    """One distillation run.

    Attributes:
        task: GLUE task name (``sst2``, ``mnli``, ...) or a local task name (``polarity``, ``uncertainty``,
            ``synthetic-...``).
        teacher: a Hub name, a registered teacher alias (``minilm-l6``) or a local directory.
        student: a student name (``bert-tiny``, ``bert-mini``, ``bert-small``, ``bert-medium``) or a shape
            ``w{width}-l{layers}[-h{heads}][-f{ffn}]`` for the width-depth study.
        init: ``random`` | ``pretrain`` | ``general_distillation`` | ``preload``.
        init_from: where ``pretrain`` / ``general_distillation`` / ``preload`` take weights from (Hub name or
            alias); ``None`` means the scheme's default for this student.
        knowledge: the knowledge types added to the soft labels (0, 1 or 2 names of ``kdgrid.core.knowledge``).
        strategy: the matching strategy (``First``, ``Last``, ``Dilatation``, ``First-1``, ``Last-1``, ...);
            ``None`` when ``knowledge`` is empty.
        beta: weight of every knowledge term (paper eq. 9), or ``"auto"``: calibrated on warm-up batches to
            about 1/10 of the soft loss (the weighted single-match study).
        soft_weight: weight of the soft-label loss; 0 trains on hard labels alone (a baseline).
        temperature: softmax temperature T of the soft labels.
        alpha: weight of the hard-label loss.
        lr, batch_size, max_length, epochs, warmup_ratio, weight_decay: the optimisation recipe (AdamW with
            linear warm-up and decay; ``max_length`` in tokens; ``warmup_ratio`` of all optimizer steps).
        seed: the student's seed: its initialisation, projections, dropout stream (and a ``Random`` strategy's
            pairs); also the data order unless the option ``data_seed`` sets that apart (`data_order_seed`).
        projection: ``linear`` | ``mlp``: student-to-teacher width projections where a knowledge needs one.
        relation_heads: relation heads of the q/k/v relations; ``None`` = the student's head count.
        max_train_samples: keep only this many training examples (quick runs); ``None`` = all.
        options: loss variants and other options by name (e.g. ``soft_t2``, ``data_seed``;
            `kdgrid.core.options`), stored sorted so the id does not depend on order. An option a trial does not
            set is not in its canonical JSON: declaring a new option leaves every existing id as it was.
    """

    task: str
    teacher: str
    student: str
    init: str = "pretrain"
    init_from: str | None = None
    knowledge: tuple[str, ...] = ()
    strategy: str | None = None
    beta: float | str = 1.0
    soft_weight: float = 1.0
    temperature: float = 1.0
    alpha: float = 0.1
    lr: float = 1e-4
    batch_size: int = 32
    max_length: int = 128
    epochs: int = 3
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    projection: str = "linear"
    relation_heads: int | None = None
    max_train_samples: int | None = None
    options: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        # Normalise containers and numbers so equal configurations compare (and hash) equal.
        object.__setattr__(self, "knowledge", tuple(self.knowledge))
        object.__setattr__(self, "options", canonical_options(self.options))
        for name in ("soft_weight", "temperature", "alpha", "lr", "warmup_ratio", "weight_decay"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if not isinstance(self.beta, str):
            object.__setattr__(self, "beta", float(self.beta))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> Trial:
        """Build a trial from a plain mapping; unknown keys raise, naming them and the allowed ones."""
        allowed = cls.field_names()
        unknown = sorted(set(config) - set(allowed))
        if unknown:
            raise KeyError(f"unknown trial key(s) {unknown}; allowed: {', '.join(allowed)}")
        return cls(**dict(config))

    def to_dict(self) -> dict[str, Any]:
        """All fields, defaults filled in, as JSON-ready values (tuples become lists)."""
        return json_fields(self)

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace, defaults filled in: the text the id hashes."""
        return versioned_json(TRIAL_ID_VERSION, self.to_dict())

    @functools.cached_property
    def trial_id(self) -> str:
        """16 hex digits of the SHA-256 of the canonical JSON (computed once per instance: planning a 30,000-trial
        sweep asks for every id many times)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]

    @functools.cached_property
    def _options_by_name(self) -> dict[str, Any]:
        # built once per instance: rules, planning and every training step read options by name
        return dict(self.options)

    def option(self, name: str, default: Any = None) -> Any:
        """The option ``name``'s value, ``default`` when the trial does not set it."""
        return self._options_by_name.get(name, default)

    @property
    def distillation(self) -> Distillation:
        """The trial's distillation terms as one spec (`Distillation`)."""
        return Distillation.of(self)

    @classmethod
    def with_distillation(cls, spec: Distillation, **fields: Any) -> Trial:
        """A trial of the terms ``spec`` and the other ``fields`` (task, teacher, student, ...)."""
        return cls(**spec.fields(), **fields)


# The fields a trial cannot do without (those without a default): sweep and trial files must set them.
REQUIRED_FIELDS: tuple[str, ...] = tuple(
    f.name
    for f in dataclasses.fields(Trial)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)


def data_order_seed(trial: Trial) -> int:
    """The seed of the trial's data order (shuffling and batching, `kdgrid.core.data.batching.train_order`): the
    option ``data_seed`` when set, else ``seed`` (how every trial drew its data order before ``data_seed``
    existed, so such trials keep their ids, groups and batches)."""
    value = trial.option(DATA_SEED)
    return trial.seed if value is None else int(value)


# Trials that agree on these fields see the same batches in the same order and can share one teacher pass
# (docs/design.md). Everything else (student, seed, knowledge, strategy, weights, lr, ...) may differ in a job.
# ``seed`` here is the trial's data-order seed (`data_order_seed`), not its student seed: the entry keeps its name
# so that a group's hash (`kdgrid.grid.plan.group_hash`, its checkpoint folder) is the one it always had.
GROUP_FIELDS: tuple[str, ...] = (
    "task",
    "teacher",
    "seed",
    "batch_size",
    "max_length",
    "epochs",
    "max_train_samples",
)
# How messages name what the trials of one job must agree on.
GROUP_DESCRIPTION = ", ".join(
    "the data-order seed (data_seed, else seed)" if name == "seed" else name for name in GROUP_FIELDS
)


def group_fields(trial: Trial) -> dict[str, Any]:
    """What trials sharing a teacher pass agree on, by name: the `GROUP_FIELDS` (``seed`` holding
    `data_order_seed`), then ``teacher_options`` when the trial sets an option that changes the teacher pass
    (`TEACHER_PASS_OPTIONS`: its label order, its gate; the masking options when the teacher's input is masked),
    and ``init_source`` for a trial that starts from another trial's student (`init_source_id`), so trials
    without them keep their groups."""
    fields = {name: getattr(trial, name) for name in GROUP_FIELDS}
    fields["seed"] = data_order_seed(trial)
    teacher_options = teacher_pass_key(trial)
    if teacher_options:
        fields["teacher_options"] = teacher_options
    source = init_source_id(trial.init_from)
    if source is not None:  # never in its source trial's job, which must finish first (`kdgrid.grid.stages`)
        fields["init_source"] = source
    return fields


def teacher_pass_key(trial: Any) -> tuple[tuple[str, Any], ...]:
    """The options of ``trial`` (anything with a Trial's ``options`` pairs) that change the teacher pass, as a
    hashable tuple in the trial's (sorted) option order; empty when it sets none. The masking options count
    only when the teacher's input is masked (``mask_input: teacher``); under MaskedKD's criterion the trial's id
    too (its teacher reads what its own student attends to)."""
    options = dict(trial.options)
    masked_teacher = options.get(MASK_INPUT) == "teacher"
    key = tuple(
        (name, tuple(value) if isinstance(value, list) else value)
        for name, value in trial.options
        if name in TEACHER_PASS_OPTIONS or (masked_teacher and name in MASK_OPTIONS)
    )
    if masked_teacher and options.get(MASK_BY) == MASKEDKD:  # masked by this trial's student: a pass of its own
        key += (("maskedkd_student", trial.trial_id),)
    return key


def group_key(trial: Trial) -> tuple[Any, ...]:
    """The key under which trials share a teacher pass (the values of `group_fields`)."""
    return tuple(group_fields(trial).values())
