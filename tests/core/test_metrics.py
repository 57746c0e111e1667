"""Metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kdgrid.core.data import get_task
from kdgrid.core.metrics import compute_metrics, majority_baseline


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
