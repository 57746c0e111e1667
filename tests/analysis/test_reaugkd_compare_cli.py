"""`kdgrid tables --sweep reaugkd --compare paper`: ReAugKD's published Tables 1 and 2 beside a store's rows, each
of ours with its 95% interval, through the CLI on a small store written with the store's API (numbers checked
against hand-computed values and independent formulas)."""

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
from kdgrid.analysis.reaugkd_tables import SECONDS, published_table, reaugkd_comparison
from kdgrid.predictions import DevSetPredictions
from kdgrid.store import read_store
from kdgrid.store.membership import record_membership
from tests.analysis.tables_testing import result, run_kdgrid, write

N = 200
GOLD = np.arange(N) % 2
FINGERPRINT = "e" * 64
RESAMPLES = 300
BATCHES = 4


def correct_on(share: float) -> np.ndarray:
    right = np.arange(N) < round(share * N)
    return np.where(right, GOLD, 1 - GOLD)


def row(share: float, *, seed: int, options: dict | None = None, without: float | None = None, added_ms=0.0):
    """A done sst2 row right on ``share`` of the dev examples (its stored predictions say the same); with
    ``options``, an evaluation-only ReAugKD row whose student alone scores ``without``."""
    extra = {}
    fields: dict = {"knowledge": ()}
    if options is not None:
        fields = {"knowledge": ("reaug_relation",), "strategy": "Last-1", "soft_weight": 0.9, "alpha": 0.1,
                  "options": {"reaugkd_evaluate": True, **options}}  # fmt: skip
        extra = {
            "reaugkd": {
                "scores_without": {"validation": {"accuracy": without}},
                "latency": {"validation": {"batches": BATCHES, "student_ms_per_batch": 100.0,
                                           "with_retrieval_ms_per_batch": 100.0 + added_ms}},
            }
        }  # fmt: skip
    made = result(share, task="sst2", seed=seed, extra=extra, **fields)
    outcome = {"validation": DevSetPredictions(GOLD, correct_on(share), None, FINGERPRINT)}
    return dataclasses.replace(made, predictions=outcome)


def rows() -> list:
    alone = {0: 0.91, 1: 0.90}  # the trained student of each seed, without retrieval (beta = 1 evaluates it)
    made = [row(0.9, seed=0)]  # KD: soft labels only, one seed
    for seed in (0, 1):
        made.append(row((0.93, 0.92)[seed], seed=seed, options={"retrieval_k": 5, "retrieval_beta": 0.5},
                        without=alone[seed], added_ms=2.5))  # fmt: skip
        made.append(row(alone[seed], seed=seed, options={"retrieval_k": 5, "retrieval_beta": 1.0},
                        without=alone[seed], added_ms=2.5))  # fmt: skip
    made.append(row(0.95, seed=0, options={"retrieval_k": 10, "retrieval_beta": 0.5}, without=alone[0], added_ms=5.0))
    return made


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    made = rows()
    write(path, "retrieval", *made, sweep="reaugkd")
    record_membership(path, "reaugkd", {r.trial.trial_id: "retrieval" for r in made})
    return path


def _csv(capsys, store: Path) -> dict[tuple[str, str, str, str], dict[str, str]]:
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "reaugkd", "--compare", "paper", "--store", str(store),
                                "--format", "csv", "--resamples", str(RESAMPLES))  # fmt: skip
    assert code == 0, err
    return {(r["table"], r["block"], r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(out))}


def _seed_interval(values: list[float]) -> tuple[float, float, float, float]:
    """(t interval low, high; prediction interval low, high) over seeds, by the textbook formulas."""
    mean, s, k = float(np.mean(values)), float(np.std(values, ddof=1)), len(values)
    t = float(scipy_stats.t.ppf(0.975, k - 1))
    return mean - t * s / math.sqrt(k), mean + t * s / math.sqrt(k), mean - t * s * math.sqrt(1 + 1 / k), (
        mean + t * s * math.sqrt(1 + 1 / k)
    )


def test_table1_published_beside_ours_with_our_intervals(capsys, store: Path) -> None:
    cells = _csv(capsys, store)
    kd = cells[("reaugkd-1", "", "KD", "SST-2")]
    assert float(kd["value"]) == pytest.approx(0.9) and float(kd["paper"]) == pytest.approx(0.912)
    assert float(kd["diff"]) == pytest.approx(0.9 - 0.912)
    one_seed = stats.bootstrap_interval("accuracy", GOLD, correct_on(0.9), resamples=RESAMPLES, seed=0)
    assert (float(kd["ci_low"]), float(kd["ci_high"])) == pytest.approx((one_seed.low, one_seed.high))
    assert float(kd["ci_low"]) < 0.9 < float(kd["ci_high"]) and kd["paper_inside"] == ""  # one seed: no ∈/∉
    # with retrieval: the best configuration (k = 10, beta 0.5, one seed: 0.95), its stored predictions' interval
    augmented = cells[("reaugkd-1", "", "ReAugKD", "SST-2")]
    assert float(augmented["value"]) == pytest.approx(0.95) and float(augmented["paper"]) == pytest.approx(0.925)
    best = stats.bootstrap_interval("accuracy", GOLD, correct_on(0.95), resamples=RESAMPLES, seed=0)
    assert (float(augmented["ci_low"]), float(augmented["ci_high"])) == pytest.approx((best.low, best.high))
    # without retrieval: the trained students alone (0.91, 0.90 over two seeds): a t interval, and whether the
    # published number lies where one more run would fall
    alone = cells[("reaugkd-1", "", "ReAugKD w/o retrieval", "SST-2")]
    low, high, run_low, run_high = _seed_interval([0.91, 0.90])
    assert float(alone["value"]) == pytest.approx(0.905) and alone["n_seeds"] == "2"
    assert (float(alone["ci_low"]), float(alone["ci_high"])) == pytest.approx((low, high))
    assert alone["paper_inside"] == str(int(run_low <= 0.923 <= run_high))
    # the paper's own rows and tasks we ran nothing of: the published number beside a missing one
    teacher = cells[("reaugkd-1", "", "BERT-Base (teacher)", "SST-2")]
    assert teacher["value"] == "" and float(teacher["paper"]) == pytest.approx(0.93)
    assert cells[("reaugkd-1", "", "KD", "CoLA")]["value"] == ""


def test_table2_per_k_with_the_dev_set_seconds(capsys, store: Path) -> None:
    cells = _csv(capsys, store)
    published = published_table(2).set_index(["task", "k"])
    at_5 = cells[("reaugkd-2", "SST-2", "5", "score")]
    low, high, _, _ = _seed_interval([0.93, 0.92])  # beta 0.5 beats beta 1 (0.905) at k = 5
    assert float(at_5["value"]) == pytest.approx(0.925)
    assert (float(at_5["ci_low"]), float(at_5["ci_high"])) == pytest.approx((low, high))
    assert float(at_5["paper"]) == pytest.approx(published.loc[("sst2", 5), "value"] / 100)
    assert float(cells[("reaugkd-2", "SST-2", "0", "score")]["value"]) == pytest.approx(0.905)
    assert float(cells[("reaugkd-2", "SST-2", "0", SECONDS)]["value"]) == pytest.approx(100.0 * BATCHES / 1000)
    assert float(cells[("reaugkd-2", "SST-2", "0", SECONDS)]["paper"]) == pytest.approx(7.80)
    assert float(cells[("reaugkd-2", "SST-2", "5", SECONDS)]["value"]) == pytest.approx(2.5 * BATCHES / 1000)
    assert float(cells[("reaugkd-2", "SST-2", "10", SECONDS)]["value"]) == pytest.approx(5.0 * BATCHES / 1000)
    assert float(cells[("reaugkd-2", "SST-2", "10", SECONDS)]["paper"]) == pytest.approx(0.201)
    assert cells[("reaugkd-2", "SST-2", "15", "score")]["value"] == ""  # no k = 15 row: missing, never 0
    assert cells[("reaugkd-2", "QNLI", "5", "score")]["value"] == ""


def test_the_terminal_shows_published_against_measured(capsys, store: Path) -> None:
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "reaugkd", "--compare", "paper", "--store", str(store),
                                "--resamples", str(RESAMPLES))  # fmt: skip
    assert code == 0, err
    assert "ReAugKD Table 1" in out and "ReAugKD Table 2" in out
    assert "0.9050±0.0071" in out and "[0.8415, 0.9685]" in out  # ours ± std over its seeds, its interval
    assert "0.9230 (-0.0180) ∈" in out  # published (difference), inside where one more run would fall
    assert "agreement with the paper" in out


def test_the_comparison_is_refused_where_it_cannot_be_made(capsys, store: Path) -> None:
    code, _, err = run_kdgrid(capsys, "tables", "--sweep", "my_study", "--compare", "paper", "--store", str(store))
    assert code == 2 and "no published numbers" in err and "reaugkd" in err
    code, _, err = run_kdgrid(
        capsys, "tables", "--sweep", "reaugkd", "--compare", "paper", "--rows", "task", "--store", str(store)
    )
    assert code == 2 and "--rows" in err
    code, _, err = run_kdgrid(capsys, "tables", "--sweep", "reaugkd", "--compare", "paper", "--kind", "last",
                              "--store", str(store))  # fmt: skip
    assert code == 2 and "--kind last" in err
    code, _, err = run_kdgrid(capsys, "tables", "--sweep", "reaugkd", "--compare", "paper", "--correction", "fdr",
                              "--store", str(store))  # fmt: skip
    assert code == 2 and "--correction" in err  # the comparison tests nothing: a correction would be ignored
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "reaugkd", "--compare", "paper", "--intervals", "off",
                                "--format", "csv", "--store", str(store))  # fmt: skip
    assert code == 0 and all(not r["ci_low"] for r in csv.DictReader(io.StringIO(out)))


def test_the_library_comparison_reads_colas_matthews_correlation(store: Path, tmp_path: Path) -> None:
    cola = tmp_path / "cola"
    made = dataclasses.replace(
        result({"validation": {"accuracy": 0.7, "matthews_corrcoef": 0.5}}, task="cola"), predictions={}
    )
    write(cola, "kd", made, sweep="reaugkd")
    table1 = reaugkd_comparison(read_store(cola))["table1"].set_index(["method", "task"])
    assert table1.loc[("KD", "cola"), "ours"] == pytest.approx(50.0)  # the paper's percentages
