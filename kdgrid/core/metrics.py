"""Evaluation metrics of the tasks, computed with scikit-learn and SciPy.

Names: ``accuracy``, ``f1`` (binary, positive class 1), ``matthews_corrcoef`` (CoLA's standard metric),
``pearson`` and ``spearman`` (STS-B). Accuracy, F1 and MCC are fractions (MCC in [-1, 1]), correlations are in
[-1, 1]; nothing is scaled to percent.

A correlation is undefined when either side is constant (e.g. a regression student that predicts one value);
it is reported as 0.0 - no linear or rank relation - which is also what scikit-learn's MCC returns for a constant
classifier, so best-epoch selection and table means never see NaN.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np


class ScoredTask(Protocol):
    """What scoring reads of a task (`kdgrid.core.data.TaskSpec` has it; `kdgrid.core.data` imports the metric
    names from here, so this module does not import it back)."""

    name: str
    num_labels: int
    metrics: tuple[str, ...]

    @property
    def is_regression(self) -> bool: ...


# scikit-learn and SciPy are imported inside the metric functions: together about 0.8 s, and every task lookup
# imports this module (for the metric names) without scoring anything.

CLASSIFICATION_METRICS: tuple[str, ...] = ("accuracy", "f1", "matthews_corrcoef")
REGRESSION_METRICS: tuple[str, ...] = ("pearson", "spearman")
METRIC_NAMES: tuple[str, ...] = CLASSIFICATION_METRICS + REGRESSION_METRICS


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of examples whose predicted class equals the label."""
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(labels, predictions))


def f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Binary F1 of the positive class (label 1), as GLUE reports it for MRPC and QQP; 0.0 if no positives."""
    from sklearn.metrics import f1_score

    return float(f1_score(labels, predictions, pos_label=1, average="binary", zero_division=0.0))


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation coefficient (multi-class form for > 2 classes); 0.0 for a constant prediction."""
    from sklearn.metrics import matthews_corrcoef as sk_mcc

    return float(sk_mcc(labels, predictions))


def _correlation(kind: Callable[..., Any], predictions: np.ndarray, labels: np.ndarray) -> float:
    if len(predictions) < 2 or np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0  # undefined; see the module docstring
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = float(kind(predictions, labels)[0])
    return 0.0 if np.isnan(value) else value


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Pearson's r between predicted and gold scores."""
    from scipy.stats import pearsonr

    return _correlation(pearsonr, predictions, labels)


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Spearman's rank correlation between predicted and gold scores (ties get average ranks)."""
    from scipy.stats import spearmanr

    return _correlation(spearmanr, predictions, labels)


METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def _as_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor; avoid importing torch here
        values = values.detach().float().cpu().numpy() if values.is_floating_point() else values.cpu().numpy()
    return np.asarray(values)


def predicted_values(task: ScoredTask, predictions: Any) -> np.ndarray:
    """Model outputs -> what the metrics compare with labels.

    Classification: logits or probabilities ``[N, C]`` become class ids (argmax over C); class ids ``[N]`` pass
    through. Regression: scores ``[N]`` or ``[N, 1]`` become a float vector ``[N]``.
    """
    array = _as_numpy(predictions)
    if task.is_regression:
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 1:
            raise ValueError(
                f"{task.name}: regression predictions must be [N] or [N, 1], got shape {array.shape}"
            )
        return array.astype(np.float64)
    if array.ndim == 2:
        if array.shape[1] != task.num_labels:
            raise ValueError(
                f"{task.name}: logits have {array.shape[1]} columns, the task has {task.num_labels} labels"
            )
        return array.argmax(axis=1)
    if array.ndim != 1:
        raise ValueError(
            f"{task.name}: predictions must be class ids [N] or logits [N, C], got shape {array.shape}"
        )
    return array.astype(np.int64)


def compute_metrics(task: ScoredTask, predictions: Any, labels: Any) -> dict[str, float]:
    """Every metric of ``task`` (in the order of ``task.metrics``) for one dev set.

    Args:
        task: the task (a `TaskSpec`; `kdgrid.core.data.get_task` gives it from a name).
        predictions: logits ``[N, C]``, class ids ``[N]``, or regression scores ``[N]`` / ``[N, 1]``
            (NumPy, torch or lists).
        labels: gold labels ``[N]`` (class ids or float scores).
    """
    values = predicted_values(task, predictions)
    gold = _as_numpy(labels)
    gold = gold.astype(np.float64) if task.is_regression else gold.astype(np.int64)
    if gold.ndim != 1 or len(gold) != len(values):
        raise ValueError(f"{task.name}: {len(values)} predictions but labels of shape {gold.shape}")
    if len(gold) == 0:
        raise ValueError(f"{task.name}: no examples to score")
    return {name: METRICS[name](values, gold) for name in task.metrics}


def majority_baseline(
    task: ScoredTask, train_labels: Sequence[Any], dev_labels: Sequence[Any]
) -> dict[str, float]:
    """Scores of the trivial predictor: the most frequent training class (regression: the training mean).

    A fine-tuned teacher must beat this on the primary metric; CoLA's 0.6913 in the paper is this number.
    Ties between classes go to the smallest class id.
    """
    train = _as_numpy(train_labels)
    dev = _as_numpy(dev_labels)
    if task.is_regression:
        constant: float | int = float(train.astype(np.float64).mean())
    else:
        constant = int(np.bincount(train.astype(np.int64), minlength=task.num_labels).argmax())
    return compute_metrics(task, np.full(len(dev), constant), dev)
