"""Per-example predictions: teacher agreement computed by hand, and the compact stored form round-tripped."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kdgrid.predictions import (
    DevSetPredictions,
    decode_predictions,
    encode_predictions,
    teacher_agreement,
    teacher_agreements,
)


def classes(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def scores(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_top1_agreement_is_the_share_of_examples_where_student_and_teacher_agree() -> None:
    dev = DevSetPredictions(classes(0, 1, 1, 0), classes(0, 1, 2, 0), classes(0, 1, 1, 0), "f")
    assert teacher_agreement(dev) == 0.75  # 3 of 4 agree (the gold labels play no part)


def test_regression_agreement_is_pearsons_r_of_student_and_teacher() -> None:
    student, teacher = scores(1.0, 2.0, 3.0, 4.0), scores(1.0, 3.0, 2.0, 4.0)
    # by hand: both have mean 2.5; deviations (-1.5, -.5, .5, 1.5) and (-1.5, .5, -.5, 1.5):
    # sum of products 2.25 - .25 - .25 + 2.25 = 4, each sum of squares 5, r = 4 / 5
    dev = DevSetPredictions(scores(0.0, 0.0, 0.0, 0.0), student, teacher, "f")
    assert teacher_agreement(dev) == pytest.approx(0.8)


def test_agreement_without_a_teacher_is_nan() -> None:
    dev = DevSetPredictions(classes(0, 1), classes(0, 1), None, "f")
    assert math.isnan(teacher_agreement(dev))
    both = {"a": dev, "b": DevSetPredictions(classes(1, 1), classes(0, 1), classes(0, 0), "g")}
    agreements = teacher_agreements(both)
    assert math.isnan(agreements["a"]) and agreements["b"] == 0.5


def test_the_stored_form_round_trips_classes_scores_and_a_missing_teacher() -> None:
    predictions = {
        "validation_matched": DevSetPredictions(classes(0, 2, 1), classes(2, 2, 1), classes(0, 2, 0), "aa"),
        "validation_mismatched": DevSetPredictions(classes(1), classes(0), None, "bb"),
        "stsb": DevSetPredictions(scores(0.5, 4.25), scores(1.0, -2.5), scores(3.0, 3.5), "cc"),
        "empty": DevSetPredictions(classes(), classes(), None, "dd"),
    }
    back = decode_predictions(encode_predictions(predictions))
    assert list(back) == list(predictions)
    for name, dev in predictions.items():
        got = back[name]
        assert got.fingerprint == dev.fingerprint
        for mine, theirs in ((dev.gold, got.gold), (dev.student, got.student), (dev.teacher, got.teacher)):
            if mine is None:
                assert theirs is None
            else:
                assert theirs.dtype == mine.dtype and np.array_equal(theirs, mine)


def test_an_mnli_sized_row_stores_one_byte_per_class_id() -> None:
    rng = np.random.default_rng(0)
    predictions = {
        name: DevSetPredictions(*(rng.integers(0, 3, n) for _ in range(3)), "f" * 64)
        for name, n in (("validation_matched", 9815), ("validation_mismatched", 9832))
    }
    blob = encode_predictions(predictions)
    assert 3 * (9815 + 9832) < len(blob) < 3 * (9815 + 9832) + 512  # int8 arrays plus a short header
    assert np.array_equal(
        decode_predictions(blob)["validation_mismatched"].student,
        predictions["validation_mismatched"].student,
    )


def test_class_ids_beyond_int8_are_stored_wider() -> None:
    dev = DevSetPredictions(classes(0, 300), classes(300, -5), None, "f")
    back = decode_predictions(encode_predictions({"v": dev}))["v"]
    assert np.array_equal(back.student, dev.student) and np.array_equal(back.gold, dev.gold)


@pytest.mark.parametrize("blob", [b"", b"nonsense", None])
def test_a_value_not_in_the_stored_form_is_refused(blob: bytes | None) -> None:
    if blob is None:  # a truncated value
        blob = encode_predictions({"v": DevSetPredictions(classes(0, 1), classes(0, 1), None, "f")})[:-1]
    with pytest.raises(ValueError):
        decode_predictions(blob)
