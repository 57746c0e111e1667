"""A sweep's own table holds to one seed-level procedure (`kdgrid.analysis.seed_level`,
`kdgrid.analysis.sweep_stats`) and honours or refuses every option: hand-computed t intervals and tests, the
last epoch's numbers with `--kind last`, the correction asked for, a reference per slice and a crossover warning,
degenerate marks from the cell's mean, seeds needed for the test used, raw and adjusted p in the CSV."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from kdgrid.analysis import stats
from kdgrid.analysis.seed_level import difference_estimate, seed_scores
from kdgrid.analysis.seed_power import paired_t_power, seeds_needed_paired
from kdgrid.analysis.sweep_tables import sweep_table
from kdgrid.predictions import DevSetPredictions
from tests.analysis.tables_testing import result, run_kdgrid, write

N = 200
GOLD = np.arange(N) % 2  # balanced: the majority class's accuracy is 0.5
FINGERPRINT = "e" * 64


def correct_on(share: float) -> np.ndarray:
    right = np.arange(N) < round(share * N)
    return np.where(right, GOLD, 1 - GOLD)


def run(best: float, last: float | None = None, **fields):
    """A done sst2 trial with best-epoch accuracy ``best`` (its predictions agree) and last-epoch ``last``."""
    outcome = {"validation": DevSetPredictions(GOLD, correct_on(best), correct_on(0.9), FINGERPRINT)}
    made = result(best, task="sst2", last=last, **fields)
    return dataclasses.replace(made, predictions=outcome)


def store_of(tmp_path: Path, sweep: str, made: list) -> Path:
    path = tmp_path / sweep
    write(path, "main", *made, sweep=sweep)
    return path


# --- the procedure, by hand ------------------------------------------------------------------------------------


def test_a_paired_difference_is_the_t_test_over_seed_differences_and_its_interval_agrees() -> None:
    a = seed_scores([0, 1, 2], [0.75, 0.78, 0.79])
    b = seed_scores([2, 0, 1], [0.74, 0.70, 0.72])  # seed order does not matter: paired by seed
    got = difference_estimate(a, b)
    d = np.array([0.05, 0.06, 0.05])
    se = d.std(ddof=1) / math.sqrt(3)
    half = scipy_stats.t.ppf(0.975, 2) * se
    assert got.method == "paired t" and got.value == pytest.approx(d.mean())
    assert (got.low, got.high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert got.p == pytest.approx(stats.seed_t_test(a.scores, b.scores, paired=True).p_value, rel=1e-9)
    welch = difference_estimate(a, seed_scores([3, 4, 5], [0.70, 0.72, 0.74]))
    assert welch.method == "Welch t"
    assert welch.p == pytest.approx(
        stats.seed_t_test(a.scores, np.array([0.70, 0.72, 0.74]), paired=False).p_value, rel=1e-9
    )
    assert welch.excludes_zero == (welch.p <= 0.05)


def test_seeds_needed_is_a_direct_power_computation_of_the_paired_corrected_test() -> None:
    # the audit's numbers: seed SD 4.4 points, independent seeds (difference SD √2 x 4.4), 1 point, 80% power
    sd = math.sqrt(2) * 0.044
    for family, expected in ((4, 435), (49, 665)):
        needed = seeds_needed_paired(sd, 0.01, 0.05 / family, 0.8)
        assert needed == expected
        df = needed - 1
        critical = scipy_stats.t.ppf(1 - 0.05 / family / 2, df)
        noncentrality = 0.01 / (sd / math.sqrt(needed))
        direct = scipy_stats.nct.sf(critical, df, noncentrality) + scipy_stats.nct.cdf(
            -critical, df, noncentrality
        )
        assert direct >= 0.8 > paired_t_power(needed - 1, sd, 0.01, 0.05 / family)
    # a small seed SD: few seeds, and SciPy's far tail (NaN there) never turns the answer into hundreds
    needed = seeds_needed_paired(0.0054, 0.01, 0.05, 0.8)
    upper = [
        scipy_stats.nct.sf(scipy_stats.t.ppf(0.975, n - 1), n - 1, 0.01 / (0.0054 / math.sqrt(n)))
        for n in (4, 5)
    ]
    assert needed == 5 and upper[0] < 0.8 <= upper[1]
    # Monte Carlo check of the power formula itself at a small size
    rng = np.random.default_rng(0)
    draws = rng.normal(0.01, 0.01, size=(20_000, 6))
    t = draws.mean(axis=1) / (draws.std(axis=1, ddof=1) / math.sqrt(6))
    simulated = float(np.mean(np.abs(t) >= scipy_stats.t.ppf(1 - 0.0125 / 2, 5)))
    assert simulated == pytest.approx(paired_t_power(6, 0.01, 0.01, 0.0125), abs=0.01)


def test_the_table_prints_the_seeds_its_own_test_needs(tmp_path: Path) -> None:
    made = [run(v, lr=lr, seed=s) for lr, values in ((1e-3, (0.70, 0.72, 0.74)), (1e-2, (0.71, 0.70, 0.76)))
            for s, v in enumerate(values)]  # fmt: skip
    built = sweep_table(store_of(tmp_path, "power", made), "power", resamples=100, test_resamples=100)
    note = next(n for n in built.view.notes if n.startswith("seeds needed"))
    sd = float(np.std(np.array([0.71, 0.70, 0.76]) - np.array([0.70, 0.72, 0.74]), ddof=1))
    expected = seeds_needed_paired(sd, 0.01, 0.05 / 1, 0.8)
    assert f"you need {expected} seeds per cell" in note and f"{sd:.4f}" in note and "family of 1" in note


# --- options honoured or refused -------------------------------------------------------------------------------


def test_kind_last_gives_the_last_epochs_values_intervals_and_tests_never_the_best_ones(
    tmp_path: Path, capsys
) -> None:
    made = [
        run(0.80, last=0.60, lr=1e-3, seed=0),
        run(0.82, last=0.62, lr=1e-3, seed=1),
        run(0.90, last=0.50, lr=1e-2, seed=0),
        run(0.92, last=0.54, lr=1e-2, seed=1),
    ]
    path = store_of(tmp_path, "epochs", made)
    built = sweep_table(path, "epochs", kind="last", resamples=100, test_resamples=100)
    main = built.view.blocks[0]
    low_lr = next(c for c in main.cells.values() if c.config["lr"] == "0.001")
    half = scipy_stats.t.ppf(0.975, 1) * np.std([0.60, 0.62], ddof=1) / math.sqrt(2)
    assert low_lr.value == pytest.approx(0.61)
    assert (low_lr.ci_low, low_lr.ci_high) == pytest.approx((0.61 - half, 0.61 + half))
    high_lr = next(c for c in main.cells.values() if c.config["lr"] == "0.01")
    assert high_lr.p_raw == pytest.approx(
        stats.seed_t_test([0.50, 0.54], [0.60, 0.62], paired=True).p_value, rel=1e-9
    )
    assert any("--kind last" in n for n in built.view.notes)
    # one seed a cell: the stored predictions are the best epoch's, so the last epoch's values get nothing
    one = store_of(tmp_path, "epochs1", [run(0.80, last=0.60, lr=1e-3), run(0.9, last=0.5, lr=1e-2)])
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "epochs1", "--store", str(one), "--kind", "last",
                                "--format", "csv")  # fmt: skip
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["value"] for r in rows} == {"0.6", "0.5"} and all(r["ci_low"] == "" for r in rows)
    # the last epoch at chance is marked from its own value (the dev labels are the same at every epoch)
    chance = next(r for r in rows if r["value"] == "0.5")
    assert "at or below the majority class's accuracy 0.5000" in chance["degenerate"]
    code, _, err = run_kdgrid(capsys, "tables", "--sweep", "epochs1", "--store", str(one), "--kind", "last",
                              "--intervals", "on")  # fmt: skip
    assert code == 2 and "the store keeps per-example predictions of the best epoch only" in " ".join(
        err.split()
    )


def _fdr_store(tmp_path: Path) -> Path:
    """Four lrs, 3 seeds; each lr above the first differs from it by m + (-0.01, 0, 0.01) per seed, m chosen so
    that the paired t-test's raw p is about 0.02, 0.03 and 0.04: Holm over 3 marks none, Benjamini-Hochberg all."""
    made = []
    for lr, t in ((1e-4, 0.0), (1e-3, 6.96), (1e-2, 5.64), (1e-1, 4.83)):
        mean = t * 0.01 / math.sqrt(3)
        for seed, noise in enumerate((-0.01, 0.0, 0.01)):
            value = 0.7 + (mean + noise if t else 0.0)
            made.append(dataclasses.replace(result(value, task="sst2", lr=lr, seed=seed)))
    return store_of(tmp_path, "fdr", made)


def test_the_correction_asked_for_changes_the_marks_and_the_note(tmp_path: Path, capsys) -> None:
    path = _fdr_store(tmp_path)
    outs = {}
    for correction in ("holm", "fdr"):
        code, out, err = run_kdgrid(capsys, "tables", "--sweep", "fdr", "--store", str(path), "--format", "csv",
                                    "--correction", correction)  # fmt: skip
        assert code == 0, err
        outs[correction] = list(csv.DictReader(io.StringIO(out)))
    holm = {r["row"]: r for r in outs["holm"]}
    fdr = {r["row"]: r for r in outs["fdr"]}
    raw = [float(holm[lr]["p_raw"]) for lr in ("0.001", "0.01", "0.1")]
    assert [round(p, 2) for p in raw] == [0.02, 0.03, 0.04]
    assert [float(holm[lr]["p_adjusted"]) for lr in ("0.001", "0.01", "0.1")] == pytest.approx(
        stats.adjust(raw, "holm"), rel=1e-5
    )
    assert [float(fdr[lr]["p_adjusted"]) for lr in ("0.001", "0.01", "0.1")] == pytest.approx(
        stats.adjust(raw, "fdr"), rel=1e-5
    )
    assert all(holm[lr]["significant"] == "0" for lr in ("0.001", "0.01", "0.1"))
    assert all(fdr[lr]["significant"] == "1" for lr in ("0.001", "0.01", "0.1"))
    assert holm["0.01"]["correction"] == "holm" and fdr["0.01"]["correction"] == "fdr"
    assert holm["0.01"]["uncertainty"] == "seed-level" and "e-" in holm["0.01"]["p_raw"]
    code, out, _ = run_kdgrid(capsys, "tables", "--sweep", "fdr", "--store", str(path), "--correction", "fdr")
    assert code == 0 and "Benjamini-Hochberg (false discovery rate)" in " ".join(out.split())
    assert out.count("▲") == 1 + 3  # the legend, and the three cells
    code, out, _ = run_kdgrid(capsys, "tables", "--sweep", "fdr", "--store", str(path))
    assert "Holm (family-wise error)" in " ".join(out.split()) and out.count("▲") == 1  # the legend only
    # one family over the table or per block: the same here (one block), and an unknown family is refused
    code, _, err = run_kdgrid(capsys, "tables", "--sweep", "fdr", "--store", str(path), "--family", "slice")
    assert code == 2 and "unknown --family 'slice'; allowed: condition, table" in err


def test_options_a_sweep_table_cannot_honour_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    path = _fdr_store(tmp_path)
    for args, message in (
        (["--test", "bootstrap"], "--test bootstrap: a sweep's table gives every number"),
        (["--sweep", "other", "--sweep", "third"], "--sweep given 3 times (fdr, other, third)"),
        (["--kind", "middle"], "unknown --kind 'middle'; allowed: best, last"),
    ):
        code, _, err = run_kdgrid(capsys, "tables", "--sweep", "fdr", "--store", str(path), *args)
        assert code == 2 and err.startswith("error: ") and message in " ".join(err.split()), err
    code, _, err = run_kdgrid(capsys, "figures", "--sweep", "fdr", "--sweep", "x", "--store", str(path))
    assert code == 2 and "--sweep given 2 times" in err


# --- degenerate marks, per-slice references, crossovers --------------------------------------------------------


def test_two_healthy_seeds_far_apart_are_never_degenerate_a_mean_at_chance_is(tmp_path: Path) -> None:
    made = [run(0.700, lr=1e-3, seed=0), run(0.740, lr=1e-3, seed=1),
            run(0.495, lr=1e-2, seed=0), run(0.500, lr=1e-2, seed=1)]  # fmt: skip
    built = sweep_table(store_of(tmp_path, "chance", made), "chance", resamples=100, test_resamples=100)
    main = built.view.blocks[0]
    healthy = next(c for c in main.cells.values() if c.config["lr"] == "0.001")
    chance = next(c for c in main.cells.values() if c.config["lr"] == "0.01")
    assert (
        healthy.ci_low < 0.5
    )  # a t interval with one degree of freedom reaches chance, and that is no reason
    assert not healthy.degenerate
    assert any("at or below the majority class's accuracy 0.5000" in r for r in chance.degenerate)


def _crossover_store(tmp_path: Path) -> Path:
    """knowledge x strategy, 3 seeds: LAD beats Last-1 by about 5 points with hidden_mse and loses by about 5
    with cos, in every seed."""
    values = {
        ("hidden_mse", "Last-1"): (0.70, 0.72, 0.74),
        ("hidden_mse", "LAD"): (0.75, 0.78, 0.79),
        ("cos", "Last-1"): (0.75, 0.77, 0.80),
        ("cos", "LAD"): (0.70, 0.715, 0.755),
    }
    made = [
        dataclasses.replace(result(v, task="sst2", knowledge=(k,), strategy=st, seed=s))
        for (k, st), seeds in values.items()
        for s, v in enumerate(seeds)
    ]
    return store_of(tmp_path, "crossover", made)


def test_a_reference_per_slice_and_a_warning_where_an_average_hides_a_crossover(
    tmp_path: Path, capsys
) -> None:
    path = _crossover_store(tmp_path)
    built = sweep_table(path, "crossover", reference="strategy=Last-1", pairs=True)
    main = built.view.blocks[0]
    assert built.layout.rows == ("knowledge",) and built.layout.cols == ("strategy",)
    assert main.cell("hidden_mse", main.column("Last-1")).is_reference
    assert main.cell("cos", main.column("Last-1")).is_reference  # one reference per knowledge
    better = main.cell("hidden_mse", main.column("LAD"))
    worse = main.cell("cos", main.column("LAD"))
    assert better.significant and better.direction == 1 and worse.significant and worse.direction == -1
    assert better.p_raw == pytest.approx(
        stats.seed_t_test([0.75, 0.78, 0.79], [0.70, 0.72, 0.74], paired=True).p_value, rel=1e-9
    )
    assert better.p_vs_reference == better.p_raw  # one family per slice: a family of one
    assert any("2 of them" in n for n in built.view.notes)
    assert "reference strategy=Last-1: one per value of knowledge" in " ".join(built.view.notes)
    warning = next(n for n in built.view.notes if "strategy Last-1 vs LAD averages over a crossover" in n)
    assert warning.startswith("warning:") and "Last-1 is better where knowledge=cos" in warning
    assert "worse where knowledge=hidden_mse" in warning
    # --family table: the two slices' tests in one family, Holm over both
    whole = sweep_table(path, "crossover", reference="strategy=Last-1", family="table").view.blocks[0]
    raws = [whole.cell(k, whole.column("LAD")).p_raw for k in ("hidden_mse", "cos")]
    adjusted = [whole.cell(k, whole.column("LAD")).p_vs_reference for k in ("hidden_mse", "cos")]
    assert adjusted == pytest.approx(stats.adjust(raws, "holm")) and adjusted != pytest.approx(raws)
    pairs = built.view.block(f"{main.title} — strategy, pairwise")
    assert not pairs.cell("Last-1 vs LAD", pairs.column("difference")).significant
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "crossover", "--store", str(path), "--pairs")
    assert code == 0 and "averages over a crossover" in " ".join(out.split()), err
