"""Degenerate runs: constant predictions, at or below the majority class, MCC <= 0; a healthy student is not
flagged; a row without predictions is judged by its scores."""

from __future__ import annotations

import numpy as np

from kdgrid.core.data import get_task
from kdgrid.core.training.degenerate import degenerate_reasons, majority_accuracy
from kdgrid.predictions import DevSetPredictions

GOLD = np.array([1, 1, 1, 0, 0, 1, 1, 0], dtype=np.int64)  # majority class 1: 5 of 8 = 0.625


def dev(student: list[int], gold: np.ndarray = GOLD) -> dict[str, DevSetPredictions]:
    return {"validation": DevSetPredictions(gold, np.array(student, dtype=np.int64), None, "f")}


def accuracy_of(predictions: dict[str, DevSetPredictions]) -> dict[str, dict[str, float]]:
    one = predictions["validation"]
    return {"validation": {"accuracy": float(np.mean(one.student == one.gold))}}


def test_majority_accuracy_is_the_share_of_the_most_frequent_class() -> None:
    assert majority_accuracy(GOLD) == 0.625 and np.isnan(majority_accuracy(GOLD[:0]))


def test_a_constant_student_is_flagged_constant_and_at_the_majority() -> None:
    predictions = dev([1] * 8)
    reasons = degenerate_reasons(get_task("rte"), predictions, accuracy_of(predictions))
    assert reasons == [
        "validation: constant predictions (every example 1)",
        "validation: accuracy 0.6250 <= the majority class's 0.6250",
    ]


def test_a_varied_student_below_the_majority_is_flagged() -> None:
    predictions = dev([0, 1, 0, 0, 1, 1, 0, 1])  # 3 of 8 right: 0.375 < 0.625
    reasons = degenerate_reasons(get_task("rte"), predictions, accuracy_of(predictions))
    assert reasons == ["validation: accuracy 0.3750 <= the majority class's 0.6250"]


def test_a_healthy_student_is_not_flagged() -> None:
    predictions = dev([1, 1, 1, 0, 0, 1, 0, 0])  # 6 of 8 right: 0.75 > 0.625
    assert degenerate_reasons(get_task("rte"), predictions, accuracy_of(predictions)) == []


def test_mcc_zero_on_cola_is_flagged_from_the_scores_alone() -> None:
    scores = {"validation": {"accuracy": 0.6913, "matthews_corrcoef": 0.0}}
    assert degenerate_reasons(get_task("cola"), {}, scores) == [
        "validation: MCC 0.0000 <= 0 (no better than chance)"
    ]
    healthy = {"validation": {"accuracy": 0.75, "matthews_corrcoef": 0.31}}
    assert degenerate_reasons(get_task("cola"), {}, healthy) == []


def test_a_constant_regression_student_is_flagged_and_a_varied_one_is_not() -> None:
    gold = np.array([0.5, 2.0, 4.5], dtype=np.float32)
    constant = {"validation": DevSetPredictions(gold, np.full(3, 2.5, dtype=np.float32), None, "f")}
    assert degenerate_reasons(get_task("stsb"), constant, {"validation": {"pearson": 0.0}}) == [
        "validation: constant predictions (every example 2.5)"
    ]
    varied = {"validation": DevSetPredictions(gold, gold + 0.1, None, "f")}
    assert degenerate_reasons(get_task("stsb"), varied, {"validation": {"pearson": 1.0}}) == []


def test_every_dev_set_is_judged_in_the_tasks_order() -> None:
    matched = DevSetPredictions(GOLD, np.ones(8, dtype=np.int64), None, "m")
    mismatched = DevSetPredictions(GOLD, np.array([1, 1, 1, 0, 0, 1, 0, 0]), None, "mm")
    predictions = {"validation_mismatched": mismatched, "validation_matched": matched}
    reasons = degenerate_reasons(get_task("mnli"), predictions, {})
    assert [r.split(":")[0] for r in reasons] == ["validation_matched", "validation_matched"]


def test_a_constant_regression_dev_set_flags_the_trial_whatever_the_student_predicts() -> None:
    gold = np.full(4, 3.0, dtype=np.float32)  # Pearson is undefined there (recorded as 0)
    varied = {
        "validation": DevSetPredictions(gold, np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32), None, "f")
    }
    assert degenerate_reasons(get_task("stsb"), varied, {"validation": {"pearson": 0.0}}) == [
        "validation: every gold score is 3 (a constant dev set: correlations undefined)"
    ]
