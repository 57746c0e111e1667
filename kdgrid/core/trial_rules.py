"""The rules a trial must satisfy, checked without weights or the network: one home for every check that
sweep expansion (`kdgrid.grid.checks`, so ``kdgrid plan``), ``kdgrid trial`` and the trainer's pre-flight
(`kdgrid.core.planning`, so ``kdgrid run``) make, so each message is written once and ``plan`` refuses what
``run`` would.

- `number_problems`: every number in its range (finite; temperature at least `MIN_TEMPERATURE`; max_length within
  the models' position embeddings).
- `option_problems`: ``options`` against their declarations (`kdgrid.core.options`).
- `local_file_problems`: what the local files a trial names say (read once per file, no weights): a local task's
  data files (readable, a non-empty train and dev split, labels in range) and a local teacher's config.json
  (its label count and task type against the task's, its position embeddings against max_length).
- `combination_problems`: strategy, init, shapes and heads that cannot go together.

What needs weights (a local checkpoint's shape, a fine-tuned offline teacher) is checked by the core only
(`kdgrid.core.init.check_init`, `kdgrid.core.models.resolve_teacher`).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import huggingface_hub.constants

from kdgrid.core.choices import PROJECTIONS
from kdgrid.core.data import TaskSpec, get_task
from kdgrid.core.data.local import is_spec_path, local_data_problems
from kdgrid.core.matching import canonical_strategy, layer_pairs
from kdgrid.core.options import option_problems as options_problems
from kdgrid.core.pretrained.recipe_names import INIT_RECIPE
from kdgrid.core.reaugkd_options import reaugkd_problems
from kdgrid.core.shapes import (
    MAX_POSITIONS,
    TEACHERS,
    ModelConfig,
    StudentShape,
    cached_config,
    is_local_source,
    teacher_head_problems,
)
from kdgrid.core.teacher_cache import MINILM_ALIAS
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.trial import SEED_LIMIT, Trial

NOTHING_TO_LEARN = "soft_weight = 0, alpha = 0 and no knowledge: nothing to learn from"
# The smallest temperature allowed: the soft labels are softmax(logits / T), and below this T the logits of a
# trained classifier (magnitudes up to about 20) give a one-hot target, or overflow float16 (max 65504) under AMP
# for logits / T above that: the loss turns infinite or NaN instead of teaching anything.
MIN_TEMPERATURE = 0.01
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
    if trial.soft_weight == 0 and trial.alpha == 0 and not trial.knowledge:
        problems.append(NOTHING_TO_LEARN)
    return problems


def option_problems(trial: Trial) -> list[str]:
    """The trial's ``options`` against their declarations (`kdgrid.core.options`): unknown keys, wrong types."""
    return options_problems(trial.options, trial.knowledge)


def teacher_config_source(teacher: str, task: str) -> str | None:
    """Where a trial's teacher config is read from: a paper teacher's Hub name for the task, a Hub name or a
    directory as written; None for the offline alias (fine-tuned by kdgrid for the task) and for a paper teacher
    alias the task does not have (`kdgrid.core.models.resolve_teacher` names that problem)."""
    if teacher == MINILM_ALIAS:
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
    (`kdgrid.core.models.teacher_head_problems`), and max_length against its position embeddings."""
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
    `reaugkd_option_problems`."""
    return (
        number_problems(trial)
        + option_problems(trial)
        + local_file_problems(trial)
        + reaugkd_option_problems(trial)
    )


def reaugkd_option_problems(trial: Trial) -> list[str]:
    """ReAugKD's options together (`kdgrid.core.reaugkd_options.reaugkd_problems`), knowing the task's kind."""
    try:
        regression: bool | None = task_of(trial.task).is_regression
    except KdgridError:
        regression = None  # an unknown task is reported by local_file_problems
    return reaugkd_problems(trial, regression)


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


def combination_problems(trial: Trial, student: StudentShape, teacher: StudentShape | None) -> list[str]:
    """What makes this combination of strategy, init, shapes and heads impossible (empty when it can run),
    given the student's shape and the teacher's (``None`` where only the network could tell: the checks that
    need it are skipped). It reads neither the numbers (`number_problems`) nor anything on disk."""
    problems = strategy_problems(trial)
    if trial.init == "general_distillation" and not trial.init_from and trial.option(INIT_RECIPE) is None:
        problems.append(GENERAL_DISTILLATION_NEEDS_INIT_FROM)
    if teacher is None:
        return problems
    if trial.strategy is not None:
        try:
            matched_pairs(trial, student.layers, teacher.layers)
        except KdgridError as error:
            problems.append(str(error))
    if trial.init == "preload" and not trial.init_from:
        problems += preload_problems(student, teacher, trial.teacher)
    problems += relation_heads_problems(trial, student, teacher)
    return problems


def trial_problems(trial: Trial, student: StudentShape, teacher: StudentShape | None) -> list[str]:
    """Every problem of a trial found without weights: `value_problems`, then `combination_problems`."""
    return value_problems(trial) + combination_problems(trial, student, teacher)
