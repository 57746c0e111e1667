"""`kdgrid teacher check`'s ranking of class orders: every permutation scored on the same examples, the best one
clear of the runner-up by the gate's sign test, the resolved order preferred among ties."""

from __future__ import annotations

import numpy as np
import pytest

from kdgrid.core.teacher.check import OrderCheck, check_teacher_orders, rank_orders, verdict_lines
from kdgrid.core.teacher.label_order import LabelOrder
from kdgrid.errors import ConfigError

MNLI_NAMES = ("entailment", "neutral", "contradiction")


def legacy_mnli_outputs(n: int = 600, accuracy: float = 0.84, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gold labels and the argmax outputs of a teacher trained in run_glue's legacy order (output 0 means
    contradiction, 1 entailment, 2 neutral), right on ``accuracy`` of the examples."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    legacy = (2, 0, 1)  # output k means label legacy[k]
    outputs = np.array([legacy.index(y) for y in labels])
    wrong = rng.random(n) > accuracy
    outputs[wrong] = (outputs[wrong] + rng.integers(1, 3, wrong.sum())) % 3
    return outputs, labels


def test_every_order_is_scored_and_the_trained_one_wins_clearly() -> None:
    outputs, labels = legacy_mnli_outputs()
    ranked, clear = rank_orders(outputs, labels, 3, (0, 1, 2))
    assert len(ranked) == 6 and clear
    assert ranked[0][0] == (2, 0, 1) and ranked[0][1] == pytest.approx(float(np.mean(outputs == [
        (2, 0, 1).index(y) for y in labels])))  # fmt: skip
    identity = dict(ranked)[(0, 1, 2)]
    assert identity < 0.2  # read in the dataset's order, the legacy teacher is mostly wrong
    assert [a for _, a in ranked] == sorted((a for _, a in ranked), reverse=True)


def test_orders_too_close_to_tell_apart_are_not_clear_and_ties_keep_the_resolved_order() -> None:
    labels = np.array([0, 1] * 10)
    outputs = np.array([0] * 20)  # a constant teacher: both orders score 0.5
    ranked, clear = rank_orders(outputs, labels, 2, (1, 0))
    assert ranked[0] == ((1, 0), 0.5) and not clear


def _check(outputs: np.ndarray, labels: np.ndarray, resolved: tuple[int, ...]) -> OrderCheck:
    ranked, clear = rank_orders(outputs, labels, 3, resolved)
    return OrderCheck("ishan/bert-base-uncased-mnli", "mnli", "validation_matched", len(labels),
                      LabelOrder(resolved, "identity", MNLI_NAMES), tuple(ranked), 0.34, 0.40, clear)  # fmt: skip


def test_the_verdict_names_the_order_and_the_line_to_declare_it() -> None:
    outputs, labels = legacy_mnli_outputs()
    lines = verdict_lines(_check(outputs, labels, (0, 1, 2)))
    assert "the order that fits is ['contradiction', 'entailment', 'neutral']" in lines[0]
    assert lines[-1] == (
        "declare it in the sweep file (on its trials): "
        "options: {teacher_label_order: [contradiction, entailment, neutral]}"
    )
    already = verdict_lines(_check(outputs, labels, (2, 0, 1)))
    assert already[-1].endswith("nothing to declare")


def test_no_order_fits_an_untrained_teacher() -> None:
    rng = np.random.default_rng(1)
    labels, outputs = rng.integers(0, 3, 300), rng.integers(0, 3, 300)
    (line,) = verdict_lines(_check(outputs, labels, (0, 1, 2)))
    assert "no order fits" in line


def test_a_regression_task_has_no_order_to_check() -> None:
    with pytest.raises(ConfigError, match="regression task"):
        check_teacher_orders("t", "stsb", max_length=32, device="cpu")
