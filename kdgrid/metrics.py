"""Evaluation metrics of the tasks, computed with NumPy (SciPy ranks the scores for Spearman).

Names: ``accuracy``, ``f1`` (binary, positive class 1), ``matthews_corrcoef`` (CoLA's standard metric),
``pearson`` and ``spearman`` (STS-B). Accuracy, F1 and MCC are fractions (MCC in [-1, 1]), correlations are in
[-1, 1]; nothing is scaled to percent.

Each metric has one formula, written over rows (`ROW_METRICS`: predictions and labels ``[R, N]`` -> values
``[R]``), so that a bootstrap scores thousands of resamples of a dev set in one call (`kdgrid/analysis/stats.py`); the
scalar functions (`METRICS`) are that formula on one row. The tests check both against scikit-learn and SciPy.

A correlation is undefined when either side is constant (e.g. a regression student that predicts one value);
it is reported as 0.0 - no linear or rank relation - which is also what scikit-learn's MCC returns for a constant
classifier, so best-epoch selection and table means never see NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


CLASSIFICATION_METRICS: tuple[str, ...] = ("accuracy", "f1", "matthews_corrcoef")
REGRESSION_METRICS: tuple[str, ...] = ("pearson", "spearman")
METRIC_NAMES: tuple[str, ...] = CLASSIFICATION_METRICS + REGRESSION_METRICS

RowMetric = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A metric over rows: predictions and labels ``[R, N]`` (row r is one scoring of N examples) -> ``[R]``."""


def _safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0.0 where the denominator is 0 (an undefined metric; see the module docstring)."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    return np.divide(numerator, denominator, out=np.zeros(numerator.shape), where=denominator != 0)


def accuracy_rows(predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Fraction of examples whose predicted class equals the label, per row."""
    return (predictions == labels).mean(axis=-1)


def f1_rows(predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Binary F1 of the positive class (label 1), per row: ``2 TP / (2 TP + FP + FN)``; 0.0 if no positives on
    either side (scikit-learn's ``zero_division=0``)."""
    predicted_positive = predictions == 1
    gold_positive = labels == 1
    true_positives = (predicted_positive & gold_positive).sum(axis=-1)
    false_positives = (predicted_positive & ~gold_positive).sum(axis=-1)
    false_negatives = (~predicted_positive & gold_positive).sum(axis=-1)
    return _safe_ratio(2 * true_positives, 2 * true_positives + false_positives + false_negatives)


def _classes(predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Every class id that occurs on either side (a superset is fine: an absent class adds 0 to every sum).

    Small integer ids give a range without sorting, which a bootstrap's ``[R, N]`` blocks would pay for.
    """
    if np.issubdtype(predictions.dtype, np.integer) and np.issubdtype(labels.dtype, np.integer):
        low = min(int(predictions.min()), int(labels.min()))
        high = max(int(predictions.max()), int(labels.max()))
        if high - low < 1024:
            return np.arange(low, high + 1)
    return np.union1d(np.unique(predictions), np.unique(labels))


def matthews_corrcoef_rows(predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Matthews correlation coefficient per row, in its multi-class form (Gorodkin's R_K, which is the binary MCC
    for 2 classes): ``(c n - sum_k p_k t_k) / sqrt((n^2 - sum_k p_k^2)(n^2 - sum_k t_k^2))`` with c correct
    predictions, n examples, p_k / t_k the predicted / true count of class k; 0.0 for a constant prediction."""
    classes = _classes(predictions, labels)
    predicted_counts = np.stack([(predictions == k).sum(axis=-1) for k in classes], axis=-1)
    true_counts = np.stack([(labels == k).sum(axis=-1) for k in classes], axis=-1)
    n = float(predictions.shape[-1])  # counts in float64 from here: n^2 overflows int32 on large dev sets
    correct = (predictions == labels).sum(axis=-1).astype(np.float64)
    covariance = correct * n - (predicted_counts * true_counts).sum(axis=-1, dtype=np.float64)
    predicted_variance = n * n - (predicted_counts.astype(np.float64) ** 2).sum(axis=-1)
    true_variance = n * n - (true_counts.astype(np.float64) ** 2).sum(axis=-1)
    return _safe_ratio(covariance, np.sqrt(predicted_variance * true_variance))


def pearson_rows(predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Pearson's r between predicted and gold scores, per row; 0.0 where either side is constant or not finite."""
    return pearson_of_centred(centre_rows(predictions), centre_rows(labels))


@dataclass(frozen=True)
class CentredRows:
    """One side of `pearson_rows`, computed once where many runs share it (a bootstrap's resampled labels)."""

    centred: np.ndarray  # [R, N] values minus their row mean, float64
    varies: np.ndarray  # [R] the row is not constant (False for NaN too: undefined)
    square_sum: np.ndarray  # [R] sum of the centred values squared


def centre_rows(values: np.ndarray) -> CentredRows:
    x = np.asarray(values, dtype=np.float64)
    centred = x - x.mean(axis=-1, keepdims=True)
    return CentredRows(centred, np.ptp(x, axis=-1) > 0, (centred**2).sum(axis=-1))


def pearson_of_centred(x: CentredRows, y: CentredRows) -> np.ndarray:
    """`pearson_rows` from both sides' `centre_rows` (the same numbers, bit for bit)."""
    spread = np.sqrt(x.square_sum * y.square_sum)
    r = _safe_ratio((x.centred * y.centred).sum(axis=-1), np.where(x.varies & y.varies, spread, 0.0))
    return np.clip(np.nan_to_num(r, nan=0.0), -1.0, 1.0)


def spearman_rows(predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Spearman's rank correlation per row: Pearson's r of the ranks (ties get average ranks)."""
    # SciPy is imported here: about 0.3 s, and every task lookup imports this module without scoring anything.
    from scipy.stats import rankdata

    x = np.asarray(predictions, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    constant = (np.ptp(x, axis=-1) == 0) | (np.ptp(y, axis=-1) == 0)
    r = pearson_rows(rankdata(x, axis=-1), rankdata(y, axis=-1))
    return np.where(constant, 0.0, r)


ROW_METRICS: dict[str, RowMetric] = {
    "accuracy": accuracy_rows,
    "f1": f1_rows,
    "matthews_corrcoef": matthews_corrcoef_rows,
    "pearson": pearson_rows,
    "spearman": spearman_rows,
}


def _on_one_row(row_metric: RowMetric, predictions: np.ndarray, labels: np.ndarray) -> float:
    return float(row_metric(np.asarray(predictions)[None], np.asarray(labels)[None])[0])


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of examples whose predicted class equals the label."""
    return _on_one_row(accuracy_rows, predictions, labels)


def f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Binary F1 of the positive class (label 1), as GLUE reports it for MRPC and QQP; 0.0 if no positives."""
    return _on_one_row(f1_rows, predictions, labels)


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation coefficient (multi-class form for > 2 classes); 0.0 for a constant prediction."""
    return _on_one_row(matthews_corrcoef_rows, predictions, labels)


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Pearson's r between predicted and gold scores."""
    return _on_one_row(pearson_rows, predictions, labels)


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Spearman's rank correlation between predicted and gold scores (ties get average ranks)."""
    return _on_one_row(spearman_rows, predictions, labels)


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
