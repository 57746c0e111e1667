"""Checks of a whole trial that no single value can fail: combinations that cannot run.

Static: they need no network, no data and no weights, so `kdgrid plan` can refuse a sweep on any machine. The
rules and their messages are the core's (`kdgrid.core.trial_rules`, which the trainer's pre-flight applies too);
this module only finds the teacher's shape without loading anything. What depends on the machine (a
general-distillation checkpoint on disk, a fine-tuned offline teacher) is the core's pre-flight
(`kdgrid.core.planning.plan_trial`), which `kdgrid run` calls before submitting.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from kdgrid.core.models import TEACHERS, StudentShape, resolve_teacher, student_shape
from kdgrid.core.teacher_cache import MINILM_ALIAS
from kdgrid.core.trial_rules import combination_problems as combination_rules
from kdgrid.errors import KdgridError
from kdgrid.trial import Trial

# all-MiniLM-L6-v2's shape: the offline alias is resolved to a fine-tuned copy only at run time, but its shape is
# the base model's.
MINILM_SHAPE = StudentShape(layers=6, width=384, heads=12, ffn=1536)


@functools.cache
def teacher_shape(teacher: str, task: str) -> StudentShape | None:
    """The shape of a trial's teacher, or None where only the network could tell (an unlisted Hub name).
    Raises `KdgridError` for a task without that teacher, or a missing local directory."""
    if teacher == MINILM_ALIAS:
        return MINILM_SHAPE
    if teacher in TEACHERS or Path(teacher).expanduser().is_dir():
        return resolve_teacher(teacher, task).shape
    for table in TEACHERS.values():
        for spec in table.values():
            if spec.hub_name == teacher:
                return spec.shape
    if re.fullmatch(r"[\w.-]+/[\w.-]+", teacher):
        return None
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
