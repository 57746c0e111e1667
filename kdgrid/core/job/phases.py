"""What a job is doing now, told to whoever listens: the progress of a run names the phase, not only the step.

The core calls `phase` as a job moves on: `LOADING_TEACHER`, `LOADING_DATA`, `GATING` (`kdgrid.core.job.loaded_job`),
`SETTING_UP`, `CALIBRATING` (``beta: auto``), `TRAINING` (then ``on_step`` gives the step n/N), `EVALUATING`
(an epoch's dev sets), and `EPOCH_ENDED` with facts: ``epoch`` (1-based), ``losses`` (each student's weighted
mean loss over the epoch: its terms' means times their weights, as `kdgrid.core.training.objective.Objective.total`
sums them), ``scores`` (each student's primary metric on the first dev set), ``metric`` and ``dev_set``.
A listener (`listening`) is a callable ``(name, **facts)``; `kdgrid.launch.progress.EpochLines.phase` prints
them. Without a listener a phase costs one function call. Torch-free.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kdgrid.result import TrialResult

LOADING_TEACHER = "loading the teacher"
LOADING_DATA = "loading data"
GATING = "checking the teacher (gate)"
SETTING_UP = "setting up the students"
CALIBRATING = "calibrating beta: auto"
TRAINING = "training"
EVALUATING = "evaluating"
EPOCH_ENDED = "epoch ended"

Listener = Callable[..., None]
_listeners: list[Listener] = []


def phase(name: str, **facts: Any) -> None:
    """Tell every listener that the job is now at ``name`` (with ``facts``, see the module)."""
    for listener in list(_listeners):
        listener(name, **facts)


@contextlib.contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """``listener`` hears the phases inside (nothing when None)."""
    if listener is None:
        yield
        return
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def weighted_loss(result: TrialResult) -> float:
    """A result's last epoch's weighted mean loss (its curve's unweighted term means times their weights)."""
    if not result.curve:
        return math.nan
    terms = result.curve[-1].get("loss_terms", {})
    return float(sum(result.weights.get(name, 1.0) * value for name, value in terms.items()))


def epoch_ended(epoch: int, results: Iterable[TrialResult], dev_set: str, metric: str) -> None:
    """Tell the listeners epoch ``epoch`` (1-based) ended, with the students' losses and dev scores."""
    if not _listeners:
        return
    done = [r for r in results if r.status == "done" and r.curve and r.curve[-1].get("epoch") == epoch]
    scores = [float(r.curve[-1].get("scores", {}).get(dev_set, {}).get(metric, math.nan)) for r in done]
    phase(EPOCH_ENDED, epoch=epoch, losses=[weighted_loss(r) for r in done], scores=scores, metric=metric,
          dev_set=dev_set)  # fmt: skip
