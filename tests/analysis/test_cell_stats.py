"""Intervals, paired tests against a reference and Holm over a table, cell by cell (`kdgrid.analysis.cell_stats`), on
hand-made cells whose predictions are built directly, and through `build_report` on a store's real rows."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
import pytest

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import Reference, attach_uncertainty, parse_reference
from kdgrid.analysis.render import BETTER_MARK, REFERENCE_MARK, WORSE_MARK, render
from kdgrid.analysis.significant_conclusions import significant_claim_notes
from kdgrid.analysis.tables import HARD_ONLY, SOFT_ONLY, Column, TableView, build_view, get_spec
from kdgrid.analysis.tables_report import UncertaintyOptions, build_report, load_tidy
from kdgrid.analysis.tidy import aggregate_seeds
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.predictions import DevSetPredictions, TrialPredictions
from kdgrid.store import read_store
from tests.analysis.tables_testing import result, tidy_rows, write

N = 200
GOLD = np.arange(N) % 2
FINGERPRINT = "f" * 64
RESAMPLES = 1000  # the interval's own default: the interval assertions compare with `stats` at the same count
TEST_RESAMPLES = 2000  # enough for "flipping every prediction is significant" after Holm over 3 cells


def correct_on(share: float, *, offset: int = 0) -> np.ndarray:
    """Predictions right on the first ``share`` of the examples (rotated by ``offset``), wrong elsewhere."""
    right = np.roll(np.arange(N) < round(share * N), offset)
    return np.where(right, GOLD, 1 - GOLD)


def outcome(student: np.ndarray, fingerprint: str = FINGERPRINT) -> TrialPredictions:
    return {"validation": DevSetPredictions(GOLD, student, None, fingerprint)}


def demo_row(
    row_id: str, *, knowledge: str = "", strategy: str = "", soft_weight: float = 1.0, seed: int = 0
):
    return {
        "table": "demo",
        "task": "polarity",
        "student": "bert-tiny",
        "knowledge": knowledge,
        "strategy": strategy,
        "soft_weight": soft_weight,
        "value": math.nan,  # set from the predictions below
        "row_id": row_id,
        "seed": seed,
    }


def demo_view(students: dict[str, np.ndarray], rows: list[dict]) -> TableView:
    for row in rows:
        row["value"] = float((students[row["row_id"]] == GOLD).mean())
    return build_view(get_spec("demo"), aggregate_seeds(tidy_rows(rows)))


def attach(view: TableView, predictions: dict[str, TrialPredictions], **kwargs):
    kwargs.setdefault("resamples", RESAMPLES)
    kwargs.setdefault("test_resamples", TEST_RESAMPLES)
    return attach_uncertainty(view, predictions, **kwargs)


@pytest.fixture
def three_against_soft():
    """Soft labels only (80% right); cos·First identical to it; pkd·First flipping every prediction of it;
    mmd·First differing from it on 2 examples."""
    reference = correct_on(0.8)
    close = reference.copy()
    close[:2] = 1 - close[:2]
    students = {"soft": reference, "same": reference.copy(), "flip": 1 - reference, "close": close}
    rows = [
        demo_row("soft"),
        demo_row("same", knowledge="cos", strategy="First"),
        demo_row("flip", knowledge="pkd", strategy="First"),
        demo_row("close", knowledge="mmd", strategy="First"),
    ]
    view = demo_view(students, rows)
    return view, {row_id: outcome(s) for row_id, s in students.items()}, students


def cell(view: TableView, row: str, column: str = "First"):
    for block in view.blocks:
        if row in block.rows and any(c.label == column for c in block.columns):
            return block.cell(row, block.column(column))
    raise KeyError(row)


def test_one_seed_cell_gets_the_plain_bootstrap_interval(three_against_soft):
    view, predictions, students = three_against_soft
    attach(view, predictions)
    expected = stats.bootstrap_interval("accuracy", GOLD, students["soft"], resamples=RESAMPLES)
    soft = cell(view, SOFT_ONLY, "score")
    assert (soft.ci_low, soft.ci_high) == (expected.low, expected.high)
    # the binomial case: 160 of 200 right, standard error sqrt(.8 * .2 / 200) = 0.0283, 95% about +-0.055
    assert soft.ci_low == pytest.approx(0.8 - 1.96 * math.sqrt(0.8 * 0.2 / N), abs=0.01)
    assert soft.ci_high == pytest.approx(0.8 + 1.96 * math.sqrt(0.8 * 0.2 / N), abs=0.01)


def test_identical_is_not_significant_flipped_is_and_holm_runs_over_the_table(three_against_soft):
    view, predictions, students = three_against_soft
    summary = attach(view, predictions, test="bootstrap")
    same, flip, close = cell(view, "cos"), cell(view, "pkd"), cell(view, "mmd")
    soft = cell(view, SOFT_ONLY, "score")
    assert soft.is_reference and math.isnan(soft.p_vs_reference) and not soft.significant
    assert same.p_vs_reference == 1.0 and not same.significant and same.direction == 0
    assert flip.significant and flip.direction == -1
    assert not close.significant and close.direction == -1
    raw = [
        stats.paired_bootstrap_test(
            "accuracy", GOLD, students[name], students["soft"], resamples=TEST_RESAMPLES
        ).p_value
        for name in ("same", "flip", "close")
    ]
    assert [same.p_vs_reference, flip.p_vs_reference, close.p_vs_reference] == stats.holm_bonferroni(raw)
    assert flip.p_vs_reference == pytest.approx(3 * 2 / (TEST_RESAMPLES + 1))  # Holm: 3 x the floor
    assert summary.tested == 3 and summary.with_interval == 4
    text = render(view, "markdown")
    assert f"0.2000 {WORSE_MARK}" in text and f"0.8000 {REFERENCE_MARK}" in text and BETTER_MARK not in text


def test_the_hard_label_baseline_is_compared_with_soft_labels_too():
    students = {"soft": correct_on(0.6), "hard": correct_on(0.95)}
    view = demo_view(students, [demo_row("soft"), demo_row("hard", soft_weight=0.0)])
    attach(view, {k: outcome(v) for k, v in students.items()})
    hard = cell(view, HARD_ONLY, "score")
    assert hard.significant and hard.direction == 1 and BETTER_MARK in render(view, "markdown")


def test_several_seeds_get_the_seed_and_example_interval():
    students = {f"s{k}": correct_on(0.7 + 0.05 * k, offset=7 * k) for k in range(3)}
    rows = [demo_row(f"s{k}", seed=k) for k in range(3)]
    view = demo_view(students, rows)
    attach(view, {k: outcome(v) for k, v in students.items()}, test="bootstrap")
    soft = cell(view, SOFT_ONLY, "score")
    runs = np.stack([students[f"s{k}"] for k in range(3)])
    expected = stats.seed_bootstrap_interval("accuracy", GOLD, runs, resamples=RESAMPLES)
    assert soft.n_seeds == 3 and soft.seeds == (0.0, 1.0, 2.0)
    assert (soft.ci_low, soft.ci_high) == (expected.low, expected.high)
    assert soft.value == pytest.approx(expected.mean) and soft.std == pytest.approx(expected.std)


def test_two_healthy_seeds_far_apart_are_not_degenerate_a_seeded_mean_at_chance_is():
    students = {"s0": correct_on(0.70), "s1": correct_on(0.74), "c0": correct_on(0.5), "c1": correct_on(0.49)}
    rows = [demo_row("s0", seed=0), demo_row("s1", seed=1),
            demo_row("c0", knowledge="cos", strategy="First", seed=0),
            demo_row("c1", knowledge="cos", strategy="First", seed=1)]  # fmt: skip
    view = demo_view(students, rows)
    attach(view, {k: outcome(v) for k, v in students.items()})
    healthy = cell(view, SOFT_ONLY, "score")
    assert healthy.ci_low < 0.5 and not healthy.degenerate  # a t interval with 1 df reaches chance: no reason
    assert cell(view, "cos").degenerate == ("mean at or below the majority class's accuracy 0.5000",)


def test_seeds_are_paired_only_when_both_cells_ran_the_same_seeds():
    base = {f"r{k}": correct_on(0.7, offset=11 * k) for k in range(2)}
    other = {f"c{k}": correct_on(0.72, offset=11 * k) for k in range(2)}
    students = {**base, **other}
    paired = [demo_row(f"r{k}", seed=k) for k in range(2)]
    paired += [demo_row(f"c{k}", knowledge="cos", strategy="First", seed=k) for k in range(2)]
    unpaired = [demo_row(f"r{k}", seed=k) for k in range(2)]
    unpaired += [demo_row(f"c{k}", knowledge="cos", strategy="First", seed=k + 5) for k in range(2)]
    predictions = {k: outcome(v) for k, v in students.items()}
    runs_a, runs_b = np.stack(list(other.values())), np.stack(list(base.values()))
    for rows, pair in ((paired, True), (unpaired, False)):
        view = demo_view(students, rows)
        attach(view, predictions, test="bootstrap")
        expected = stats.paired_bootstrap_test(
            "accuracy", GOLD, runs_a, runs_b, resamples=TEST_RESAMPLES, pair_seeds=pair
        )
        assert cell(view, "cos").p_vs_reference == expected.p_value  # one test: Holm leaves it as it is


def test_cells_without_predictions_have_no_interval_and_say_why(three_against_soft):
    view, predictions, _ = three_against_soft
    del predictions["flip"]
    summary = attach(view, predictions)
    flip = cell(view, "pkd")
    assert math.isnan(flip.ci_low) and math.isnan(flip.p_vs_reference) and not flip.significant
    assert summary.without_predictions == 1 and any("no interval" in note for note in summary.notes)
    assert render(view, "markdown")  # renders with a missing interval


def test_a_cell_and_its_reference_on_other_examples_are_refused(three_against_soft):
    view, predictions, students = three_against_soft
    predictions["same"] = outcome(students["same"], fingerprint="0" * 64)
    with pytest.raises(ConfigError, match="scored different dev examples"):
        attach(view, predictions)


def test_an_explicit_reference_selects_its_cell_and_one_that_does_not_exist_is_refused(three_against_soft):
    view, predictions, _ = three_against_soft
    attach(view, predictions, reference=parse_reference("knowledge=pkd,strategy=First"))
    assert cell(view, "pkd").is_reference
    assert cell(view, "cos").direction == 1 and cell(view, "cos").significant
    with pytest.raises(ConfigError, match="no cell matching --reference knowledge=nope"):
        attach(view, predictions, reference=parse_reference("knowledge=nope"))
    with pytest.raises(ConfigError, match="matches 3 cells"):
        attach(view, predictions, reference=parse_reference("strategy=First"))
    with pytest.raises(ConfigError, match="FIELD=VALUE"):
        parse_reference("colour=blue")
    assert Reference().label == "soft labels only"


def test_csv_carries_the_uncertainty_columns(three_against_soft):
    view, predictions, _ = three_against_soft
    attach(view, predictions)
    rows = list(csv.DictReader(io.StringIO(render(view, "csv"))))
    wanted = {
        "value",
        "ci_low",
        "ci_high",
        "n_seeds",
        "p_vs_reference",
        "significant",
        "direction",
        "degenerate",
    }
    assert wanted <= set(rows[0])
    flip = next(r for r in rows if r["row"] == "pkd" and r["column"] == "First")
    assert flip["significant"] == "1" and flip["direction"] == "-1"
    assert float(flip["ci_low"]) <= 0.2 <= float(flip["ci_high"]) and float(flip["p_vs_reference"]) < 0.05


def test_degenerate_reasons_are_marked_beside_the_number_and_explained():
    rows = [demo_row("soft"), demo_row("flip", knowledge="pkd", strategy="First")]
    rows[1]["degenerate"] = ("constant predictions",)
    view = demo_view({"soft": correct_on(0.8), "flip": np.zeros(N, dtype=np.int64)}, rows)
    assert cell(view, "pkd").degenerate == ("constant predictions",)
    text = render(view, "markdown")
    assert "0.5000 †" in text and "†: degenerate run(s) in 1 cell(s): constant predictions" in text


# --- through build_report, on a store's rows -------------------------------------------------------------------


def store_with_demo(tmp_path: Path) -> tuple[Path, dict[str, TrialPredictions]]:
    """A demo store (soft labels only, cos·First, pkd·First) and predictions for its rows, built directly."""
    store = tmp_path / "store"
    students = {
        (): correct_on(0.8),
        ("cos",): correct_on(0.8),
        ("pkd",): 1 - correct_on(0.8),
    }
    for knowledge, student in students.items():
        accuracy = float((student == GOLD).mean())
        fields = {"knowledge": knowledge, "strategy": "First"} if knowledge else {"soft_weight": 1.0}
        write(store, "demo", result(accuracy, task="polarity", student="bert-tiny", **fields))
    frame = read_store(store)
    predictions = {
        row.row_id: outcome(students[tuple(row.knowledge)]) for row in frame.itertuples(index=False)
    }
    return store, predictions


def test_build_report_marks_the_demo_from_the_stores_rows(tmp_path):
    store, predictions = store_with_demo(tmp_path)
    options = UncertaintyOptions(resamples=RESAMPLES, test_resamples=TEST_RESAMPLES)
    (view,) = build_report(
        load_tidy(store), "demo", store, uncertainty=options, load=lambda _s, _ids: predictions
    ).views
    main = next(b for b in view.blocks if "cos" in b.rows)
    assert main.cell("pkd", Column("First")).significant and main.cell("pkd", Column("First")).direction == -1
    assert main.cell("cos", Column("First")).p_vs_reference == 1.0
    assert any("bootstrap interval" in note for note in view.notes)


def test_intervals_on_of_a_store_without_predictions_are_refused(tmp_path):
    store, _ = store_with_demo(tmp_path)
    with pytest.raises(KdgridError, match="row schema version 1"):
        build_report(
            load_tidy(store),
            "demo",
            store,
            uncertainty=UncertaintyOptions(intervals="on"),
            load=lambda *_: {},
        )
    (view,) = build_report(load_tidy(store), "demo", store, load=lambda *_: {}).views  # auto: plain numbers
    assert all(not c.has_interval for b in view.blocks for c in b.cells.values())


# --- the derived claims, counting only significant differences -------------------------------------------------


def match_view(table: str, students: dict[tuple[str, str], np.ndarray]) -> TableView:
    rows = [
        {
            "table": table,
            "task": "rte",
            "student": "bert-tiny",
            "knowledge": knowledge,
            "strategy": strategy,
            "row_id": f"{table}-{knowledge}-{strategy}",
            "value": float((student == GOLD).mean()),
            "seed": 0,
        }
        for (knowledge, strategy), student in students.items()
    ]
    return build_view(get_spec(table), aggregate_seeds(tidy_rows(rows)))


def test_claims_count_only_significant_differences():
    strong, weak = correct_on(0.9), correct_on(0.5)
    nearly = correct_on(0.9)
    nearly[0] = 1 - nearly[0]
    table5 = {
        ("cos", "Last-1"): strong,
        ("cos", "First"): weak,
        ("mmd", "Last-1"): strong,
        ("mmd", "First"): nearly,
    }
    table8 = {
        ("cos", "Last-1"): weak,
        ("cos", "First"): weak,
        ("mmd", "Last-1"): strong,
        ("mmd", "First"): nearly,
    }
    predictions = {
        f"{table}-{k}-{s}": outcome(student)
        for table, students in (("5", table5), ("8", table8))
        for (k, s), student in students.items()
    }
    plain, weighted = match_view("5", table5), match_view("8", table8)
    notes5 = significant_claim_notes("5", plain, predictions, resamples=TEST_RESAMPLES)
    # one condition: Last-1's best (0.9) against First's best (0.895): within noise
    assert (
        "beats every other strategy's best in 0 of 1 conditions" in notes5[0]
        and "1 within noise" in notes5[0]
    )
    # cos: 0.9 vs 0.5 differs; mmd: 0.9 vs 0.895 does not
    assert "differ in 1 of 2 (condition, knowledge type) rows; 1 within noise" in notes5[1]
    # one seed a cell: the counts are run-to-run, and say so
    assert all(note.startswith("beyond run-to-run noise (one seed: dev examples resampled") for note in notes5)
    notes8 = significant_claim_notes("8", weighted, predictions, table5=plain, resamples=TEST_RESAMPLES)
    assert notes8 == [notes8[0]] and "0 better, 1 worse, 3 within noise" in notes8[0]
