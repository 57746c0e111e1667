"""Degenerate runs: a trained student that learned nothing useful, flagged so it is never read as a result.

A distillation run can end ``done`` with a student that predicts one class for every example (a collapsed
student: too high a learning rate, a loss that drowned the labels), or one no better than always answering the
dev set's most frequent class. Its score looks like a number among others (CoLA's majority class alone scores
0.69 accuracy), so every row records why it looks degenerate (``degenerate_json``: a list of reasons, empty
when healthy), `kdgrid status` counts and names such trials, and the analysis marks them.

The rules, per dev set:
- ``constant``: every prediction is the same class (classification) or the same score (regression);
- ``majority``: accuracy at or below the majority class's on this dev set (the share of its most frequent gold
  class: the best any constant answer can do);
- ``constant gold``: a regression dev set whose gold scores are all the same: Pearson and Spearman are undefined
  there (recorded as 0), so the trial's score on it means nothing;
- ``mcc``: Matthews correlation at or below 0 (no better than chance; CoLA's standard metric; 0 is also what a
  constant classifier gets).

``constant`` and ``majority`` need the per-example predictions (rows of schema version 2); ``mcc`` is read from
the scores, so a version 1 row (no predictions) is still judged by it.
"""

from __future__ import annotations

import numpy as np

from kdgrid.core.data import TaskSpec
from kdgrid.predictions import DevSetPredictions, TrialPredictions, is_regression

MCC = "matthews_corrcoef"
TOLERANCE = 1e-9  # scores are fractions of counts: a student "at" the majority level equals it to ~1e-16


def majority_accuracy(gold: np.ndarray) -> float:
    """The accuracy of always answering the most frequent class of ``gold`` (class ids ``[N]``); NaN if empty."""
    if len(gold) == 0:
        return float("nan")
    _, counts = np.unique(gold, return_counts=True)
    return float(counts.max() / len(gold))


def _prediction_reasons(dev_set: str, dev: DevSetPredictions) -> list[str]:
    if len(dev.student) == 0:
        return []
    reasons = []
    if np.all(dev.student == dev.student[0]):
        reasons.append(f"{dev_set}: constant predictions (every example {dev.student[0].item()})")
    if is_regression(dev) and np.all(dev.gold == dev.gold[0]):
        reasons.append(
            f"{dev_set}: every gold score is {dev.gold[0].item():g} (a constant dev set: correlations undefined)"
        )
    if not is_regression(dev):
        accuracy = float(np.mean(dev.student == dev.gold))
        majority = majority_accuracy(dev.gold)
        if accuracy <= majority + TOLERANCE:
            reasons.append(f"{dev_set}: accuracy {accuracy:.4f} <= the majority class's {majority:.4f}")
    return reasons


def degenerate_reasons(
    task: TaskSpec, predictions: TrialPredictions, scores: dict[str, dict[str, float]]
) -> list[str]:
    """Why a done trial looks degenerate (the module's rules), one short sentence per finding, dev sets in the
    task's order; empty for a healthy student.

    Args:
        task: the trial's task (its dev sets and metrics).
        predictions: the row's per-example predictions (empty for a row of schema version 1).
        scores: the row's scores at the best epoch, ``{dev_set: {metric: value}}``.
    """
    dev_sets = [*task.dev_sets, *(name for name in [*predictions, *scores] if name not in task.dev_sets)]
    reasons: list[str] = []
    for dev_set in dict.fromkeys(dev_sets):
        if dev_set in predictions:
            reasons.extend(_prediction_reasons(dev_set, predictions[dev_set]))
        mcc = scores.get(dev_set, {}).get(MCC)
        if MCC in task.metrics and mcc is not None and mcc <= TOLERANCE:
            reasons.append(f"{dev_set}: MCC {mcc:.4f} <= 0 (no better than chance)")
    return reasons
