"""Two sweeps side by side (`kdgrid tables --sweep A --sweep B`, `kdgrid.analysis.sweep_compare`): the shared
cells with both means, the difference and its test from the sweep tables' one procedure (paired t over the same
seeds, Welch over other seeds, the run-to-run z-test with one seed), the correction, the cells only one ran, and
the refusals."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from kdgrid.analysis.frames import comparison_frame
from kdgrid.analysis.sweep_compare import SweepSource, compare_sweeps, parse_sources
from kdgrid.predictions import DevSetPredictions
from kdgrid.store import write_result
from tests.analysis.tables_testing import result, run_kdgrid

N = 200
GOLD = np.arange(N) % 2
FINGERPRINT = "c" * 64


def correct_on(share: float) -> np.ndarray:
    right = np.arange(N) < round(share * N)
    return np.where(right, GOLD, 1 - GOLD)


def run(best: float, **fields):
    """A done sst2 trial with accuracy ``best`` whose predictions agree with it."""
    outcome = {"validation": DevSetPredictions(GOLD, correct_on(best), correct_on(0.9), FINGERPRINT)}
    return dataclasses.replace(result(best, task="sst2", **fields), predictions=outcome)


def write(
    store: Path, sweep: str, cells: dict[float, tuple[float, ...]], first_seed: int = 0, **fields
) -> None:
    for lr, values in cells.items():
        for seed, value in enumerate(values, start=first_seed):
            write_result(store, run(value, lr=lr, seed=seed, **fields), sweep=sweep, study="main")


OLD = {1e-3: (0.700, 0.720, 0.710), 1e-2: (0.750, 0.760, 0.770)}
NEW = {1e-3: (0.730, 0.745, 0.750), 1e-1: (0.600, 0.610, 0.590)}
MORE = {1e-3: (0.690, 0.700, 0.705)}


def test_a_rerun_in_another_store_is_set_beside_the_original_paired_by_seed(tmp_path: Path, capsys) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write(old, "grid", OLD)
    write(new, "grid", NEW)
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "grid", "--sweep", f"grid@{new}", "--store", str(old),
                                "--format", "csv")  # fmt: skip
    assert code == 0, err
    lines = list(csv.DictReader(io.StringIO(out)))
    by_column = {line["column"]: line for line in lines if line["row"] == "lr=0.001"}
    assert set(by_column) == {"grid", f"grid@{new}", "difference", "p (raw)", "p (Holm)"}
    assert float(by_column["grid"]["value"]) == pytest.approx(np.mean(OLD[1e-3]))
    assert float(by_column[f"grid@{new}"]["value"]) == pytest.approx(np.mean(NEW[1e-3]))
    # the difference, new minus old, by the paired t-test over the per-seed differences, with its t interval
    d = np.array(NEW[1e-3]) - np.array(OLD[1e-3])
    half = scipy_stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    difference = by_column["difference"]
    assert float(difference["value"]) == pytest.approx(d.mean())
    assert (float(difference["ci_low"]), float(difference["ci_high"])) == pytest.approx(
        (d.mean() - half, d.mean() + half)
    )
    p = scipy_stats.ttest_rel(NEW[1e-3], OLD[1e-3]).pvalue
    assert float(difference["p_raw"]) == pytest.approx(p, rel=1e-5)
    assert difference["uncertainty"] == "seed-level" and difference["correction"] == "holm"
    assert float(difference["p_adjusted"]) == pytest.approx(p, rel=1e-5)  # one shared cell: a family of one
    assert int(difference["significant"]) == (p <= 0.05) and int(difference["direction"]) == 1
    # only the shared cell is laid out; the others are listed by side
    assert {line["row"] for line in lines} == {"lr=0.001"}
    code, out, _ = run_kdgrid(
        capsys, "tables", "--sweep", "grid", "--sweep", f"grid@{new}", "--store", str(old)
    )
    text = " ".join(out.split())
    assert "only in grid: 1 cell(s): task=sst2 · dev_set=validation · metric=accuracy · lr=0.01" in text
    assert f"only in grid@{new}: 1 cell(s): task=sst2 · dev_set=validation · metric=accuracy · lr=0.1" in text
    assert f"difference: grid@{new} minus grid over 1 shared cell(s)" in text


def test_two_sweeps_of_one_store_on_other_seeds_are_compared_by_welch_and_corrected_together(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    write(store, "grid", OLD)
    write(store, "more", {**MORE, 1e-2: (0.70, 0.71, 0.72)}, first_seed=3)
    built = compare_sweeps(*parse_sources(["grid", "more"], store))
    assert len(built.shared) == 2 and not built.only_first and not built.only_second
    [block] = built.view.blocks
    cells = {row: block.cells[(row, block.columns[2])] for row in block.rows}
    welch = scipy_stats.ttest_ind(MORE[1e-3], OLD[1e-3], equal_var=False).pvalue
    assert cells["lr=0.001"].p_raw == pytest.approx(welch, rel=1e-6)
    raw = [cells[row].p_raw for row in ("lr=0.001", "lr=0.01")]
    holm = sorted(raw)
    expected = {holm[0]: min(1.0, 2 * holm[0]), holm[1]: min(1.0, max(2 * holm[0], holm[1]))}
    for row in ("lr=0.001", "lr=0.01"):
        assert cells[row].p_vs_reference == pytest.approx(expected[cells[row].p_raw])
    assert cells["lr=0.01"].significant and cells["lr=0.01"].direction == -1  # 0.71 vs 0.76, tight seeds


def test_one_seed_a_side_is_compared_run_to_run_on_the_same_dev_examples(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "grid", {1e-3: (0.70,)})
    write(b, "grid", {1e-3: (0.80,)})
    built = compare_sweeps(
        SweepSource("grid", a, "a"), SweepSource("grid", b, "b"), resamples=200, test_resamples=500
    )
    [block] = built.view.blocks
    first, second, difference = (block.cells[(block.rows[0], c)] for c in block.columns[:3])
    assert first.uncertainty == second.uncertainty == difference.uncertainty == "run-to-run"
    assert first.has_interval and first.ci_low < 0.70 < first.ci_high
    assert difference.value == pytest.approx(0.10) and difference.test_method == "normal"
    assert (difference.ci_low > 0) == (difference.p_raw <= 0.05)
    off = compare_sweeps(SweepSource("grid", a, "a"), SweepSource("grid", b, "b"), intervals="off")
    assert any("1 difference(s) untested" in note for note in off.view.notes)


def test_what_a_comparison_cannot_do_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    write(store, "grid", OLD)
    write(store, "longer", OLD, epochs=5)
    base = ["tables", "--sweep", "grid", "--store", str(store)]
    for args, message in (
        (
            ["--sweep", "longer"],
            "share no cell (a cell: every setting but the seeds, on one dev set and metric); "
            "they differ in epochs (3 vs 5)",
        ),
        (["--sweep", "grid"], "--sweep grid given twice"),
        (["--sweep", "longer", "--rows", "lr"], "--rows lays out one sweep's table; two --sweep compare"),
        (["--sweep", "longer", "--sweep", "x"], "--sweep given 3 times (grid, longer, x)"),
        (["--sweep", "nothing"], "the store has no trials of sweep 'nothing'; its sweeps: grid, longer"),
        (["--sweep", "grid@"], "--sweep 'grid@': give NAME or NAME@STORE_DIR"),
    ):
        code, _, err = run_kdgrid(capsys, *base, *args)
        assert code == 2 and err.startswith("error: ") and message in " ".join(err.split()), (args, err)


def test_the_comparison_frame_is_the_commands_table_in_plain_columns(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write(old, "grid", OLD)
    write(new, "grid", NEW)
    frame = comparison_frame(["grid", f"grid@{new}"], old)
    assert len(frame) == 1 and frame["lr"].tolist() == ["0.001"]
    row = frame.iloc[0]
    assert row["first_value"] == pytest.approx(np.mean(OLD[1e-3]))
    assert row["second_value"] == pytest.approx(np.mean(NEW[1e-3]))
    assert row["difference"] == pytest.approx(row["second_value"] - row["first_value"])
    assert row["p_raw"] == pytest.approx(scipy_stats.ttest_rel(NEW[1e-3], OLD[1e-3]).pvalue, rel=1e-6)
    assert row["uncertainty"] == "seed-level" and row["mark"] == "▲" and row["first_n_seeds"] == 3
