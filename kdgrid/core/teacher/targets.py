"""Teacher-side tensors computed once per batch and shared by every student of a group.

Many knowledge losses transform the teacher's features before comparing them with the student's: ``gram``
builds the teacher's Gram products, ``attention_ce_mean`` its head-mean attention distribution, the q/k/v
relations its relation log-probabilities. Those depend on the teacher's features (and the mask) only, so in a
job of 50 students they are the same 50 times. Inside `shared_teacher_targets` the knowledge functions keep each
such tensor in a memo, keyed by what it is and by the identity of the tensors it came from, and every student
after the first reads it from there. Outside the scope nothing is kept, so a single call behaves exactly as
before.

The memo holds references to its input tensors: an entry can never be matched by a new tensor that happens to
reuse a freed one's ``id``. Values are computed under ``torch.no_grad()``: teacher targets are fixed.

A learnable strategy's target (`kdgrid.core.mapping`) is not fixed: its parameters learn through it. Inside
`trainable_targets` the losses keep the target's graph: `fixed` does not detach and `teacher_side` computes
directly (no memo: the target is the student's own, not the group's).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import torch

T = TypeVar("T")

_ACTIVE: ContextVar[TeacherTargets | None] = ContextVar("kdgrid_teacher_targets", default=None)
_TRAINABLE: ContextVar[bool] = ContextVar("kdgrid_trainable_targets", default=False)


class TeacherTargets:
    """A per-batch memo ``(what, input tensors) -> value``; see the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Hashable, ...], tuple[tuple[torch.Tensor, ...], Any]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, what: Hashable, inputs: tuple[torch.Tensor, ...], compute: Callable[[], T]) -> T:
        """The value named ``what`` computed from ``inputs``: from the memo, or ``compute()`` (kept)."""
        key = (what, *(id(tensor) for tensor in inputs))
        entry = self._entries.get(key)
        if entry is not None and all(a is b for a, b in zip(entry[0], inputs, strict=True)):
            self.hits += 1
            return entry[1]
        self.misses += 1
        with torch.no_grad():
            value = compute()
        self._entries[key] = (inputs, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


@contextmanager
def shared_teacher_targets(memo: TeacherTargets | None = None) -> Iterator[TeacherTargets]:
    """Within this scope (one batch of a group), teacher-side tensors are computed once and shared.

    Open it around the students' steps of one batch, never across batches. A new memo (the default) is
    dropped on exit; pass one back in to re-enter it (a caller that visits the same batch again later).
    """
    memo = TeacherTargets() if memo is None else memo
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)


def teacher_side(what: Hashable, inputs: tuple[torch.Tensor, ...], compute: Callable[[], T]) -> T:
    """``compute()``, shared through the active `shared_teacher_targets` scope if there is one.

    Args:
        what: names the quantity and every option it depends on (``("gram", "products")``).
        inputs: the teacher tensors (and mask) it is computed from; identity, not value, is the key.
        compute: builds it from detached teacher tensors.
    """
    if _TRAINABLE.get():
        return compute()
    memo = _ACTIVE.get()
    if memo is None:
        return compute()
    return memo.get(what, inputs, compute)


def fixed(teacher: torch.Tensor) -> torch.Tensor:
    """A teacher input as a loss reads it: detached (a fixed target), except inside `trainable_targets`."""
    return teacher if _TRAINABLE.get() else teacher.detach()


@contextmanager
def trainable_targets() -> Iterator[None]:
    """Within this scope the "teacher" inputs of the losses are a learnable mapping's targets: gradients flow
    into them (`fixed` keeps them, `teacher_side` neither memoises nor disables gradients)."""
    token = _TRAINABLE.set(True)
    try:
        yield
    finally:
        _TRAINABLE.reset(token)
