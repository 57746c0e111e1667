"""Checks of a whole trial that no single value can fail: combinations that cannot run.

Static: they need no network, no data and no weights, so `kdgrid plan` can refuse a sweep on any machine. The
rules and their messages are the core's (`kdgrid.core.trial_rules`, which the trainer's pre-flight applies too);
this module only finds the teacher's shape without loading anything (its config.json where this machine has it,
a local directory or the Hugging Face cache; else the shape kdgrid declares for a paper teacher). What depends on the machine (a
general-distillation checkpoint on disk, a fine-tuned offline teacher) is the core's pre-flight
(`kdgrid.core.planning.plan_trial`), which `kdgrid run` calls before submitting.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

import huggingface_hub.constants

from kdgrid.core.pretrained.needed import missing_message, needed_checkpoints
from kdgrid.core.shapes import (
    TEACHERS,
    StudentShape,
    cached_config,
    is_local_source,
    resolve_teacher,
    student_shape,
)
from kdgrid.core.teacher_cache import MINILM_ALIAS
from kdgrid.core.trial_rules import combination_problems as combination_rules
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.trial import Trial, assistant_id

# all-MiniLM-L6-v2's shape: the offline alias is resolved to a fine-tuned copy only at run time, but its shape is
# the base model's.
MINILM_SHAPE = StudentShape(layers=6, width=384, heads=12, ffn=1536)
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
PAPER_TEACHER_IDS = frozenset(spec.hub_name for table in TEACHERS.values() for spec in table.values())


def _hub_cache() -> str:
    """Where this process reads the Hugging Face cache now: part of the memo keys below, so an answer read from
    one cache is never given for another (a process that points ``HF_HUB_CACHE`` elsewhere reads again)."""
    return str(huggingface_hub.constants.HF_HUB_CACHE)


def teacher_shape(teacher: str, task: str) -> StudentShape | None:
    """The shape of a trial's teacher (memoised per Hugging Face cache location; `_teacher_shape`)."""
    return _teacher_shape(teacher, task, _hub_cache())


@functools.cache
def _teacher_shape(teacher: str, task: str, hub_cache: str) -> StudentShape | None:
    """The shape of a trial's teacher, or None where only the network could tell (an unlisted Hub name not in
    the local Hugging Face cache). A paper teacher's shape is its cached config's where the Hub cache has it,
    else the shape kdgrid declares (`kdgrid.core.models.TEACHERS`; the job checks it against the real config
    before loading). Raises `KdgridError` for a task without that teacher, or a missing local directory."""
    if assistant_id(teacher) is not None:  # a teacher assistant: the shape its sweep planned, or its saved one
        return resolve_teacher(teacher, task).shape
    if teacher == MINILM_ALIAS:
        return MINILM_SHAPE
    if teacher in TEACHERS or Path(teacher).expanduser().is_dir() or teacher in PAPER_TEACHER_IDS:
        return resolve_teacher(teacher, task).shape
    if _HUB_ID.fullmatch(teacher):
        cached = cached_config(teacher)
        return None if cached is None else cached.shape
    resolve_teacher(teacher, task)  # raises, naming the aliases
    return None


def combination_problems(trial: Trial) -> list[str]:
    """What makes this trial's combination impossible, as messages (empty when it can run); the numbers are
    `kdgrid.core.trial_rules.number_problems`."""
    student = student_shape(trial.student)
    try:
        teacher = teacher_shape(trial.teacher, trial.task)
    except KdgridError as error:
        return [*combination_rules(trial, student, None), str(error)]
    return combination_rules(trial, student, teacher)


def local_path_like(value: str) -> bool:
    """``value`` can only be a path on this machine, not a Hub id (``owner/model``): it starts with ``.``,
    ``/`` or ``~``, or has more or fewer than one ``/``."""
    return value.startswith((".", "/", "~")) or not _HUB_ID.fullmatch(value)


def missing_init_checkpoints(trials: Iterable[Trial]) -> list[str]:
    """The ``init_from`` checkpoints the trials need that are not directories here, each once, in order:
    every ``general_distillation`` source, and a ``pretrain`` / ``preload`` source that can only be a path
    (`local_path_like`). Relative paths are relative to the working directory."""
    missing: dict[str, None] = {}
    for trial in trials:
        source = trial.init_from
        if not source or trial.init == "random" or source in missing:
            continue
        if (trial.init == "general_distillation" or local_path_like(source)) and not is_local_source(source):
            missing[source] = None
    return list(missing)


def check_init_checkpoints(trials: Iterable[Trial], *, recipes: bool = True) -> None:
    """Refuse, in one `ConfigError` naming every one, trials whose ``init_from`` checkpoint is missing here;
    then (with ``recipes``) trials whose ``init_recipe`` checkpoint is not made yet, each with the
    ``kdgrid pretrain`` command that makes it (`kdgrid.core.pretrained.needed`). ``recipes=False``: `kdgrid plan`, which
    lists those instead (`kdgrid.core.pretrained.needed.listing`)."""
    trials = list(trials)
    missing = missing_init_checkpoints(trials)
    if missing:
        raise ConfigError(
            f"{len(missing)} init_from checkpoint(s) missing (relative paths are relative to the working "
            f"directory {Path.cwd()}): " + ", ".join(missing)
        )
    if recipes:
        not_made = [needed for needed in needed_checkpoints(trials) if not needed.present]
        if not_made:
            raise ConfigError(missing_message(not_made))
