"""The derived claims of Section 4.4, on hand-made frames and on the transcribed paper numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kdgrid.analysis import paper_conclusions as conclusions
from kdgrid.analysis.paper_numbers import paper_numbers
from kdgrid.errors import ConfigError


def frame(rows: list[tuple[str, str, str, str, float]], **extra: list[object]) -> pd.DataFrame:
    """(student, task, knowledge, strategy, value) rows on the validation dev set."""
    out = pd.DataFrame(rows, columns=["student", "task", "knowledge", "strategy", "value"])
    out["dev_set"] = "validation"
    for column, values in extra.items():
        out[column] = values
    return out


# Two conditions: (tiny, rte) is best at First-1 alone; (tiny, mrpc) ties Last and Last-1 at 0.80.
TOY = frame(
    [
        ("bert-tiny", "rte", "cos", "First", 0.60),
        ("bert-tiny", "rte", "cos", "First-1", 0.66),
        ("bert-tiny", "rte", "mmd", "First", 0.62),
        ("bert-tiny", "rte", "mmd", "First-1", 0.61),
        ("bert-tiny", "mrpc", "cos", "Last", 0.80),
        ("bert-tiny", "mrpc", "cos", "Last-1", 0.70),
        ("bert-tiny", "mrpc", "mmd", "Last", 0.75),
        ("bert-tiny", "mrpc", "mmd", "Last-1", 0.80),
    ]
)


def test_best_configurations_lists_ties() -> None:
    best = conclusions.best_configurations(TOY).set_index("task")
    assert best.loc["rte", "best_value"] == 0.66
    assert best.loc["rte", "best_strategies"] == ("First-1",)
    assert best.loc["mrpc", "best_strategies"] == ("Last", "Last-1")
    assert best.loc["mrpc", "best_knowledge"] == ("cos", "mmd")
    assert best["n_configurations"].tolist() == [4, 4]


@pytest.mark.parametrize(("ties", "count"), [("any", 2.0), ("all", 1.0), ("split", 1.5)])
def test_strategy_share_tie_rules(ties: str, count: float) -> None:
    share = conclusions.strategy_share(TOY, ties=ties)  # type: ignore[arg-type]
    assert share.count == count and share.total == 2
    assert share.share == count / 2
    assert f"of 2 conditions best at First-1 or Last-1 (ties: {ties})" in str(share)


def test_tolerance_widens_ties() -> None:
    # Within 0.045 of rte's best (0.66): only First-1 cells (0.66) and none of First (0.62 is 0.04 below -> in).
    best = conclusions.best_configurations(TOY, tolerance=0.045).set_index("task")
    assert set(best.loc["rte", "best_strategies"]) == {"First-1", "First"}
    assert conclusions.strategy_share(TOY, ties="all", tolerance=0.045).count == 0.0


def test_best_of_strategy_mean() -> None:
    # rte: First mean 0.61, First-1 mean 0.635; mrpc: Last 0.775, Last-1 0.75 -> 1 of 2.
    best = conclusions.best_configurations(TOY, best_of="strategy_mean").set_index("task")
    assert best.loc["mrpc", "best_strategies"] == ("Last",)
    assert math.isclose(best.loc["rte", "best_value"], 0.635)
    assert conclusions.strategy_share(TOY, best_of="strategy_mean").count == 1.0


def test_seeds_are_averaged_and_other_rows_ignored() -> None:
    rows = frame(
        [
            ("bert-tiny", "rte", "cos", "First", 0.70),  # seed 0
            ("bert-tiny", "rte", "cos", "First", 0.50),  # seed 1: mean 0.60
            ("bert-tiny", "rte", "cos", "Last-1", 0.65),
            ("bert-tiny", "rte", "", "", 0.99),  # soft labels only: no strategy, ignored
            ("bert-tiny", "rte", "cos", "First", 0.99),  # an f1 row, ignored
            ("", "rte", "", "", 0.99),  # the teacher's own score, ignored
            ("bert-tiny", "stsb", "cos", "First", 0.80),  # pearson is STS-B's reported metric
            ("bert-tiny", "stsb", "cos", "Last-1", 0.90),  # spearman, ignored
        ],
        metric=["accuracy", "accuracy", "accuracy", "accuracy", "f1", "accuracy", "pearson", "spearman"],
        role=["student", "student", "student", "student", "student", "teacher", "student", "student"],
    )
    best = conclusions.best_configurations(rows).set_index("task")
    assert best.loc["rte", "best_strategies"] == ("Last-1",) and best.loc["rte", "n_configurations"] == 2
    assert best.loc["stsb", "best_strategies"] == ("First",) and best.loc["stsb", "best_value"] == 0.80


def test_variance_across_strategies_by_hand() -> None:
    variances = conclusions.strategy_variances(TOY).set_index(["task", "knowledge"])["variance"]
    assert math.isclose(variances[("rte", "cos")], np.var([0.60, 0.66]))
    assert math.isclose(variances[("mrpc", "mmd")], np.var([0.75, 0.80]))
    expected = np.mean(
        [np.var([0.60, 0.66]), np.var([0.62, 0.61]), np.var([0.80, 0.70]), np.var([0.75, 0.80])]
    )
    assert math.isclose(conclusions.mean_strategy_variance(TOY), expected)
    sample = np.mean([np.var(v, ddof=1) for v in ([0.60, 0.66], [0.62, 0.61], [0.80, 0.70], [0.75, 0.80])])
    assert math.isclose(conclusions.mean_strategy_variance(TOY, ddof=1), sample)


def test_variance_across_configurations_by_hand() -> None:
    rte, mrpc = [0.60, 0.66, 0.62, 0.61], [0.80, 0.70, 0.75, 0.80]
    expected = (np.var(rte) + np.var(mrpc)) / 2
    assert math.isclose(conclusions.mean_strategy_variance(TOY, over="configurations"), expected)


def test_improvement_share_by_cell_and_by_condition() -> None:
    treated = TOY.assign(value=TOY["value"] + [0.01, -0.01, 0.0, 0.02, 0.0, 0.0, -0.05, 0.01])
    cells = conclusions.improvement_share(treated, TOY)
    assert (cells.better, cells.equal, cells.worse) == (3, 3, 2)
    assert cells.share_better == 3 / 8
    by_condition = conclusions.improvement_share(treated, TOY, on=conclusions.CONDITION)
    # rte best: 0.65 vs 0.66 (worse); mrpc best: 0.81 vs 0.80 (better).
    assert (by_condition.better, by_condition.worse) == (1, 1)


def test_bad_input_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="strategy"):
        conclusions.best_configurations(TOY.drop(columns=["strategy"]))
    with pytest.raises(ConfigError, match="any, all, split"):
        conclusions.strategy_share(TOY, ties="most")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="configuration, strategy_mean"):
        conclusions.best_configurations(TOY, best_of="median")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="strategies, configurations"):
        conclusions.mean_strategy_variance(TOY, over="tasks")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="two or more"):
        conclusions.mean_strategy_variance(TOY[TOY["strategy"] == "First"])


def test_single_and_double_match_selection() -> None:
    rows = frame(
        [
            ("bert-tiny", "rte", "cos", "First", 0.6),
            ("bert-tiny", "rte", "cos+mmd", "First", 0.6),
            ("bert-tiny", "rte", "", "", 0.6),
        ]
    )
    assert conclusions.single_match(rows)["knowledge"].tolist() == ["cos"]
    assert conclusions.double_match(rows)["knowledge"].tolist() == ["cos+mmd"]


# --- the paper's own tables (numbers recorded in kdgrid/analysis/paper/NOTES.md) -----------------------------------------


@pytest.fixture(scope="module")
def table5() -> pd.DataFrame:
    return paper_numbers(5)


@pytest.fixture(scope="module")
def table6() -> pd.DataFrame:
    return paper_numbers(6)


def test_single_match_share_disagrees_with_the_text(table5: pd.DataFrame) -> None:
    """The paper: 25 of 27. Its printed Table 5 gives 19 (ties counted for First-1/Last-1), 17 strictly."""
    assert conclusions.strategy_share(table5, ties="any").count == 19
    assert conclusions.strategy_share(table5, ties="all").count == 17
    assert conclusions.strategy_share(table5, ties="split").count == 17.75
    assert conclusions.strategy_share(table5).total == 27
    # Reading "best" as the strategy with the best mean over the ten knowledge types gives 26 of 27.
    assert conclusions.strategy_share(table5, best_of="strategy_mean").count == 26
    # Leaving out the doubtful query_relation x Last-1 column changes the strict count only.
    clean = table5[~table5["doubtful"]]
    assert conclusions.strategy_share(clean, ties="any").count == 19
    assert conclusions.strategy_share(clean, ties="all").count == 16


def test_double_match_share_disagrees_with_the_text(table6: pd.DataFrame) -> None:
    """The paper: 22 of 27. Its printed Table 6 gives 13 (ties for), 11 strictly; 20 by strategy means."""
    assert conclusions.strategy_share(table6, ties="any").count == 13
    assert conclusions.strategy_share(table6, ties="all").count == 11
    assert conclusions.strategy_share(table6, best_of="strategy_mean").count == 20
    assert conclusions.strategy_share(table6).total == 27


def test_average_variance(table5: pd.DataFrame) -> None:
    """The paper: about 0.00045. Variance across strategies per knowledge gives 0.00027 (population) or 0.00033
    (sample); variance across all 50 cells of a (student, dev set) gives 0.000458, the paper's figure."""
    assert conclusions.mean_strategy_variance(table5) == pytest.approx(0.00026787, abs=5e-8)
    assert conclusions.mean_strategy_variance(table5, ddof=1) == pytest.approx(0.00033484, abs=5e-8)
    assert conclusions.mean_strategy_variance(table5, over="configurations") == pytest.approx(0.00045761, abs=5e-8)


def test_weighted_single_match_improvement(table5: pd.DataFrame) -> None:
    """The paper: Table 8's tuned weights improve "over 80%" of the students. Cell by cell: 752 of 1350."""
    table8 = paper_numbers(8)
    cells = conclusions.improvement_share(table8, table5)
    assert (cells.better, cells.equal, cells.worse) == (752, 76, 522)
    best = conclusions.improvement_share(table8, table5, on=conclusions.CONDITION)
    assert (best.better, best.equal, best.worse) == (16, 5, 6)
