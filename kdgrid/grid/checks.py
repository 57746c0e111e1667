"""Checks of a whole trial that no single value can fail: combinations that cannot run.

Static: they need no network, no data and no weights, so `kdgrid plan` can refuse a sweep on any machine.
What depends on the machine (a general-distillation checkpoint on disk, a fine-tuned offline teacher) is the
core's pre-flight (`kdgrid.core.train.plan_trial`), which `kdgrid run` calls before submitting.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from kdgrid.errors import KdgridError
from kdgrid.trial import Trial

# all-MiniLM-L6-v2's shape: the offline alias is resolved to a fine-tuned copy only at run time, but its shape is
# the base model's.
MINILM_SHAPE = (6, 384, 12, 1536)  # layers, width, heads, ffn


@functools.cache
def teacher_shape(teacher: str, task: str) -> tuple[int, int, int, int] | None:
    """(layers, width, heads, ffn) of a trial's teacher, or None where only the network could tell (an unlisted
    Hub name). Raises `KdgridError` for a task without that teacher, or a missing local directory."""
    from kdgrid.core.models import MINILM_ALIAS, TEACHERS, resolve_teacher

    if teacher == MINILM_ALIAS:
        return MINILM_SHAPE
    if teacher in TEACHERS or Path(teacher).expanduser().is_dir():
        shape = resolve_teacher(teacher, task).shape
        return (shape.layers, shape.width, shape.heads, shape.ffn)
    for table in TEACHERS.values():
        for spec in table.values():
            if spec.hub_name == teacher:
                s = spec.shape
                return (s.layers, s.width, s.heads, s.ffn)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", teacher):
        return None
    resolve_teacher(teacher, task)  # raises, naming the aliases
    return None


def combination_problems(trial: Trial) -> list[str]:
    """Everything that makes this trial impossible, as messages (empty when it can run)."""
    from kdgrid.core.matching import layer_pairs
    from kdgrid.core.models import student_shape

    problems: list[str] = []
    student = student_shape(trial.student)
    if trial.knowledge and trial.strategy is None:
        from kdgrid.paper import PAPER_STRATEGIES

        problems.append(
            f"knowledge {list(trial.knowledge)} needs a `strategy`; allowed: {', '.join(PAPER_STRATEGIES)}, ..."
        )
    if trial.soft_weight == 0 and trial.alpha == 0 and not trial.knowledge:
        problems.append("soft_weight = 0, alpha = 0 and no knowledge: nothing to learn from")
    if trial.init == "general_distillation" and not trial.init_from:
        problems.append(
            "init 'general_distillation' needs `init_from` (the general-distillation checkpoint's folder)"
        )
    try:
        teacher = teacher_shape(trial.teacher, trial.task)
    except KdgridError as error:
        problems.append(str(error))
        return problems
    if teacher is None:
        return problems
    t_layers, t_width, t_heads, t_ffn = teacher
    if trial.knowledge and trial.strategy is not None:
        try:
            pairs = layer_pairs(trial.strategy, student.layers, t_layers)
        except KdgridError as error:
            problems.append(str(error))
        else:
            outside = [p for p in pairs if not (0 <= p[0] <= student.layers and 0 <= p[1] <= t_layers)]
            if outside:
                problems.append(
                    f"strategy {trial.strategy!r} gives layer pairs {outside} outside a {student.layers}-layer "
                    f"student and a {t_layers}-layer teacher"
                )
    if trial.init == "preload" and (student.width, student.heads, student.ffn) != (t_width, t_heads, t_ffn):
        problems.append(
            f"init 'preload' copies teacher layers, so the student needs the teacher's width/heads/ffn "
            f"({t_width}/{t_heads}/{t_ffn}); student {trial.student} is {student.width}/{student.heads}/{student.ffn}"
            f" (use student 'w{t_width}-l{student.layers}-h{t_heads}-f{t_ffn}')"
        )
    elif trial.init == "preload" and student.layers > t_layers:
        problems.append(
            f"init 'preload': the student has {student.layers} layers, the teacher only {t_layers}"
        )
    heads = trial.relation_heads
    if heads is not None and (student.width % heads or t_width % heads):
        problems.append(
            f"relation_heads={heads} must divide the student's width {student.width} and the teacher's {t_width}"
        )
    return problems
