"""`kdgrid.analysis.stats`: bootstrap intervals, paired tests and Holm-Bonferroni against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from kdgrid.analysis.stats import (
    bootstrap_interval,
    holm_bonferroni,
    paired_bootstrap_test,
    seed_bootstrap_interval,
)


def eighty_of_a_hundred() -> tuple[np.ndarray, np.ndarray]:
    """Gold labels and predictions right on exactly 80 of 100 examples."""
    gold = np.arange(100) % 2
    predictions = gold.copy()
    predictions[:20] = 1 - predictions[:20]
    return gold, predictions


def good_student(n: int = 200, accuracy: float = 0.9, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, n)
    return gold, np.where(rng.random(n) < accuracy, gold, 1 - gold)


def test_accuracy_interval_of_80_of_100_is_the_binomial_one() -> None:
    gold, predictions = eighty_of_a_hundred()
    interval = bootstrap_interval("accuracy", gold, predictions, resamples=10_000)
    assert interval.value == pytest.approx(0.80)
    # Normal approximation: 0.80 +- 1.96 * sqrt(0.8 * 0.2 / 100) = 0.80 +- 0.0784. The bootstrap's bounds move in
    # steps of 0.01 (accuracy of 100 examples) and their Monte-Carlo error at 10,000 resamples is about 0.001
    # (sqrt(0.025 * 0.975 / 10,000) divided by the normal density at the bound, 0.0584 / 0.04): 0.015 allows both.
    assert interval.low == pytest.approx(0.80 - 1.96 * 0.04, abs=0.015)
    assert interval.high == pytest.approx(0.80 + 1.96 * 0.04, abs=0.015)
    # Exactly: the number right in a resample is Binomial(100, 0.8), whose 2.5% / 97.5% quantiles are 72 / 88;
    # the interpolated empirical quantile lies within one step (0.01) of them.
    one_step = 0.01 + 1e-9
    assert interval.low == pytest.approx(binom.ppf(0.025, 100, 0.8) / 100, abs=one_step)
    assert interval.high == pytest.approx(binom.ppf(0.975, 100, 0.8) / 100, abs=one_step)
    assert (interval.resamples, interval.confidence) == (10_000, 0.95)


def test_a_lower_confidence_gives_a_narrower_interval_inside_the_wider_one() -> None:
    gold, predictions = eighty_of_a_hundred()
    wide = bootstrap_interval("accuracy", gold, predictions, confidence=0.95)
    narrow = bootstrap_interval("accuracy", gold, predictions, confidence=0.5)
    assert wide.low < narrow.low <= 0.80 <= narrow.high < wide.high


@pytest.mark.parametrize("metric", ["f1", "matthews_corrcoef"])
def test_classification_metrics_have_intervals_around_their_value(metric: str) -> None:
    gold, predictions = good_student()
    interval = bootstrap_interval(metric, gold, predictions)
    assert interval.low < interval.value < interval.high


@pytest.mark.parametrize("metric", ["pearson", "spearman"])
def test_regression_scores_have_correlation_intervals(metric: str) -> None:
    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 5, 150)
    interval = bootstrap_interval(metric, gold, gold + rng.normal(scale=1.0, size=150))
    assert 0.0 < interval.low < interval.value < interval.high <= 1.0


def test_the_same_seed_gives_the_same_numbers_and_another_seed_other_ones() -> None:
    gold, predictions = good_student()
    first = bootstrap_interval("matthews_corrcoef", gold, predictions, seed=5)
    assert bootstrap_interval("matthews_corrcoef", gold, predictions, seed=5) == first
    assert bootstrap_interval("matthews_corrcoef", gold, predictions, seed=6) != first
    by_seed = np.stack([predictions, 1 - predictions, predictions])
    assert seed_bootstrap_interval("accuracy", gold, by_seed, seed=5) == seed_bootstrap_interval(
        "accuracy", gold, by_seed, seed=5
    )
    other = 1 - predictions
    assert paired_bootstrap_test("accuracy", gold, predictions, other, resamples=500, seed=5) == (
        paired_bootstrap_test("accuracy", gold, predictions, other, resamples=500, seed=5)
    )


def test_one_seed_gives_exactly_the_plain_interval_and_no_standard_deviation() -> None:
    gold, predictions = good_student()
    plain = bootstrap_interval("accuracy", gold, predictions, seed=2)
    one_seed = seed_bootstrap_interval("accuracy", gold, predictions[None], seed=2)
    assert (one_seed.value, one_seed.low, one_seed.high) == (plain.value, plain.low, plain.high)
    assert (one_seed.std, one_seed.n_seeds) == (None, 1)


def test_seed_interval_has_the_mean_and_deviation_across_seeds_and_covers_their_spread() -> None:
    gold = np.zeros(200, dtype=np.int64)
    by_seed = np.zeros((3, 200), dtype=np.int64)
    for seed, wrong in enumerate((40, 60, 80)):  # accuracies 0.8, 0.7, 0.6
        by_seed[seed, :wrong] = 1
    interval = seed_bootstrap_interval("accuracy", gold, by_seed, resamples=2000)
    assert interval.mean == pytest.approx(0.7)
    assert interval.std == pytest.approx(0.1)  # sample standard deviation of 0.8, 0.7, 0.6
    assert interval.n_seeds == 3
    assert interval.low < 0.7 < interval.high
    # Seed variation widens the interval beyond the examples' alone (the middle seed's interval).
    middle = bootstrap_interval("accuracy", gold, by_seed[1], resamples=2000)
    assert interval.high - interval.low > 1.5 * (middle.high - middle.low)


def test_two_identical_students_give_p_one() -> None:
    gold, predictions = good_student()
    for metric in ("accuracy", "f1", "matthews_corrcoef"):
        test = paired_bootstrap_test(metric, gold, predictions, predictions.copy(), resamples=1000)
        assert (test.p_value, test.difference) == (1.0, 0.0)
    seeds = np.stack([predictions, np.roll(predictions, 1)])
    assert paired_bootstrap_test("accuracy", gold, seeds, seeds.copy(), resamples=1000).p_value == 1.0


def test_a_student_flipping_every_prediction_of_a_good_one_is_significant() -> None:
    gold, predictions = good_student(n=200)
    test = paired_bootstrap_test("accuracy", gold, predictions, 1 - predictions, resamples=5000)
    assert test.difference == pytest.approx(0.8, abs=0.1)  # about 0.9 - 0.1
    assert test.p_value < 0.001
    assert test.p_value == pytest.approx(2 / 5001)  # no replicate crosses 0: the +1 correction's floor
    swapped = paired_bootstrap_test("accuracy", gold, 1 - predictions, predictions, resamples=5000)
    assert (swapped.difference, swapped.p_value) == (pytest.approx(-test.difference), test.p_value)


def test_a_small_difference_on_a_few_examples_is_not_significant() -> None:
    gold, predictions = good_student(n=200)
    worse = predictions.copy()
    worse[:2] = 1 - gold[:2]  # at most 2 more errors out of 200
    assert paired_bootstrap_test("accuracy", gold, predictions, worse, resamples=2000).p_value > 0.05


def test_seeds_of_both_sides_are_paired_by_position() -> None:
    # Seeds differ a lot (accuracy 0.9, 0.75, 0.6); b is a with the same 10 extra errors in every seed.
    gold = np.zeros(200, dtype=np.int64)
    runs_a = np.zeros((3, 200), dtype=np.int64)
    for seed, wrong in enumerate((20, 50, 80)):
        runs_a[seed, :wrong] = 1
    runs_b = runs_a.copy()
    runs_b[:, 100:110] = 1
    paired = paired_bootstrap_test("accuracy", gold, runs_a, runs_b, resamples=2000)
    assert paired.seeds_paired
    assert paired.difference == pytest.approx(0.05)
    assert paired.p_value < 0.01
    # The same runs with b's seeds out of step: the seed spread now swamps the 0.05.
    unpaired = paired_bootstrap_test("accuracy", gold, runs_a, np.roll(runs_b, 1, axis=0), resamples=2000)
    assert unpaired.difference == pytest.approx(0.05)
    assert unpaired.p_value > 0.2
    # Different seed counts cannot be paired: each side's seeds are drawn apart.
    assert not paired_bootstrap_test("accuracy", gold, runs_a, runs_b[:2], resamples=200).seeds_paired


def test_holm_bonferroni_by_hand() -> None:
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> 0.06, kept monotone)
    assert holm_bonferroni([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_bonferroni([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm_bonferroni([0.2]) == [0.2]
    assert holm_bonferroni([]) == []


@pytest.mark.parametrize("bad", [[1.5], [-0.1, 0.2], [float("nan")]])
def test_holm_bonferroni_refuses_values_that_are_not_p_values(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"p-values must lie in \[0, 1\]"):
        holm_bonferroni(bad)


def test_zero_resamples_and_a_confidence_of_1_5_are_refused_with_one_message() -> None:
    gold, predictions = eighty_of_a_hundred()
    zero = "the bootstrap needs a whole number of resamples >= 1, got 0"
    with pytest.raises(ValueError, match=zero):
        bootstrap_interval("accuracy", gold, predictions, resamples=0)
    with pytest.raises(ValueError, match=zero):
        seed_bootstrap_interval("accuracy", gold, predictions[None], resamples=0)
    with pytest.raises(ValueError, match=zero):
        paired_bootstrap_test("accuracy", gold, predictions, predictions, resamples=0)
    confidence = r"confidence must lie strictly between 0 and 1 \(e.g. 0.95\), got 1.5"
    with pytest.raises(ValueError, match=confidence):
        bootstrap_interval("accuracy", gold, predictions, confidence=1.5)
    with pytest.raises(ValueError, match=confidence):
        seed_bootstrap_interval("accuracy", gold, predictions[None], confidence=1.5)


def test_mismatched_inputs_and_unknown_metrics_are_refused() -> None:
    gold, predictions = eighty_of_a_hundred()
    with pytest.raises(ValueError, match="score 99 examples but gold has 100"):
        bootstrap_interval("accuracy", gold, predictions[:99])
    with pytest.raises(ValueError, match=r"must be \[N\], got shape \(2, 100\)"):
        bootstrap_interval("accuracy", gold, np.stack([predictions, predictions]))
    with pytest.raises(ValueError, match="gold must be"):
        bootstrap_interval("accuracy", [], [])
    with pytest.raises(ValueError, match="unknown metric 'bleu'; known: accuracy, f1"):
        bootstrap_interval("bleu", gold, predictions)


def test_a_metric_function_over_rows_can_be_passed() -> None:
    gold, predictions = eighty_of_a_hundred()

    def error_rate(rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return (rows != labels).mean(axis=-1)

    interval = bootstrap_interval(error_rate, gold, predictions, resamples=500)
    assert interval.value == pytest.approx(0.2)
    assert interval.low < 0.2 < interval.high
