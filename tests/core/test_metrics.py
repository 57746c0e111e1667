"""Metrics against values computed by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from kdgrid.core.data import get_task
from kdgrid.metrics import (
    METRIC_NAMES,
    METRICS,
    REGRESSION_METRICS,
    ROW_METRICS,
    compute_metrics,
    majority_baseline,
)


def test_accuracy_and_f1_and_mcc_match_hand_computed_values() -> None:
    # TP = 2 (rows 0, 3), FP = 1 (row 1), TN = 1 (row 2), FN = 1 (row 4)
    predictions = [1, 1, 0, 1, 0]
    labels = [1, 0, 0, 1, 1]
    mrpc = compute_metrics(get_task("mrpc"), predictions, labels)
    assert list(mrpc) == ["accuracy", "f1"]
    assert mrpc["accuracy"] == pytest.approx(3 / 5)
    assert mrpc["f1"] == pytest.approx(2 / 3)  # precision 2/3, recall 2/3
    cola = compute_metrics(get_task("cola"), predictions, labels)
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 - 1) / sqrt(3*3*2*2)
    assert cola["matthews_corrcoef"] == pytest.approx(1 / 6)
    assert cola["accuracy"] == pytest.approx(3 / 5)


def test_pearson_and_spearman_match_hand_computed_values() -> None:
    # x = [1, 2, 3], y = [1, 2, 4]: cov = 3, var_x = 2, var_y = 42/9  ->  r = 9 / sqrt(84)
    assert compute_metrics(get_task("stsb"), [1.0, 2.0, 3.0], [1.0, 2.0, 4.0])["pearson"] == pytest.approx(
        9 / math.sqrt(84)
    )
    # ranks [1, 2, 3, 4] vs [1, 3, 2, 4]: sum d^2 = 2  ->  rho = 1 - 6*2 / (4 * 15) = 0.8
    scores = compute_metrics(get_task("stsb"), [1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0])
    assert list(scores) == ["pearson", "spearman"]
    assert scores["spearman"] == pytest.approx(0.8)


def test_logits_are_argmaxed_and_tensors_accepted() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.1, 3.0], [0.0, 5.0, 1.0], [1.0, 0.0, 0.0]])
    labels = torch.tensor([0, 2, 1, 1])
    assert compute_metrics(get_task("mnli"), logits, labels) == {"accuracy": pytest.approx(0.75)}
    # regression heads give [N, 1]
    assert compute_metrics(get_task("stsb"), torch.tensor([[0.5], [1.5], [2.5]]), [0.0, 1.0, 2.0])[
        "pearson"
    ] == pytest.approx(1.0)


def test_constant_predictions_give_zero_correlation_not_nan() -> None:
    scores = compute_metrics(get_task("stsb"), np.full(5, 2.0), [0.0, 1.0, 2.0, 3.0, 4.0])
    assert scores == {"pearson": 0.0, "spearman": 0.0}
    assert compute_metrics(get_task("cola"), [1, 1, 1, 1], [0, 1, 1, 0])["matthews_corrcoef"] == 0.0


def test_majority_baseline_predicts_the_most_frequent_training_class() -> None:
    assert majority_baseline(get_task("sst2"), [0, 0, 1], [0, 1, 1, 1]) == {"accuracy": pytest.approx(0.25)}
    assert majority_baseline(get_task("stsb"), [1.0, 2.0], [0.0, 5.0])["pearson"] == 0.0


def test_bad_shapes_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="2 columns"):
        compute_metrics(get_task("mnli"), np.zeros((3, 2)), [0, 1, 2])
    with pytest.raises(ValueError, match="3 predictions"):
        compute_metrics(get_task("rte"), [0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="no examples"):
        compute_metrics(get_task("rte"), [], [])


def _oracle(name: str, predictions: np.ndarray, labels: np.ndarray) -> float:
    """The metric as scikit-learn / SciPy compute it (kdgrid's own formula is checked against these)."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.metrics import matthews_corrcoef as sk_mcc

    if name == "accuracy":
        return float(accuracy_score(labels, predictions))
    if name == "f1":
        return float(f1_score(labels, predictions, pos_label=1, average="binary", zero_division=0.0))
    if name == "matthews_corrcoef":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "a single label was found": the constant cases, on purpose
            return float(sk_mcc(labels, predictions))
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return float((pearsonr if name == "pearson" else spearmanr)(predictions, labels)[0])


def _cases(name: str) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    if name in REGRESSION_METRICS:
        tied = rng.integers(0, 4, 30).astype(float)  # many ties: average ranks
        return [
            (rng.normal(size=50), rng.normal(size=50)),
            (tied, tied + rng.normal(scale=0.5, size=30)),
            (np.full(10, 2.0), rng.normal(size=10)),  # constant prediction
            (np.array([1.0, 2.0]), np.array([2.0, 1.0])),
        ]
    classes = 3 if name in ("accuracy", "matthews_corrcoef") else 2
    gold = rng.integers(0, classes, 60)
    cases = [
        (rng.integers(0, classes, 60), gold),
        (np.where(rng.random(60) < 0.8, gold, (gold + 1) % classes), gold),
        (np.zeros(60, dtype=np.int64), gold),  # constant prediction
        (np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64)),  # no positives anywhere
        (1 - gold % 2, gold % 2),  # every prediction wrong
    ]
    if name != "f1":  # class ids far apart (F1 knows only the positive class 1)
        cases.append((gold * 2000, np.where(rng.random(60) < 0.7, gold, 0) * 2000))
    return cases


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_each_metric_agrees_with_scikit_learn_and_scipy_on_one_row_and_on_many(name: str) -> None:
    cases = _cases(name)
    for predictions, labels in cases:
        assert METRICS[name](predictions, labels) == pytest.approx(
            _oracle(name, predictions, labels), abs=1e-12
        )
    predictions, labels = cases[0]
    rows = np.stack([np.roll(predictions, shift) for shift in range(4)])
    expected = [_oracle(name, row, labels) for row in rows]
    assert ROW_METRICS[name](rows, np.broadcast_to(labels, rows.shape)) == pytest.approx(expected, abs=1e-12)
