"""Test helper: a job preempted in a chosen epoch, as a SLURM preemption stops a process (the core's batches raise
in its place), so that a test can resume it from its epoch checkpoint and compare with an uninterrupted run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import kdgrid.core.training.train as train


class Preempted(BaseException):
    """Raised where the job's batches of the chosen epoch would start (a BaseException: no handler catches it)."""


@contextlib.contextmanager
def preempted_in_epoch(monkeypatch: pytest.MonkeyPatch, epoch: int) -> Iterator[None]:
    """Inside: the job loop's batches raise `Preempted` when epoch ``epoch`` (0-based) starts; the body must be
    stopped by it. Afterwards the batches are the core's own again."""
    original = train.train_batches

    def batches(tokenized: Any, batch_size: int, seed: int, epoch_index: int, **kw: Any) -> Any:
        if epoch_index == epoch:
            raise Preempted
        return original(tokenized, batch_size, seed, epoch_index, **kw)

    monkeypatch.setattr(train, "train_batches", batches)
    try:
        with pytest.raises(Preempted):
            yield
    finally:
        monkeypatch.setattr(train, "train_batches", original)
