"""The rules a trial must satisfy, checked without data, weights or the network: one home for every check that
sweep expansion (`kdgrid.grid.checks`), ``kdgrid trial`` and the trainer's pre-flight (`kdgrid.core.planning`)
make, so each message is written once.

What needs the machine (a local checkpoint's shape, a fine-tuned offline teacher) is checked by the core only
(`kdgrid.core.init.check_init`, `kdgrid.core.models.resolve_teacher`).
"""

from __future__ import annotations

import math

from kdgrid.core.matching import canonical_strategy, layer_pairs
from kdgrid.core.models import StudentShape
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.trial import Trial

INIT_SCHEMES = ("random", "pretrain", "general_distillation", "preload")  # see `kdgrid.core.init`
PROJECTIONS = ("linear", "mlp", "none")
NOTHING_TO_LEARN = "soft_weight = 0, alpha = 0 and no knowledge: nothing to learn from"
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

    need(trial.lr > 0 and math.isfinite(trial.lr), "lr", "a positive number")
    need(trial.temperature > 0, "temperature", "a positive number")
    need(trial.alpha >= 0, "alpha", "a number >= 0")
    need(trial.soft_weight >= 0, "soft_weight", "a number >= 0")
    need(trial.batch_size >= 1, "batch_size", "an integer >= 1")
    need(trial.max_length >= 8, "max_length", "an integer >= 8")
    need(trial.epochs >= 1, "epochs", "an integer >= 1")
    need(0 <= trial.warmup_ratio < 1, "warmup_ratio", "a number in [0, 1)")
    need(trial.weight_decay >= 0, "weight_decay", "a number >= 0")
    need(trial.projection in PROJECTIONS, "projection", ", ".join(PROJECTIONS))
    need(trial.max_train_samples is None or trial.max_train_samples >= 1, "max_train_samples", "None or >= 1")
    if isinstance(trial.beta, str):
        need(trial.beta == "auto", "beta", "a number >= 0 or 'auto'")
    else:
        need(trial.beta >= 0, "beta", "a number >= 0 or 'auto'")  # inf is allowed: it diverges, visibly
    if trial.soft_weight == 0 and trial.alpha == 0 and not trial.knowledge:
        problems.append(NOTHING_TO_LEARN)
    return problems


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
    """Every static problem of a trial: `number_problems`, then `combination_problems`."""
    return number_problems(trial) + combination_problems(trial, student, teacher)
