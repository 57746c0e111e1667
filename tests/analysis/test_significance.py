"""The tests behind the marks, against hand-computed values, and the rules that keep them honest: families and
corrections, a warning when a family cannot reach the threshold, one epoch per cell, no test of a chosen best,
seed-level intervals, the paper judged by where one more run would fall, degenerate by the interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import attach_uncertainty
from kdgrid.analysis.compare import attach_paper
from kdgrid.analysis.render import render
from kdgrid.analysis.significant_conclusions import one_layer_test, strategies_omnibus
from kdgrid.analysis.tables import Cell, Column, build_view, get_spec
from kdgrid.analysis.tables_report import UncertaintyOptions, build_report
from kdgrid.analysis.tidy import aggregate_seeds
from kdgrid.errors import ConfigError
from kdgrid.predictions import DevSetPredictions
from tests.analysis.tables_testing import tidy_rows

N = 400
GOLD = np.arange(N) % 2
FINGERPRINT = "e" * 64


def right_on(rng: np.random.Generator, share: float) -> np.ndarray:
    return np.where(rng.random(N) < share, GOLD, 1 - GOLD)


# --- the tests themselves ---------------------------------------------------------------------------------------


def test_mcnemar_is_the_exact_binomial_of_the_discordant_examples():
    a, b = GOLD.copy(), GOLD.copy()
    a[:2] = 1 - a[:2]  # a wrong on 2 where b is right
    b[2:10] = 1 - b[2:10]  # b wrong on 8 where a is right
    test = stats.mcnemar_test(GOLD, a, b)
    # 8 of 10 discordant favour a: p = 2 P(X <= 2 | 10, 1/2) = 2 (1 + 10 + 45) / 1024
    assert test.p_value == pytest.approx(112 / 1024)
    assert test.difference == pytest.approx(6 / N) and test.method == "mcnemar"
    assert test.floor == pytest.approx(2 * 0.5**10)
    assert stats.mcnemar_test(GOLD, a, a).p_value == 1.0


def test_the_exact_test_has_no_resampling_floor():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 20_000)
    a = np.where(rng.random(20_000) < 0.82, gold, 1 - gold)
    b = np.where(rng.random(20_000) < 0.80, gold, 1 - gold)
    p = stats.mcnemar_test(gold, a, b).p_value
    assert p < 2 / (stats.DEFAULT_TEST_RESAMPLES + 1) / 100  # far below what 10,000 resamples can give


def test_benjamini_hochberg_and_holm_against_hand_values():
    p = [0.01, 0.04, 0.03, 0.5]
    assert stats.adjust(p, "fdr") == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.5])
    assert stats.adjust(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.5])
    with pytest.raises(ValueError, match="allowed: holm, fdr"):
        stats.adjust(p, "bonferroni")


def test_a_family_of_bootstrap_tests_beyond_250_cannot_reject():
    floor = 2 / (stats.DEFAULT_TEST_RESAMPLES + 1)
    assert not stats.family_can_reject([floor] * 1323, 0.05)
    assert stats.family_can_reject([floor] * 49, 0.05)
    assert stats.family_can_reject([0.0] * 1323, 0.05)


def test_seed_t_interval_and_test_against_hand_values():
    scores = [0.70, 0.72, 0.75]
    interval = stats.seed_t_interval(scores)
    half = 4.302652729911275 * np.std(scores, ddof=1) / math.sqrt(3)  # t(2, 0.975)
    assert (interval.low, interval.high) == pytest.approx((np.mean(scores) - half, np.mean(scores) + half))
    assert interval.kind == "t" and interval.n_seeds == 3
    low, high = stats.seed_prediction_interval(scores)
    assert high - low == pytest.approx(2 * half * math.sqrt(4))  # sqrt(1 + 1/3) / sqrt(1/3) = 2
    paired = stats.seed_t_test([0.70, 0.72, 0.75], [0.68, 0.71, 0.72], paired=True)
    d = np.array([0.02, 0.01, 0.03])
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    assert paired.p_value == pytest.approx(2 * scipy_stats.t.sf(t, 2)) and paired.seeds_paired
    welch = stats.seed_t_test([0.70, 0.72, 0.75], [0.6, 0.61], paired=True)  # unequal K: Welch
    assert not welch.seeds_paired
    assert welch.p_value == pytest.approx(
        scipy_stats.ttest_ind([0.70, 0.72, 0.75], [0.6, 0.61], equal_var=False).pvalue
    )
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.seed_t_test([0.7], [0.6, 0.61], paired=False)


def test_friedman_on_correctness_is_cochrans_q():
    rng = np.random.default_rng(3)
    correct = (rng.random((5, 300)) < 0.7).astype(float)
    totals, per_example, k = correct.sum(axis=1), correct.sum(axis=0), 5
    q = (
        (k - 1)
        * (k * np.sum(totals**2) - totals.sum() ** 2)
        / (k * per_example.sum() - np.sum(per_example**2))
    )
    test = stats.friedman_over_examples(correct)
    assert test.statistic == pytest.approx(q) and test.p_value == pytest.approx(scipy_stats.chi2.sf(q, 4))
    assert stats.friedman_over_examples(np.ones((3, 50))).p_value == 1.0


def test_anova_over_seeds_and_the_wald_test():
    groups = [[0.70, 0.72, 0.71], [0.75, 0.77, 0.76], [0.70, 0.71, 0.69]]
    assert stats.anova_over_seeds(groups).p_value == pytest.approx(scipy_stats.f_oneway(*groups).pvalue)
    # two scores with independent replicates of variance 1e-4 each: W = d^2 / 2e-4, chi-square with 1 df
    rng = np.random.default_rng(0)
    replicates = rng.normal(0, 0.01, (200_000, 2))
    result = stats.wald_equal([0.80, 0.83], replicates)
    assert result.statistic == pytest.approx(0.03**2 / 2e-4, rel=0.02)
    assert result.p_value == pytest.approx(scipy_stats.chi2.sf(4.5, 1), rel=0.1) and result.method == "wald"
    assert stats.wald_equal([0.8, 0.8, 0.8], np.zeros((10, 3))).p_value == 1.0


def test_the_paired_anova_over_seeds_against_hand_values():
    # candidate effects -1, 0, 1 (SS 6 on 2 df), seed effects -1, 1/3, 2/3, residual SS 4/3 on 4 df: F = 3 / (1/3)
    scores = [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [3.0, 5.0, 4.0]]
    result = stats.anova_over_paired_seeds(scores)
    assert result.statistic == pytest.approx(9.0) and result.method == "anova-paired"
    assert result.p_value == pytest.approx(scipy_stats.f.sf(9.0, 2, 4))
    # two candidates: the paired t-test, F = t^2
    a, b = [0.71, 0.74, 0.69, 0.73], [0.70, 0.71, 0.69, 0.70]
    assert stats.anova_over_paired_seeds([a, b]).p_value == pytest.approx(scipy_stats.ttest_rel(a, b).pvalue)
    # a component each seed gives every candidate cancels; the one-way ANOVA counts it as noise
    shifted = np.array(scores) + np.array([0.0, 10.0, -7.0])
    assert stats.anova_over_paired_seeds(shifted).p_value == pytest.approx(result.p_value)
    assert stats.anova_over_seeds(list(shifted)).p_value > 0.5
    assert stats.anova_over_paired_seeds([[0.7, 0.8], [0.7, 0.8]]).p_value == 1.0
    with pytest.raises(ValueError, match="paired ANOVA"):
        stats.anova_over_paired_seeds([[0.7], [0.8]])


def runs_scoring(*accuracies: float) -> np.ndarray:
    """``[K, N]``: one run per accuracy, right on exactly that share of the examples."""
    return np.stack([np.where(np.arange(N) < round(a * N), GOLD, 1 - GOLD) for a in accuracies])


def test_the_first1_last1_test_with_seeds_shuffles_strategies_within_each_seed():
    """First-1 beats Last, Skip, First and Last-1 by 2 points in every one of 5 seeds, while the seeds move every
    cell together by up to 20 points: within each seed the 2 points are never reached by a shuffle."""
    shifts = (0.0, 0.2, -0.1, 0.15, -0.05)
    base = {"First": 0.70, "Last": 0.70, "Skip": 0.69, "First-1": 0.72, "Last-1": 0.70}
    cells, outcome = [], {}
    for strategy, accuracy in base.items():
        row_ids = tuple(f"{strategy}/{j}" for j in range(len(shifts)))
        cells.append(
            Cell(
                value=accuracy,
                row_ids=row_ids,
                seeds=tuple(float(j) for j in range(len(shifts))),
                config={"metric": "accuracy", "dev_set": "validation", "knowledge": "cos", "strategy": strategy},
            )
        )
        for row_id, run in zip(row_ids, runs_scoring(*(accuracy + s for s in shifts)), strict=True):
            outcome[row_id] = {"validation": DevSetPredictions(GOLD, run, None, FINGERPRINT)}
    difference, p_value, floor = one_layer_test(cells, outcome, resamples=2000, seed=0)
    # a shuffle matches it only when the top score of every seed lands on one First-1/Last-1 cell: 2 / 5^5
    assert difference > 0 and p_value <= 0.005 and floor == pytest.approx(2 / 2001)
    # two strategies, two seeds: 4 distinct shuffles, so p cannot go below 2 / 4 whatever the difference
    two = [
        Cell(value=0.0, row_ids=c.row_ids[:2], seeds=c.seeds[:2], config=c.config)
        for c in cells
        if c.config["strategy"] in ("First", "First-1")
    ]
    difference, p_value, floor = one_layer_test(two, outcome, resamples=2000, seed=0)
    assert difference > 0 and floor == 0.5 and p_value >= 0.5
    # the same scores under seeds no other cell ran: nothing to pair, all runs pooled, the shifts are noise
    first1 = cells[3]
    cells[3] = Cell(value=0.72, row_ids=first1.row_ids, seeds=(10.0, 11.0, 12.0, 13.0, 14.0), config=first1.config)
    assert one_layer_test(cells, outcome, resamples=2000, seed=0)[1] > 0.2


def test_strategies_omnibus_with_the_same_seeds_uses_them_as_blocks():
    shifts = (0.0, 0.1, -0.08)
    cells, outcome = [], {}
    for strategy, accuracy in (("First", 0.70), ("Last", 0.71), ("Skip", 0.72)):
        row_ids = tuple(f"{strategy}/{j}" for j in range(3))
        cells.append(
            Cell(
                value=accuracy,
                row_ids=row_ids,
                seeds=(0.0, 1.0, 2.0),
                config={"metric": "accuracy", "dev_set": "validation", "knowledge": "cos", "strategy": strategy},
            )
        )
        for row_id, run in zip(row_ids, runs_scoring(*(accuracy + s for s in shifts)), strict=True):
            outcome[row_id] = {"validation": DevSetPredictions(GOLD, run, None, FINGERPRINT)}
    result = strategies_omnibus(cells, outcome)
    assert result.method == "anova-paired" and result.p_value < 1e-6
    cells[0] = Cell(value=0.70, row_ids=cells[0].row_ids, seeds=(5.0, 6.0, 7.0), config=cells[0].config)
    unpaired = strategies_omnibus(cells, outcome)  # other seeds: nothing to pair, the one-way ANOVA
    assert unpaired.method == "anova" and unpaired.p_value > 0.5


# --- families, corrections and the notes ----------------------------------------------------------------------


def table5_rows(values: dict[tuple[str, str, str], np.ndarray], seeds: int = 1) -> list[dict]:
    """Tidy rows of Table 5 for (task, knowledge, strategy) -> predictions [seeds, N]."""
    rows = []
    for (task, knowledge, strategy), runs in values.items():
        for seed in range(seeds):
            rows.append(
                {
                    "table": "5",
                    "task": task,
                    "student": "bert-tiny",
                    "teacher": "bert-base",
                    "knowledge": knowledge,
                    "strategy": strategy,
                    "beta": "1",
                    "init": "pretrain",
                    "soft_weight": 1.0,
                    "row_id": f"{task}/{knowledge}/{strategy}/{seed}",
                    "seed": seed,
                    "value": float((runs[seed] == GOLD).mean()),
                }
            )
    return rows


def predictions_of(values, seeds: int = 1):
    return {
        f"{task}/{knowledge}/{strategy}/{seed}": {
            "validation": DevSetPredictions(GOLD, runs[seed], None, f"{task}".ljust(64, "0"))
        }
        for (task, knowledge, strategy), runs in values.items()
        for seed in range(seeds)
    }


def two_tasks(rng):
    values = {}
    for task in ("rte", "mrpc"):
        values[(task, "hidden_mse", "Last-1")] = right_on(rng, 0.7)[None]
        values[(task, "cos", "Last-1")] = right_on(rng, 0.95 if task == "rte" else 0.7)[None]
        values[(task, "cos", "First")] = right_on(rng, 0.7)[None]
    return values


def test_families_are_per_condition_by_default_and_the_note_names_family_and_correction():
    values = two_tasks(np.random.default_rng(0))
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(table5_rows(values))))
    summary = attach_uncertainty(
        view, predictions_of(values), reference=_reference(), resamples=200, test_resamples=200
    )
    assert summary.families == 2 and summary.tested == 4 and summary.run_level == 4
    text = " ".join(summary.notes)
    assert "families: one family per condition (task x dev set x student x teacher), 2 of them" in text
    assert "correction: Holm (family-wise error)" in text and "exact McNemar" in text
    assert "run-to-run comparisons" in text
    rte = next(b for b in view.blocks if "RTE" in b.title.upper())
    assert rte.cell("cos", Column("Last-1")).significant
    assert "marks with one seed a side: a run-to-run comparison" in render(view, "markdown")
    whole = build_view(get_spec("5"), aggregate_seeds(tidy_rows(table5_rows(values))))
    summary = attach_uncertainty(
        whole, predictions_of(values), reference=_reference(), resamples=200, test_resamples=200,
        family="table", correction="fdr",
    )  # fmt: skip
    text = " ".join(summary.notes)
    assert summary.families == 1 and "one family: the whole table" in text and "Benjamini-Hochberg" in text


def _reference():
    from kdgrid.analysis.cell_stats import parse_reference

    return parse_reference("knowledge=hidden_mse,strategy=Last-1")


def test_a_family_that_cannot_reach_the_threshold_is_warned_about():
    values = two_tasks(np.random.default_rng(0))
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(table5_rows(values))))
    # two paired bootstrap tests of 10 resamples: floor 2/11, twice that is above 0.05
    summary = attach_uncertainty(
        view,
        predictions_of(values),
        reference=_reference(),
        resamples=50,
        test_resamples=10,
        test="bootstrap",
    )
    assert summary.unreachable_families == 2
    assert any(n.startswith("warning: 2 of 2 families cannot reach") for n in summary.notes)


def test_bad_family_correction_or_test_are_refused_before_the_store_is_read():
    for options, message in (
        (UncertaintyOptions(family="everything"), "--family 'everything'; allowed: condition, table"),
        (UncertaintyOptions(correction="bonferroni"), "--correction 'bonferroni'; allowed: holm, fdr"),
        (UncertaintyOptions(test="magic"), "--test 'magic'; allowed: auto, bootstrap"),
    ):
        with pytest.raises(ConfigError, match=message):
            options.check()


# --- one epoch per cell ----------------------------------------------------------------------------------------


def test_kind_last_never_prints_an_interval_of_another_epoch(tmp_path):
    values = two_tasks(np.random.default_rng(0))
    tidy = aggregate_seeds(tidy_rows(table5_rows(values)))
    with pytest.raises(ConfigError, match="--kind last with --intervals on"):
        UncertaintyOptions(intervals="on", kind="last").check()
    report = build_report(
        tidy,
        "5",
        tmp_path,
        uncertainty=UncertaintyOptions(kind="last"),
        load=lambda *_: predictions_of(values),
    )
    (view,) = report.views
    cells = [c for b in view.blocks for c in b.cells.values()]
    assert cells and not any(c.has_interval or c.significant for c in cells)
    assert any("best epoch only" in n for n in view.notes)
    best = build_report(tidy, "5", tmp_path, load=lambda *_: predictions_of(values)).views[0]
    assert any(c.has_interval for b in best.blocks for c in b.cells.values())


# --- no test of a chosen best -----------------------------------------------------------------------------------


def test_a_cell_that_shows_the_best_of_several_temperatures_is_not_tested():
    rng = np.random.default_rng(1)
    values = {("rte", "hidden_mse", "Last-1"): right_on(rng, 0.7)[None], ("rte", "cos", "First"): None}
    rows = table5_rows({k: v for k, v in values.items() if v is not None})
    runs = {t: right_on(rng, 0.7) for t in (1.0, 4.0)}
    for temperature, run in runs.items():
        rows.append({**rows[0], "knowledge": "cos", "strategy": "First", "temperature": temperature,
                     "row_id": f"cos-{temperature}", "value": float((run == GOLD).mean())})  # fmt: skip
    predictions = predictions_of({k: v for k, v in values.items() if v is not None})
    for temperature, run in runs.items():
        predictions[f"cos-{temperature}"] = {
            "validation": DevSetPredictions(GOLD, run, None, "rte".ljust(64, "0"))
        }
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(rows)))
    chosen = view.blocks[0].cell("cos", Column("First"))
    assert chosen.selected_over == ("temperature",)
    assert chosen.value == max(float((r == GOLD).mean()) for r in runs.values())
    assert any("keep one with --where FIELD=VALUE" in n and "temperature" in n for n in view.notes)
    summary = attach_uncertainty(view, predictions, reference=_reference(), resamples=100, test_resamples=100)
    assert summary.selected == 1 and summary.tested == 0 and math.isnan(chosen.p_vs_reference)
    assert any("--where temperature=VALUE" in n for n in summary.notes)


def test_strategies_omnibus_is_one_test_over_all_strategies():
    rng = np.random.default_rng(2)
    strategies = ("First", "Last", "Skip", "First-1", "Last-1")
    equal = {("rte", "cos", s): right_on(rng, 0.7)[None] for s in strategies}
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(table5_rows(equal))))
    cells = [c for b in view.blocks for c in b.cells.values() if c.config.get("knowledge") == "cos"]
    result = strategies_omnibus(cells, predictions_of(equal))
    correct = np.stack([(equal[("rte", "cos", s)][0] == GOLD) for s in strategies]).astype(float)
    expected = stats.friedman_over_examples(correct[[strategies.index(c.config["strategy"]) for c in cells]])
    assert result.method == "cochran" and result.p_value == pytest.approx(expected.p_value)


# --- seeds, the paper, degenerate -----------------------------------------------------------------------------


def test_several_seeds_get_a_t_interval_and_a_t_test_one_seed_is_run_to_run():
    rng = np.random.default_rng(4)
    values = {
        ("rte", "hidden_mse", "Last-1"): np.stack([right_on(rng, 0.7) for _ in range(3)]),
        ("rte", "cos", "First"): np.stack([right_on(rng, 0.72) for _ in range(3)]),
    }
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(table5_rows(values, seeds=3))))
    summary = attach_uncertainty(
        view, predictions_of(values, seeds=3), reference=_reference(), resamples=100, test_resamples=100
    )
    cell = view.blocks[0].cell("cos", Column("First"))
    scores = [float((r == GOLD).mean()) for r in values[("rte", "cos", "First")]]
    expected = stats.seed_t_interval(scores)
    assert (cell.ci_low, cell.ci_high) == pytest.approx((expected.low, expected.high))
    assert (cell.paper_low, cell.paper_high) == pytest.approx(stats.seed_prediction_interval(scores))
    assert cell.test_method == "t" and summary.run_level == 0
    assert not any("run-to-run" in n for n in summary.notes)
    text = render(view, "markdown")
    assert "method-level t-test over the seeds" in text and "run-to-run" not in text


def test_the_paper_is_judged_by_where_one_more_run_falls_and_one_seed_cannot_say():
    rows = [{"table": "5", "task": "rte", "knowledge": "cos", "strategy": "First", "value": 0.62}]
    ours = build_view(get_spec("5"), tidy_rows(rows))
    paper = build_view(get_spec("5"), tidy_rows([{**rows[0], "value": 0.64}]))
    cell = ours.blocks[0].cell("cos", Column("First"))
    cell.ci_low, cell.ci_high = 0.60, 0.66  # an example-level interval of one seed
    view = attach_paper(ours, paper)
    assert view.blocks[0].cell("cos", Column("First")).paper_inside is None
    assert any("one seed cannot say" in n for n in view.notes)


def test_a_cell_whose_interval_reaches_the_majority_class_is_flagged():
    rng = np.random.default_rng(5)
    values = {("rte", "hidden_mse", "Last-1"): right_on(rng, 0.8)[None], ("rte", "cos", "First"): None}
    near = np.where(np.arange(N) < 0.52 * N, GOLD, 1 - GOLD)  # 0.52 on a balanced set: above 0.5, not beyond
    values[("rte", "cos", "First")] = near[None]
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(table5_rows(values))))
    attach_uncertainty(
        view, predictions_of(values), reference=_reference(), resamples=500, test_resamples=100
    )
    flagged = view.blocks[0].cell("cos", Column("First"))
    assert flagged.ci_low <= 0.5 and any("majority class" in r for r in flagged.degenerate)
    assert not view.blocks[0].cell("hidden_mse", Column("Last-1")).degenerate


def test_mcnemar_agrees_with_scipys_binomtest():
    for a_only, discordant in ((0, 1), (3, 7), (5, 10), (40, 100), (1, 300)):
        a = np.zeros(discordant + 5, dtype=np.int64)
        gold = np.zeros_like(a)
        b = a.copy()
        b[:a_only] = 1  # b wrong where a is right
        a[a_only:discordant] = 1  # a wrong where b is right
        expected = scipy_stats.binomtest(a_only, discordant, 0.5).pvalue
        assert stats.mcnemar_test(gold, a, b).p_value == pytest.approx(expected, rel=1e-9)


def test_a_table_whose_cells_ran_several_seeds_says_how_many_seeds_a_point_needs(tmp_path):
    rng = np.random.default_rng(6)
    values = {
        ("rte", "hidden_mse", "Last-1"): np.stack([right_on(rng, 0.7) for _ in range(3)]),
        ("rte", "cos", "First"): np.stack([right_on(rng, 0.72) for _ in range(3)]),
    }
    tidy = aggregate_seeds(tidy_rows(table5_rows(values, seeds=3)))
    options = UncertaintyOptions(reference="knowledge=hidden_mse,strategy=Last-1", resamples=100)
    (view,) = build_report(
        tidy, "5", tmp_path, uncertainty=options, load=lambda *_: predictions_of(values, 3)
    ).views
    assert any(n.startswith("seeds needed on rte validation: seed SD") for n in view.notes)
