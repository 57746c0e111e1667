"""`kdgrid tables --sweep NAME`: any sweep's own table (`kdgrid.analysis.sweep_tables`), on stores written with the
store's API, rows carrying per-example predictions (numbers checked against hand-computed values)."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest

from kdgrid.analysis import stats
from kdgrid.analysis.sweep_tables import choose_layout, field_label, sweep_table, trial_fields
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.predictions import DevSetPredictions
from kdgrid.store.membership import record_membership
from tests.analysis.tables_testing import result, run_kdgrid, write

N = 200
GOLD = np.arange(N) % 2
FINGERPRINT = "f" * 64
SWEEP = "my_study"


def correct_on(share: float, offset: int = 0) -> np.ndarray:
    """Predictions right on ``share`` of the examples (the first ones, shifted by ``offset``), wrong elsewhere."""
    right = (np.arange(N) - offset) % N < round(share * N)
    return np.where(right, GOLD, 1 - GOLD)


def run(student: np.ndarray, **fields):
    accuracy = float((student == GOLD).mean())
    outcome = {"validation": DevSetPredictions(GOLD, student, correct_on(0.9), FINGERPRINT)}
    return dataclasses.replace(result(accuracy, task="sst2", **fields), predictions=outcome)


# knowledge x lr, 2 seeds each: hidden_mse is right on 80% (seed 1: shifted), cos on 60%, at both lrs except cos at
# lr 0.01, which is right on 70%.
SHARES = {("hidden_mse", 1e-3): 0.8, ("hidden_mse", 1e-2): 0.8, ("cos", 1e-3): 0.6, ("cos", 1e-2): 0.7}


def trials():
    out = []
    for (knowledge, lr), share in SHARES.items():
        for seed in (0, 1):
            out.append(
                run(
                    correct_on(share, offset=seed * 5),
                    knowledge=(knowledge,),
                    strategy="Last",
                    lr=lr,
                    seed=seed,
                )
            )
    return out


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    made = trials()
    write(path, "main", *made, sweep=SWEEP)
    record_membership(path, SWEEP, {r.trial.trial_id: "main" for r in made})
    return path


def test_field_labels_and_trial_fields() -> None:
    assert field_label("lr", 1e-3) == "0.001" and field_label("alpha", 1.0) == "1"
    assert field_label("knowledge", ["mmd", "cos"]) == "cos+mmd" and field_label("knowledge", []) == ""
    assert field_label("init_from", None) == "" and field_label("flag", True) == "true"
    fields = trial_fields('{"v": 2, "seed": 3, "lr": 0.001, "options": {"data_seed": 3, "soft_t2": true}}')
    assert fields == {"lr": "0.001", "soft_t2": "true"}  # seeds (and the id's version) are never an axis


def test_layout_defaults_and_refusals() -> None:
    assert choose_layout(["knowledge", "lr", "alpha"]) == choose_layout(
        ["knowledge", "lr", "alpha"], None, None
    )
    layout = choose_layout(["knowledge", "lr", "alpha"])
    assert (layout.rows, layout.cols, layout.blocks) == (("knowledge",), ("lr",), ("alpha",))
    layout = choose_layout(["knowledge", "lr", "alpha"], rows="lr,alpha", cols="knowledge")
    assert (layout.rows, layout.cols, layout.blocks) == (("lr", "alpha"), ("knowledge",), ())
    with pytest.raises(
        ConfigError, match=r"--rows .epochs. is not an axis of this sweep; .*: knowledge, lr, alpha"
    ):
        choose_layout(["knowledge", "lr", "alpha"], rows="epochs")
    with pytest.raises(ConfigError, match="--cols takes one axis"):
        choose_layout(["knowledge", "lr", "alpha"], cols="lr,alpha")
    with pytest.raises(ConfigError, match="named twice"):
        choose_layout(["knowledge", "lr"], rows="lr", cols="lr")


def test_a_sweep_of_any_name_gets_its_table_with_intervals_tests_and_marginals(store: Path) -> None:
    built = sweep_table(store, SWEEP, resamples=200, test_resamples=500)
    view = built.view
    assert (built.layout.rows, built.layout.cols) == (("knowledge",), ("lr",))
    main = view.blocks[0]
    assert main.rows == ["hidden_mse", "cos"]  # the paper's order of knowledge types
    assert [c.label for c in main.columns] == ["0.001", "0.01"]
    low_lr = next(c for c in main.columns if c.label == "0.001")
    hidden, cos = main.cell("hidden_mse", low_lr), main.cell("cos", low_lr)
    assert hidden.value == pytest.approx(0.8) and hidden.n_seeds == 2 and hidden.std == 0.0
    assert hidden.ci_low <= 0.8 <= hidden.ci_high and hidden.has_interval
    # no soft-labels-only cell in this sweep: the reference is the first cell (first value of each axis)
    assert hidden.is_reference and built.reference.label == "knowledge=hidden_mse, lr=0.001"
    assert cos.significant and cos.direction == -1 and cos.p_vs_reference <= 0.05
    # marginals: knowledge averaged over lr, lr averaged over knowledge
    by_knowledge = view.block(f"{main.title} — knowledge, mean over lr")
    mean = by_knowledge.cell("cos", by_knowledge.columns[0])
    assert mean.value == pytest.approx((0.6 + 0.7) / 2) and mean.uncertainty == "seed-level"
    # both seeds score alike in every cell: no seed spread, so the seed-level interval is the point itself
    assert mean.ci_low == pytest.approx(0.65) and mean.ci_high == pytest.approx(0.65)
    by_lr = view.block(f"{main.title} — lr, mean over knowledge")
    assert by_lr.cell("0.01", by_lr.columns[0]).value == pytest.approx((0.8 + 0.7) / 2)


def test_a_one_seed_marginal_interval_is_the_mean_of_its_cells_replicates(tmp_path: Path) -> None:
    # One seed a cell: run to run. Hand-computed: the same example resamples as every cell (seed 0), the mean over
    # the cells' replicate scores.
    from kdgrid.analysis.replicate_bank import ReplicateBank

    path = tmp_path / "store"
    made = [r for r in trials() if r.trial.seed == 0]
    write(path, "main", *made, sweep=SWEEP)
    built = sweep_table(path, SWEEP, resamples=300, test_resamples=300)
    block = built.view.block(f"{built.view.blocks[0].title} — knowledge, mean over lr")
    got = block.cell("hidden_mse", block.columns[0])
    bank = ReplicateBank(300, 0)
    runs = [correct_on(0.8)] * 2  # hidden_mse at both lrs, seed 0
    for k, student in enumerate(runs):
        bank.register("accuracy", FINGERPRINT, GOLD, k, student)
    replicates, _, _ = bank.replicates("accuracy", FINGERPRINT, tuple(range(2)))
    expected = stats.interval_from_replicates(replicates.mean(axis=1), 0.8, stats.DEFAULT_CONFIDENCE)
    assert (got.ci_low, got.ci_high) == pytest.approx((expected.low, expected.high))
    assert got.uncertainty == "run-to-run" and any(n.startswith("uncertainty") and "run-to-run" in n
                                                   for n in built.view.notes)  # fmt: skip


def test_pairs_are_holm_adjusted_differences_of_the_marginal_means(store: Path) -> None:
    built = sweep_table(store, SWEEP, resamples=200, test_resamples=500, pairs=True)
    title = built.view.blocks[0].title
    pairs = built.view.block(f"{title} — knowledge, pairwise")
    row = "hidden_mse vs cos"
    difference = pairs.cell(row, pairs.column("difference"))
    assert difference.value == pytest.approx(0.8 - 0.65)
    assert difference.significant and difference.direction == 1
    p = pairs.cell(row, pairs.column("p (Holm)")).value
    raw = pairs.cell(row, pairs.column("p (raw)")).value
    # the seeds agree exactly (no seed spread): the paired t-test over seeds gives p 0 for a nonzero difference
    assert p == difference.p_vs_reference and raw == difference.p_raw and 0 <= raw <= p <= 0.05
    lr_pairs = built.view.block(f"{title} — lr, pairwise")
    assert lr_pairs.cell("0.001 vs 0.01", lr_pairs.column("difference")).value == pytest.approx(0.7 - 0.75)
    assert any("Holm-adjusted" in note and "over the 2 pairs" in note for note in built.view.notes)


def test_reference_and_axes_are_checked_against_the_sweep(store: Path) -> None:
    built = sweep_table(store, SWEEP, reference="knowledge=cos,lr=0.01", resamples=100, test_resamples=100)
    main = built.view.blocks[0]
    assert main.cell("cos", main.column("0.01")).is_reference
    with pytest.raises(
        ConfigError, match=r"--reference takes AXIS=VALUE.*axes among knowledge, lr; got 'strategy=Last'"
    ):
        sweep_table(store, SWEEP, reference="strategy=Last")
    with pytest.raises(
        ConfigError, match="--reference knowledge=pkd: knowledge takes the values hidden_mse, cos"
    ):
        sweep_table(store, SWEEP, reference="knowledge=pkd")
    with pytest.raises(
        ConfigError, match=r"--cols .temprature. is not an axis of this sweep; .*: knowledge, lr"
    ):
        sweep_table(store, SWEEP, cols="temprature")
    with pytest.raises(KdgridError, match="no trials of sweep 'nope'; its sweeps: my_study"):
        sweep_table(store, "nope")


def test_other_varying_fields_become_blocks_so_a_cell_only_averages_seeds(tmp_path: Path) -> None:
    path = tmp_path / "store"
    made = [
        run(correct_on(share), knowledge=(k,), strategy="Last", lr=lr, alpha=alpha)
        for k, share in (("hidden_mse", 0.8), ("cos", 0.6))
        for lr in (1e-3, 1e-2)
        for alpha in (0.1, 0.5)
    ]
    write(path, "main", *made, sweep="three_axes")
    view = sweep_table(path, "three_axes", resamples=50, test_resamples=50).view
    # axes in Trial's field order: knowledge (rows), alpha (columns), lr (blocks)
    assert [b.title for b in view.blocks[:2]] == ["sst2 · lr=0.001", "sst2 · lr=0.01"]
    assert all(cell.n_seeds == 1 for cell in view.blocks[0].cells.values())


def test_the_cli_table_of_a_renamed_sweep_as_csv_and_terminal(store: Path, capsys) -> None:
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--format", "csv", "--resamples", "200",
        "--test-resamples", "500", "--pairs",
    )  # fmt: skip
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    cell = next(r for r in rows if r["row"] == "cos" and r["column"] == "0.001")
    assert cell["table"] == SWEEP and cell["value"] == "0.6" and cell["significant"] == "1"
    assert (
        float(cell["ci_low"]) <= 0.6 <= float(cell["ci_high"])
    )  # two seeds of equal score: a t interval of width 0
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--test-resamples", "500"
    )
    assert code == 0, err
    assert "0.8000±0.0000 ref" in out and "0.6000±0.0000 ▼" in out and "mean over lr" in out


def test_a_field_every_done_trial_shares_is_laid_out_as_one_column(store: Path) -> None:
    """A sweep part-way through (one task of two done so far) still gets its table by task: a field asked for that
    the done trials share is an axis of one value, not refused as a mistake."""
    built = sweep_table(store, SWEEP, rows="knowledge", cols="task", resamples=100, test_resamples=100)
    assert (built.layout.rows, built.layout.cols, built.layout.blocks) == (("knowledge",), ("task",), ("lr",))
    for block in built.view.blocks:
        assert [column.label for column in block.columns] == ["sst2"]


def test_the_cli_refuses_what_a_sweep_table_cannot_do(store: Path, capsys) -> None:
    for args, message in (
        (["--rows", "lr"], "--rows lays out a sweep's own table: give it with --sweep NAME"),
        (["--sweep", SWEEP, "--compare", "paper"], "has no published numbers"),
        (
            ["--sweep", SWEEP, "--rows", "epohcs"],
            "its axes (the fields that vary between its trials): knowledge, lr",
        ),
        (["5", "--sweep", SWEEP], "not both"),
    ):
        code, _, err = run_kdgrid(capsys, "tables", "--store", str(store), *args)
        assert code == 2 and message in " ".join(err.split()), err


def test_intervals_off_leaves_cells_without_interval(store: Path) -> None:
    view = sweep_table(store, SWEEP, intervals="off").view
    cell = view.blocks[0].cells[next(iter(view.blocks[0].cells))]
    assert not cell.has_interval and math.isnan(cell.p_vs_reference)


def test_differences_from_the_reference_and_the_forest_plot(store: Path, tmp_path: Path, capsys) -> None:
    built = sweep_table(store, SWEEP, resamples=300, test_resamples=300)
    by_label = {d.label: d for d in built.differences}
    assert set(by_label) == {"hidden_mse · 0.01", "cos · 0.001", "cos · 0.01"}  # the reference is not plotted
    worse = by_label["cos · 0.001"]
    assert worse.difference == pytest.approx(0.6 - 0.8) and worse.high < 0
    assert (worse.low, worse.high) == pytest.approx((-0.2, -0.2))  # seed level: no seed spread, a point
    assert worse.significant and worse.direction == -1 and not worse.degenerate
    same = by_label["hidden_mse · 0.01"]  # the same predictions as the reference: no spread at all
    assert (same.difference, same.low, same.high) == (0.0, 0.0, 0.0)
    out = tmp_path / "figures"
    code, printed, err = run_kdgrid(
        capsys, "figures", "--sweep", SWEEP, "--store", str(store), "--out", str(out)
    )
    assert code == 0, err
    files = sorted(p.name for p in out.iterdir())
    assert (
        files
        == [
            "my-study_forest_1_sst2.pdf",
            "my-study_forest_1_sst2.png",
            "my-study_heatmap_1_sst2.pdf",
            "my-study_heatmap_1_sst2.png",
            "my-study_seedcurves_1_cells-1-to-4.pdf",  # each cell's seeds overlaid (analysis.seed_curves)
            "my-study_seedcurves_1_cells-1-to-4.png",
        ]
        and "6 file(s)" in printed
    )
    for png in (files[1], files[3], files[5]):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (store / "figures").exists()


def test_a_store_without_paper_tables_points_at_its_sweeps(store: Path, capsys) -> None:
    code, _, err = run_kdgrid(capsys, "tables", "--store", str(store))
    text = " ".join(err.split())
    assert code == 2 and "holds no trials of any table" in text
    assert "Any sweep gets its own table: kdgrid tables --sweep NAME (this store's sweeps: my_study)" in text


def test_the_report_shows_a_users_own_sweep_as_a_table(store: Path, tmp_path: Path) -> None:
    """`kdgrid report` of a store whose sweep declares no paper table: the sweep's table (as `tables --sweep` lays
    it out) is on the Tables page, its numbers linked to their trials, and the overview's findings read it."""
    from kdgrid.report.build import ReportWriter

    out = tmp_path / "report"
    update = ReportWriter(store, out, figures=False).update()
    assert update.tables == 1
    tables = (out / "tables.html").read_text()
    assert f'id="table-{SWEEP}"' in tables and "hidden_mse" in tables and "0.8000" in tables
    assert tables.count('href="trials/') >= 8  # every run of every cell
    overview = (out / "index.html").read_text()
    assert "<h2>Findings</h2>" in overview and f"table-{SWEEP}" in overview


@pytest.mark.slow  # Almost Stochastic Order (deepsig): seconds a comparison
def test_the_method_summary_of_a_sweep_through_the_cli(store: Path, capsys) -> None:
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--format", "markdown",
        "--summary", "knowledge=cos", "--resamples", "200", "--test-resamples", "200",
    )  # fmt: skip
    assert code == 0, err
    text = " ".join(out.split())
    assert "method summary over tasks along knowledge" in text
    # hidden_mse: 0.8 on all 4 runs (two lrs, two seeds); cos: 0.6 at lr 0.001, 0.7 at lr 0.01
    assert "knowledge=hidden_mse: 4 runs in 1 stratum(s); mean 0.8000 [0.8000, 0.8000]" in text
    assert "knowledge=cos: 4 runs in 1 stratum(s); mean 0.6500" in text and "(reference)" in text
    assert "P(improvement) 1.000" in text and "ASO ε_min" in text  # every hidden_mse run beats every cos run
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--summary", "nope"
    )
    assert code == 2 and "'nope' is not an axis" in err
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--summary", "lr=7"
    )
    assert code == 2 and "'7' is not a value of lr" in err
