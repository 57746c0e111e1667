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

from kdgrid.core.data import TaskSpec, get_task
from kdgrid.core.data.local import is_spec_path, local_data_problems
from kdgrid.core.matching import canonical_strategy, layer_pairs
from kdgrid.core.models import MAX_POSITIONS, StudentShape
from kdgrid.core.options import option_problems as options_problems
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.trial import Trial

INIT_SCHEMES = ("random", "pretrain", "general_distillation", "preload")  # see `kdgrid.core.init`
PROJECTIONS = ("linear", "mlp", "none")
NOTHING_TO_LEARN = "soft_weight = 0, alpha = 0 and no knowledge: nothing to learn from"
# The smallest temperature allowed: the soft labels are softmax(logits / T), and below this T the logits of a
# trained classifier (magnitudes up to about 20) give a one-hot target, or overflow float16 (max 65504) under AMP
# for logits / T above that: the loss turns infinite or NaN instead of teaching anything.
MIN_TEMPERATURE = 0.01
GENERAL_DISTILLATION_NEEDS_INIT_FROM = (
    "init 'general_distillation' needs init_from: the directory of a general-distillation checkpoint"
)


def unknown_choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    """The message for a named choice (init, projection) that is not one of ``allowed``."""
    return f"unknown {field} {value!r}; allowed: {', '.join(allowed)}"


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


@functools.cache
def _teacher_config(directory: str, modified_ns: int) -> tuple[int, str | None, int] | None:
    """(num_labels, problem_type, max_position_embeddings) of a local teacher directory's config.json, or None
    when it has none (`kdgrid.core.models.resolve_teacher` names that problem). ``modified_ns`` (the file's
    mtime) keys the cache, so a config changed since is read again."""
    # Imported here: transformers costs about 2 s, and only a local teacher needs it.
    from transformers import AutoConfig

    if not (Path(directory) / "config.json").is_file():
        return None
    try:
        config = AutoConfig.from_pretrained(directory)
    except (OSError, ValueError) as error:
        reason = " ".join(str(error).split())[:300]
        raise ConfigError(f"teacher {directory}: config.json cannot be read ({reason})") from None
    return config.num_labels, config.problem_type, getattr(config, "max_position_embeddings", MAX_POSITIONS)


def teacher_config_problems(trial: Trial) -> list[str]:
    """A local teacher directory's config.json against the trial: the task's label count and type, and
    max_length against its position embeddings (empty for a Hub teacher: only the network could tell)."""
    directory = Path(trial.teacher).expanduser()
    if not directory.is_dir():
        return []
    try:
        config = directory.resolve() / "config.json"
        facts = _teacher_config(str(config.parent), config.stat().st_mtime_ns if config.is_file() else -1)
        task = task_of(trial.task)
    except KdgridError as error:
        return [str(error)]
    if facts is None:
        return []
    num_labels, problem_type, positions = facts
    problems = []
    kind = "regression" if task.is_regression else f"{task.num_labels}-class classification"
    if num_labels != task.num_labels:
        problems.append(
            f"teacher {trial.teacher} has {num_labels} output(s), the task {task.name!r} ({kind}) needs "
            f"{task.num_labels}"
        )
    elif problem_type is not None and (problem_type == "regression") != task.is_regression:
        problems.append(
            f"teacher {trial.teacher} was trained for {problem_type}, the task {task.name!r} is {kind}"
        )
    if trial.max_length > positions:
        problems.append(
            f"max_length={trial.max_length} is above the {positions} position embeddings of teacher {trial.teacher}"
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
    """Every problem of the trial's own values: `number_problems`, `option_problems`, `local_file_problems`."""
    return number_problems(trial) + option_problems(trial) + local_file_problems(trial)


def strategy_problems(trial: Trial) -> list[str]:
    """A trial with knowledge must name a matching strategy."""
    if trial.knowledge and not trial.strategy:
        return [
            f"knowledge {list(trial.knowledge)} needs a `strategy`; allowed: {', '.join(PAPER_STRATEGIES)}, ..."
        ]
    return []


def matched_pairs(trial: Trial, student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """The (student layer, teacher layer) pairs of the trial's strategy (empty without knowledge).

    Raises:
        ConfigError: an unknown strategy, depths it is not defined for, or pairs outside the two models.
    """
    if not trial.knowledge or not trial.strategy:
        return []
    strategy = canonical_strategy(trial.strategy)
    try:
        pairs = [(int(s), int(t)) for s, t in layer_pairs(strategy, student_layers, teacher_layers)]
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
    if trial.init == "general_distillation" and not trial.init_from:
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
