"""The trial options about the teacher: its declared class order and whether the teacher gate applies.

Both are trial options (``options:`` in a sweep or trial file), so they are part of the trial id only when a
trial sets them: trials without them keep the ids they always had. Both change what a job's shared teacher pass
is, so trials that differ in one of them never share a job (`kdgrid.trial.TEACHER_PASS_OPTIONS`, read by
`kdgrid.trial.group_key`).

- ``teacher_label_order``: a list, one entry per teacher output, naming the task's label that output means:
  ``[contradiction, entailment, neutral]`` says the teacher's output 0 is contradiction, 1 entailment and 2
  neutral. Entries are the task's label names (`kdgrid.core.teacher.label_order.task_label_names`, case-insensitive) or
  label ids (integers). The teacher's logits are re-ordered to the task's order before any loss or score sees
  them (`kdgrid.core.teacher.label_order`).
- ``teacher_gate``: ``true`` (the default) or ``false``. ``false`` says "this teacher is not meant to be
  accurate" (a random teacher that only exercises the machinery, a study of bad teachers): the gate
  (`kdgrid.core.teacher.gate`) is skipped and every row records that it was.

This module needs neither torch nor transformers: sweep expansion and `kdgrid.trial` import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from kdgrid.trial import TEACHER_GATE, TEACHER_LABEL_ORDER

# The options of a trial whose teacher is not meant to be accurate (a random teacher that only exercises the
# machinery: tests, benchmarks): the gate is skipped, and every row records that it was.
NOT_MEANT_TO_BE_ACCURATE: dict[str, bool] = {TEACHER_GATE: False}


class HasOptions(Protocol):
    """What these helpers read of a trial (`kdgrid.trial.Trial` has it)."""

    options: tuple[tuple[str, Any], ...]


def _option(trial: HasOptions, name: str) -> Any:
    return dict(trial.options).get(name)


def declared_label_order(trial: HasOptions) -> tuple[str | int, ...] | None:
    """The trial's ``teacher_label_order`` as a tuple (label names lower-cased), or None when it declares none.
    The value's type is checked by `teacher_option_problems`; names are checked against the task when the job
    starts (`kdgrid.core.teacher.label_order.resolve_label_order`)."""
    value = _option(trial, TEACHER_LABEL_ORDER)
    if value is None:
        return None
    return tuple(v.strip().lower() if isinstance(v, str) else v for v in value)


def gate_enabled(trial: HasOptions) -> bool:
    """False only when the trial says ``teacher_gate: false``."""
    return _option(trial, TEACHER_GATE) is not False


def label_order_problem(order: Any) -> str | None:
    """Why ``order`` is not a valid ``teacher_label_order`` (None when it is): a list of at least two label
    names or ids, none named twice."""
    entries_ok = isinstance(order, Sequence) and not isinstance(order, str) and len(order) >= 2
    if not entries_ok or not all(
        (isinstance(v, str) and v.strip()) or (isinstance(v, int) and not isinstance(v, bool)) for v in order
    ):
        return (
            f"option {TEACHER_LABEL_ORDER}={order!r} is invalid; allowed: a list of at least two label names "
            "or ids, one per teacher output, e.g. [contradiction, entailment, neutral]"
        )
    if len({v.strip().lower() if isinstance(v, str) else v for v in order}) != len(order):
        return f"option {TEACHER_LABEL_ORDER}={list(order)!r} names a label twice"
    return None


def gate_problem(gate: Any) -> str | None:
    """Why ``gate`` is not a valid ``teacher_gate`` (None when it is)."""
    return (
        None if isinstance(gate, bool) else f"option {TEACHER_GATE}={gate!r} is invalid; allowed: true, false"
    )


def teacher_option_problems(trial: HasOptions) -> list[str]:
    """What is wrong with the trial's teacher options, without the task or the teacher (empty when fine)."""
    checks = ((TEACHER_LABEL_ORDER, label_order_problem), (TEACHER_GATE, gate_problem))
    found = [check(value) for name, check in checks if (value := _option(trial, name)) is not None]
    return [problem for problem in found if problem]
