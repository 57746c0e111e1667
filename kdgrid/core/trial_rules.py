"""The rules a trial must satisfy, checked without weights or the network: one home for every check that
sweep expansion (`kdgrid.grid.expand`, so ``kdgrid plan``), ``kdgrid trial`` and the trainer's pre-flight
(`kdgrid.core.training.trial_setup`, so ``kdgrid run``) make, so each message is written once and ``plan`` refuses what
``run`` would.

- `number_problems`: every number in its range (finite; temperature at least `MIN_TEMPERATURE`; max_length within
  the models' position embeddings).
- `option_problems`: ``options`` against their declarations (`kdgrid.core.options`).
- `local_file_problems`: what the local files a trial names say (read once per file, no weights): a local task's
  data files (readable, a non-empty train and dev split, labels in range) and a local teacher's config.json
  (its label count and task type against the task's, its position embeddings against max_length).
- `combination_problems`: strategy, init, shapes and heads that cannot go together, given the two shapes, or
  with the teacher's found without loading anything (`teacher_shape`: its config.json where this machine has it,
  a local directory or the Hugging Face cache; else the shape kdgrid declares for a paper teacher).
- `trial_problems`: all of them; the one function every caller applies (sweep expansion and trial files with the
  shapes found here, the trainer's pre-flight `kdgrid.core.training.trial_setup.set_up_trial` with the resolved teacher's).

This is the static tier of the pre-flight (`kdgrid.preflight`). What needs weights (a local checkpoint's shape, a
fine-tuned offline teacher) is checked by the core only (`kdgrid.core.job.init.check_init`,
`kdgrid.core.model.shapes.resolve_teacher`).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import huggingface_hub.constants

from kdgrid.core.choices import PROJECTIONS
from kdgrid.core.data import TaskSpec, get_task
from kdgrid.core.data.local import is_spec_path, local_data_problems
from kdgrid.core.knowledge import distilled_knowledge, known_specs, projected_term_count
from kdgrid.core.matching import canonical_strategy, get_strategy, layer_pairs
from kdgrid.core.method_registry import TrialFacts, run_rules, trains_on_own_loss
from kdgrid.core.method_registry import learns_beside_the_student as method_learns
from kdgrid.core.model.shapes import (
    MAX_POSITIONS,
    TEACHERS,
    ModelConfig,
    StudentShape,
    cached_config,
    is_local_source,
    resolve_teacher,
    student_shape,
    teacher_head_problems,
)
from kdgrid.core.model.ssm.rules import bert_only, ssm_problems
from kdgrid.core.model.teacher_cache import MINILM_ALIAS
from kdgrid.core.options import MIN_TEMPERATURE
from kdgrid.core.options import option_problems as options_problems
from kdgrid.core.pretrained.recipe_names import INIT_RECIPE
from kdgrid.core.schedules import NO_TEMPERATURE_LEARNER, TEMPERATURE_LEARNER
from kdgrid.core.weighting_rules import weighting_problems
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.trial import SEED_LIMIT, Trial, assistant_id

NOTHING_TO_LEARN = "soft_weight = 0, alpha = 0 and no knowledge: nothing to learn from"
# all-MiniLM-L6-v2's shape: the offline alias is resolved to a fine-tuned copy only at run time, but its shape is
# the base model's.
MINILM_SHAPE = StudentShape(layers=6, width=384, heads=12, ffn=1536)
HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
"""A Hub model id, ``owner/model``."""
PAPER_TEACHER_IDS = frozenset(spec.hub_name for table in TEACHERS.values() for spec in table.values())
GENERAL_DISTILLATION_NEEDS_INIT_FROM = (
    "init 'general_distillation' needs init_from (the directory of a general-distillation checkpoint) or "
    "init_recipe (a pre-training recipe whose checkpoint kdgrid makes)"
)


def number_problems(trial: Trial) -> list[str]:
    """The trial's numbers and choices that no run could use, as ``"{field}={value!r} is invalid; allowed:
    ..."`` messages (empty when all are fine); last, the loss with nothing to learn from."""
    problems: list[str] = []

    def need(ok: bool, key: str, allowed: str) -> None:
        if not ok:
            problems.append(f"{key}={getattr(trial, key)!r} is invalid; allowed: {allowed}")

    def finite(value: float) -> bool:
        return math.isfinite(value)

    need(trial.lr > 0 and finite(trial.lr), "lr", "a positive number")
    need(
        trial.temperature >= MIN_TEMPERATURE and finite(trial.temperature),
        "temperature",
        f"a finite number >= {MIN_TEMPERATURE:g}",
    )
    need(trial.alpha >= 0 and finite(trial.alpha), "alpha", "a finite number >= 0")
    need(trial.soft_weight >= 0 and finite(trial.soft_weight), "soft_weight", "a finite number >= 0")
    need(0 <= trial.seed < SEED_LIMIT, "seed", "an integer in [0, 2^32)")
    need(trial.batch_size >= 1, "batch_size", "an integer >= 1")
    need(
        8 <= trial.max_length <= MAX_POSITIONS,
        "max_length",
        f"an integer in 8..{MAX_POSITIONS} (the position embeddings of a BERT student)",
    )
    need(trial.epochs >= 1, "epochs", "an integer >= 1")
    need(0 <= trial.warmup_ratio < 1, "warmup_ratio", "a number in [0, 1)")
    need(trial.weight_decay >= 0 and finite(trial.weight_decay), "weight_decay", "a finite number >= 0")
    need(trial.projection in PROJECTIONS, "projection", ", ".join(PROJECTIONS))
    need(trial.max_train_samples is None or trial.max_train_samples >= 1, "max_train_samples", "None or >= 1")
    if isinstance(trial.beta, str):
        need(trial.beta == "auto", "beta", "a number >= 0 or 'auto'")
    else:
        need(trial.beta >= 0, "beta", "a number >= 0 or 'auto'")  # inf is allowed: it diverges, visibly
    if trial.soft_weight == 0 and trial.alpha == 0 and not trial.knowledge and not trains_on_own_loss(trial):
        problems.append(NOTHING_TO_LEARN)  # a method with a loss of its own (MethodSpec.own_loss) has one
    return problems


def option_problems(trial: Trial) -> list[str]:
    """The trial's ``options`` against their declarations (`kdgrid.core.options`): unknown keys, wrong types;
    then the learned methods' combinations (`learned_method_problems`) once every option is well-formed."""
    problems = options_problems(trial.options, trial.knowledge)
    return problems or learned_method_problems(trial)


def learned_method_problems(trial: Trial) -> list[str]:
    """What a learnable strategy's mapping cannot combine with (`mapping_problems`), then every registered
    method's rules at the ``options`` stage (`kdgrid.core.method_registry`: CTKD's range and schedule, the learned
    parameters' learning rate, LKD's terms, AdaKD's function, ...), then the example weights and schedules that
    would do nothing (`kdgrid.core.weighting_rules.weighting_problems`)."""
    knowledge = [(spec.name, frozenset(spec.needs), spec.placement) for spec in known_specs(trial.knowledge)]
    facts = TrialFacts(trial, learns_beside_the_student=learns_beside_the_student(trial))
    return mapping_problems(trial.strategy, knowledge) + run_rules("options", facts) + weighting_problems(trial)


def learns_beside_the_student(trial: Trial) -> bool:
    """Whether the trial has a learned part beside the student: a learnable strategy (its mapping), a
    temperature learner, or a method that says so (LKD's learned loss weights)."""
    try:
        learnable = trial.strategy is not None and get_strategy(trial.strategy).learnable
    except KdgridError:  # an unknown strategy: refused by its own check
        learnable = False
    learned_temperature = trial.option(TEMPERATURE_LEARNER, NO_TEMPERATURE_LEARNER) != NO_TEMPERATURE_LEARNER
    return learnable or learned_temperature or method_learns(trial)


def mapping_problems(strategy: str | None, knowledge: list[tuple[str, frozenset[str], str]]) -> list[str]:
    """What makes a learnable strategy's combination impossible: a knowledge on pairs that reads a feature its
    mapping cannot build (``knowledge``: (name, needs, placement) of each of the trial's;
    `kdgrid.core.matching.MatchingStrategy.mapping_features`). An unknown strategy is left to the strategy check."""
    problems: list[str] = []
    try:
        spec = get_strategy(strategy) if strategy is not None else None
    except KdgridError:  # an unknown name: refused, with the allowed ones, by the strategy check
        spec = None
    if spec is None or spec.mapping_features is None:
        return problems
    for name, needs, placement in knowledge:
        unsupported = sorted(needs - spec.mapping_features)
        if placement == "pairs" and unsupported:
            problems.append(
                f"strategy {spec.name!r} builds targets for {', '.join(sorted(spec.mapping_features))} only; "
                f"knowledge {name!r} reads {', '.join(unsupported)}"
            )
    return problems


def teacher_config_source(teacher: str, task: str) -> str | None:
    """Where a trial's teacher config is read from: a paper teacher's Hub name for the task, a Hub name or a
    directory as written; None for the offline alias (fine-tuned by kdgrid for the task) and for a paper teacher
    alias the task does not have (`kdgrid.core.model.shapes.resolve_teacher` names that problem)."""
    if teacher == MINILM_ALIAS or assistant_id(teacher) is not None:  # an assistant: `kdgrid.grid.stages` checks it
        return None
    if teacher in TEACHERS:
        spec = TEACHERS[teacher].get(task)
        return None if spec is None else spec.hub_name
    return teacher


@functools.lru_cache(maxsize=1024)
def _config_as_of(source: str, hub_cache: str, modified_ns: int) -> ModelConfig | None:
    """`cached_config`, read once per version: ``hub_cache`` and ``modified_ns`` (a local config's mtime) key
    the memo, so a config changed since, or another Hugging Face cache, is read again."""
    return cached_config(source)


def teacher_config_problems(trial: Trial) -> list[str]:
    """The teacher's config.json against the trial, where this machine has it (a local directory, the Hugging
    Face cache; nothing is downloaded): its head against the task's label count and type
    (`kdgrid.core.model.shapes.teacher_head_problems`), and max_length against its position embeddings."""
    source = teacher_config_source(trial.teacher, trial.task)
    if source is None:
        return []
    try:
        local = Path(source).expanduser() / "config.json"
        stamp = local.stat().st_mtime_ns if is_local_source(source) and local.is_file() else 0
        config = _config_as_of(source, str(huggingface_hub.constants.HF_HUB_CACHE), stamp)
        task = task_of(trial.task)
    except KdgridError as error:
        return [str(error)]
    if config is None:
        return []
    problems = teacher_head_problems(source, task.name, config, task.num_labels)
    if trial.max_length > config.max_positions:
        problems.append(
            f"max_length={trial.max_length} is above the {config.max_positions} position embeddings of teacher "
            f"{trial.teacher}"
        )
    return problems


@functools.lru_cache(maxsize=256)
def _task_as_of(name: str, modified_ns: int) -> TaskSpec:
    return get_task(name)


def task_of(name: str) -> TaskSpec:
    """`get_task`, a local spec file read once per version of it (sweep expansion asks once per trial)."""
    path = Path(name).expanduser()
    stamp = path.stat().st_mtime_ns if is_spec_path(name) and path.is_file() else 0
    return _task_as_of(name, stamp)


def local_file_problems(trial: Trial) -> list[str]:
    """What the local files the trial names say against it: a local task's data files (read once per task:
    readable, a non-empty train and dev split, labels in range) and a local teacher's config.json."""
    try:
        task = task_of(trial.task)
    except KdgridError as error:
        return [str(error)]
    return local_data_problems(task) + teacher_config_problems(trial)


def value_problems(trial: Trial) -> list[str]:
    """Every problem of the trial's own values: `number_problems`, `option_problems`, `local_file_problems`,
    then the methods' rules that need the task's kind (`method_value_problems`)."""
    return (
        number_problems(trial)
        + option_problems(trial)
        + local_file_problems(trial)
        + method_value_problems(trial)
    )


def method_value_problems(trial: Trial) -> list[str]:
    """Every registered method's rules at the ``values`` stage (ReAugKD's options together), knowing the task's
    kind."""
    try:
        regression: bool | None = task_of(trial.task).is_regression
    except KdgridError:
        regression = None  # an unknown task is reported by local_file_problems
    return run_rules("values", TrialFacts(trial, regression=regression))


def method_combination_problems(trial: Trial, facts: TrialFacts | None = None) -> list[str]:
    """Every registered method's rules at the ``combination`` stage (``facts``: the shapes and pairs where known;
    None: the trial alone)."""
    return run_rules("combination", facts or TrialFacts(trial))


def method_term_problems(trial: Trial, projected_terms: int) -> list[str]:
    """Every registered method's rules at the ``terms`` stage: what the trial's loss terms rule out, once the
    trainer knows how many are projected (a spectral penalty with nothing to regularise)."""
    return run_rules("terms", TrialFacts(trial, projected_terms=projected_terms))


def strategy_problems(trial: Trial) -> list[str]:
    """A trial with knowledge must name a matching strategy."""
    if trial.knowledge and not trial.strategy:
        return [
            f"knowledge {list(trial.knowledge)} needs a `strategy`; allowed: {', '.join(PAPER_STRATEGIES)}, ..."
        ]
    return []


def matched_pairs(trial: Trial, student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """The (student layer, teacher layer) pairs of the trial's strategy (empty without knowledge); a seeded
    strategy (``Random``) draws them from the trial's seed.

    Raises:
        ConfigError: an unknown strategy, depths it is not defined for, or pairs outside the two models.
    """
    if not trial.knowledge or not trial.strategy:
        return []
    strategy = canonical_strategy(trial.strategy)
    try:
        pairs = [
            (int(s), int(t))
            for s, t in layer_pairs(strategy, student_layers, teacher_layers, seed=trial.seed)
        ]
    except (ValueError, IndexError) as error:
        raise ConfigError(f"strategy {strategy!r}: {error}") from None
    outside = [p for p in pairs if not (0 <= p[0] <= student_layers and 0 <= p[1] <= teacher_layers)]
    if outside:
        raise ConfigError(
            f"strategy {strategy!r} gives layer pairs {outside} outside a {student_layers}-layer student and a "
            f"{teacher_layers}-layer teacher"
        )
    return pairs


def preload_problems(student: StudentShape, source: StudentShape, source_name: str) -> list[str]:
    """Why ``preload`` cannot copy the layers of a model of shape ``source`` (named ``source_name``) into this
    student: it needs the source's width, heads and ffn, and no more layers than the source has."""
    if (student.width, student.heads, student.ffn) != (source.width, source.heads, source.ffn):
        return [
            f"init 'preload' copies teacher layers, so the student needs the teacher's width, heads and ffn: "
            f"{source_name} is {source.name}, the student is {student.name} "
            f"(use student 'w{source.width}-l{student.layers}-h{source.heads}-f{source.ffn}')"
        ]
    if student.layers > source.layers:
        return [
            f"init 'preload': the student has {student.layers} layers, the teacher {source_name} only "
            f"{source.layers}"
        ]
    return []


def relation_heads_problems(trial: Trial, student: StudentShape, teacher: StudentShape) -> list[str]:
    """The relation heads must divide both widths."""
    heads = trial.relation_heads
    if heads is not None and (heads < 1 or student.width % heads or teacher.width % heads):
        return [
            f"relation_heads={heads} must divide the student's width {student.width} and the teacher's "
            f"{teacher.width}"
        ]
    return []


def _hub_cache() -> str:
    """Where this process reads the Hugging Face cache now: part of the memo keys below, so an answer read from
    one cache is never given for another (a process that points ``HF_HUB_CACHE`` elsewhere reads again)."""
    return str(huggingface_hub.constants.HF_HUB_CACHE)


def teacher_shape(teacher: str, task: str) -> StudentShape | None:
    """The shape of a trial's teacher found without loading anything (memoised per Hugging Face cache location;
    `_teacher_shape`)."""
    return _teacher_shape(teacher, task, _hub_cache())


@functools.cache
def _teacher_shape(teacher: str, task: str, hub_cache: str) -> StudentShape | None:
    """The shape of a trial's teacher, or None where only the network could tell (an unlisted Hub name not in
    the local Hugging Face cache). A paper teacher's shape is its cached config's where the Hub cache has it,
    else the shape kdgrid declares (`kdgrid.core.model.shapes.TEACHERS`; the job checks it against the real config
    before loading). Raises `KdgridError` for a task without that teacher, or a missing local directory."""
    if assistant_id(teacher) is not None:  # a teacher assistant: the shape its sweep planned, or its saved one
        return resolve_teacher(teacher, task).shape
    if teacher == MINILM_ALIAS:
        return MINILM_SHAPE
    if teacher in TEACHERS or Path(teacher).expanduser().is_dir() or teacher in PAPER_TEACHER_IDS:
        return resolve_teacher(teacher, task).shape
    if HUB_ID.fullmatch(teacher):
        cached = cached_config(teacher)
        return None if cached is None else cached.shape
    resolve_teacher(teacher, task)  # raises, naming the aliases
    return None


Shapes = tuple[StudentShape, StudentShape | None]
"""A trial's student shape and its teacher's (``None`` where only the network could tell)."""


def _combination_rules(trial: Trial, student: StudentShape, teacher: StudentShape | None) -> list[str]:
    """The combination's own rules, then every registered method's at the ``combination`` stage (with the layer
    pairs where the teacher's shape tells them)."""
    problems = strategy_problems(trial) + ssm_problems(trial)  # the student family's own (an SSM's)
    problems += bert_only(trial, INIT_RECIPE)  # a pre-training recipe builds a BERT
    pairs: list[tuple[int, int]] | None = None
    if teacher is not None and trial.strategy is not None:
        try:
            pairs = matched_pairs(trial, student.layers, teacher.layers)
        except KdgridError as error:
            problems.append(str(error))
    facts = TrialFacts(trial, student=student, teacher=teacher, pairs=pairs)
    methods = method_combination_problems(trial, facts)
    if trial.init == "general_distillation" and not trial.init_from and trial.option(INIT_RECIPE) is None:
        methods.append(GENERAL_DISTILLATION_NEEDS_INIT_FROM)
    if teacher is None:
        return problems + methods
    problems += methods + static_term_problems(trial, student, teacher, pairs)
    if trial.init == "preload" and not trial.init_from:
        problems += preload_problems(student, teacher, trial.teacher)
    problems += relation_heads_problems(trial, student, teacher)
    return problems


def static_term_problems(
    trial: Trial, student: StudentShape, teacher: StudentShape, pairs: list[tuple[int, int]] | None
) -> list[str]:
    """The methods' ``terms`` rules (`method_term_problems`) wherever the shapes tell how many loss terms are
    projected (`projected_term_count`), so that ``plan`` refuses what the trainer would (a projection kind no
    term uses); nothing where the strategy's pairs are unknown or a knowledge name is (reported elsewhere)."""
    if pairs is None and distilled_knowledge(trial.knowledge):
        return []
    try:
        projected = projected_term_count(trial.knowledge, pairs or [], student.width, teacher.width)
    except KdgridError:
        return []
    return method_term_problems(trial, projected)


def combination_problems(trial: Trial, shapes: Shapes | None = None) -> list[str]:
    """What makes this combination of strategy, init, shapes and heads impossible (empty when it can run).

    ``shapes``: the student's shape and the teacher's where the caller has them (the trainer's pre-flight: its
    resolved teacher's); None: found here without loading anything (`student_shape`, `teacher_shape`), a teacher
    that cannot be resolved reported as one more problem. A teacher shape of None (only the network could tell)
    skips the checks that need it. It reads neither the numbers (`number_problems`) nor anything but
    config.json files."""
    if shapes is not None:
        return _combination_rules(trial, *shapes)
    student = student_shape(trial.student)
    try:
        teacher = teacher_shape(trial.teacher, trial.task)
    except KdgridError as error:
        return [*_combination_rules(trial, student, None), str(error)]
    return _combination_rules(trial, student, teacher)


def trial_problems(trial: Trial, shapes: Shapes | None = None) -> list[str]:
    """Every problem of a trial found without weights: `value_problems`, then `combination_problems` (``shapes``
    as there)."""
    return value_problems(trial) + combination_problems(trial, shapes)
