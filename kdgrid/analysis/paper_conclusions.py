"""The paper's derived claims about matching strategies, computed from any tidy DataFrame.

The same functions run on the transcribed paper numbers (`kdgrid.analysis.paper_numbers.paper_numbers`) and on a
results store brought to the tidy format (`kdgrid.analysis.tidy.store_to_tidy`), so a reproduction can be checked
against the claims the paper makes in Section 4.4:

* "among all experimental conditions in the single-match setting (3 model size x 9 downstream tasks), the best
  configuration in 25 out of 27 is Last-1 or First-1 ... the ratio in the double-match setting is 22 out of 27":
  `best_configurations` and `strategy_share`.
* "the average variance of different matching strategies in different tasks and models is about only 0.00045":
  `strategy_variances` and `mean_strategy_variance`.
* "the roughly selected loss weight improves the performance of over 80% of the student models" (Table 8 against
  Table 5): `improvement_share`.

Definitions (what "best configuration" means here; see ``kdgrid/analysis/paper/NOTES.md`` for the numbers):

* A *condition* is one (student, task, dev set): 3 students x 9 dev sets (MNLI matched and mismatched count
  separately, as the paper's 27 does). A *configuration* is one (knowledge, strategy) cell of the condition.
* The best configuration of a condition is the cell with the highest value of the reported metric (accuracy;
  Pearson for STS-B). Values are compared as given (the paper's printed 4 decimals), so ties happen.
* Ties: ``ties="any"`` counts a condition if any tied-best cell uses a wanted strategy, ``"all"`` only if every
  tied-best cell does, ``"split"`` counts the fraction of tied-best cells that do.
* Rows repeated for one configuration (seeds of a store) are averaged first; only the paper's five strategies
  (`kdgrid.paper.PAPER_STRATEGIES`) count: negative controls (Reverse, Random) and other strategies never do.

Inputs need the columns ``student, task, dev_set, knowledge, strategy, value``; a ``metric`` column, when present,
is restricted to the reported metric; a ``role`` column to ``student`` rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_STRATEGIES, reported_metric

CONDITION: tuple[str, ...] = ("student", "task", "dev_set")
CONFIGURATION: tuple[str, ...] = ("knowledge", "strategy")
ONE_LAYER_STRATEGIES: tuple[str, ...] = ("First-1", "Last-1")
Ties = Literal["any", "all", "split"]
TIES: tuple[str, ...] = ("any", "all", "split")
BestOf = Literal["configuration", "strategy_mean"]
BEST_OF: tuple[str, ...] = ("configuration", "strategy_mean")
VarianceOver = Literal["strategies", "configurations"]
VARIANCE_OVER: tuple[str, ...] = ("strategies", "configurations")


def _prepared(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of distilled students in the reported metric, with a knowledge and a strategy; seeds averaged."""
    required = {*CONDITION, *CONFIGURATION, "value"}
    missing = sorted(required - set(frame.columns))
    if missing:
        raise ConfigError(f"claims need the column(s) {missing}; got {sorted(frame.columns)}")
    rows = frame
    if "role" in rows.columns:
        rows = rows[rows["role"].fillna("student").replace("", "student") == "student"]
    if "metric" in rows.columns:
        wanted = rows["task"].map(reported_metric)
        rows = rows[rows["metric"] == wanted]
    rows = rows[(rows["strategy"].fillna("") != "") & (rows["knowledge"].fillna("") != "")]
    # The paper's claims are about its five strategies: negative controls and other strategies never count.
    rows = rows[rows["strategy"].isin(PAPER_STRATEGIES)]
    keys = [*CONDITION, *CONFIGURATION]
    return rows.groupby(keys, as_index=False, sort=True)["value"].mean()


def single_match(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with exactly one knowledge type (no ``+`` in ``knowledge``) and a strategy."""
    knowledge = frame["knowledge"].fillna("")
    return frame[(knowledge != "") & ~knowledge.str.contains("+", regex=False)]


def double_match(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with two knowledge types (``a+b``)."""
    return frame[frame["knowledge"].fillna("").str.count(r"\+") == 1]


def best_configurations(
    frame: pd.DataFrame, *, tolerance: float = 0.0, best_of: BestOf = "configuration"
) -> pd.DataFrame:
    """One row per condition: its best value and every configuration within ``tolerance`` of it.

    Args:
        best_of: ``configuration`` compares every (knowledge, strategy) cell of the condition; ``strategy_mean``
            first averages each strategy over the knowledge types and compares the strategies (then
            ``best_knowledge`` holds ``"mean"``).

    Returns:
        Columns ``student, task, dev_set, best_value, best_knowledge`` (tuple), ``best_strategies`` (tuple, one
        entry per tied-best cell, in the order of ``best_knowledge``), ``n_tied``, ``n_configurations``.
    """
    if best_of not in BEST_OF:
        raise ConfigError(f"unknown best_of {best_of!r}; allowed: {', '.join(BEST_OF)}")
    rows = _prepared(frame)
    if best_of == "strategy_mean":
        rows = rows.groupby([*CONDITION, "strategy"], as_index=False, sort=True)["value"].mean()
        rows["knowledge"] = "mean"
    records = []
    for condition, group in rows.groupby(list(CONDITION), sort=True):
        best = group["value"].max()
        tied = group[group["value"] >= best - tolerance]
        records.append(
            {
                **dict(zip(CONDITION, condition, strict=True)),
                "best_value": float(best),
                "best_knowledge": tuple(tied["knowledge"]),
                "best_strategies": tuple(tied["strategy"]),
                "n_tied": len(tied),
                "n_configurations": len(group),
            }
        )
    columns = [*CONDITION, "best_value", "best_knowledge", "best_strategies", "n_tied", "n_configurations"]
    return pd.DataFrame(records, columns=columns)


@dataclass(frozen=True)
class StrategyShare:
    """How many conditions have their best configuration at one of ``strategies``.

    ``count`` is a whole number for ``ties`` "any"/"all" and may be fractional for "split"; ``conditions`` is
    `best_configurations` with a ``hit`` column (1, 0 or the split fraction).
    """

    count: float
    total: int
    strategies: tuple[str, ...]
    ties: str
    conditions: pd.DataFrame

    @property
    def share(self) -> float:
        return self.count / self.total if self.total else float("nan")

    def __str__(self) -> str:
        count = f"{self.count:g}"
        return (
            f"{count} of {self.total} conditions best at {' or '.join(self.strategies)} (ties: {self.ties})"
        )


def strategy_share(
    frame: pd.DataFrame,
    strategies: Sequence[str] = ONE_LAYER_STRATEGIES,
    *,
    ties: Ties = "any",
    tolerance: float = 0.0,
    best_of: BestOf = "configuration",
) -> StrategyShare:
    """The share of conditions whose best configuration uses one of ``strategies`` (the paper: 25/27 single-match
    and 22/27 double-match for First-1 or Last-1). Pass single- or double-match rows (`single_match`).
    ``best_of`` as in `best_configurations`."""
    if ties not in TIES:
        raise ConfigError(f"unknown tie rule {ties!r}; allowed: {', '.join(TIES)}")
    wanted = set(strategies)
    best = best_configurations(frame, tolerance=tolerance, best_of=best_of)
    hits = []
    for tied in best["best_strategies"]:
        inside = [strategy in wanted for strategy in tied]
        if ties == "any":
            hits.append(float(any(inside)))
        elif ties == "all":
            hits.append(float(all(inside)))
        else:
            hits.append(sum(inside) / len(inside))
    best = best.assign(hit=hits)
    return StrategyShare(float(sum(hits)), len(best), tuple(strategies), ties, best)


def strategy_variances(frame: pd.DataFrame, *, ddof: int = 0) -> pd.DataFrame:
    """The variance of the value across matching strategies for each (student, task, dev set, knowledge).

    ``ddof=0`` is the population variance (divide by the number of strategies), ``ddof=1`` the sample variance.
    Returns columns ``student, task, dev_set, knowledge, variance, n_strategies``; groups with fewer than two
    strategies are left out.
    """
    rows = _prepared(frame)
    grouped = rows.groupby([*CONDITION, "knowledge"], sort=True)["value"]
    out = grouped.agg(variance=lambda v: v.var(ddof=ddof), n_strategies="count").reset_index()
    return out[out["n_strategies"] >= 2].reset_index(drop=True)


def configuration_variances(frame: pd.DataFrame, *, ddof: int = 0) -> pd.DataFrame:
    """The variance of the value across every (knowledge, strategy) cell of each (student, task, dev set).

    Returns columns ``student, task, dev_set, variance, n_configurations`` (groups of one cell left out).
    """
    rows = _prepared(frame)
    grouped = rows.groupby(list(CONDITION), sort=True)["value"]
    out = grouped.agg(variance=lambda v: v.var(ddof=ddof), n_configurations="count").reset_index()
    return out[out["n_configurations"] >= 2].reset_index(drop=True)


def mean_strategy_variance(frame: pd.DataFrame, *, ddof: int = 0, over: VarianceOver = "strategies") -> float:
    """The paper's "average variance of different matching strategies" (about 0.00045 for single-match).

    Args:
        ddof: 0 for the population variance, 1 for the sample variance.
        over: ``strategies``: the variance across the strategies of one (student, task, dev set, knowledge),
            averaged over those groups (the literal reading); ``configurations``: the variance across all
            (knowledge, strategy) cells of one (student, task, dev set), averaged over the conditions (the
            reading that reproduces the paper's figure from its Table 5; see NOTES.md).
    """
    if over not in VARIANCE_OVER:
        raise ConfigError(f"unknown variance grouping {over!r}; allowed: {', '.join(VARIANCE_OVER)}")
    if over == "strategies":
        variances = strategy_variances(frame, ddof=ddof)
    else:
        variances = configuration_variances(frame, ddof=ddof)
    if variances.empty:
        raise ConfigError(f"no group has two or more values to take a variance over {over}")
    return float(variances["variance"].mean())


@dataclass(frozen=True)
class Improvement:
    """Cells of ``treated`` that beat, tie or fall below the same cell of ``baseline``."""

    better: int
    equal: int
    worse: int
    cells: pd.DataFrame

    @property
    def total(self) -> int:
        return self.better + self.equal + self.worse

    @property
    def share_better(self) -> float:
        return self.better / self.total if self.total else float("nan")


def improvement_share(
    treated: pd.DataFrame, baseline: pd.DataFrame, *, on: Sequence[str] = (*CONDITION, *CONFIGURATION)
) -> Improvement:
    """Compare two studies cell by cell on ``on`` (e.g. Table 8's tuned weights against Table 5's beta = 1).

    ``on`` may be coarser than a cell (e.g. ``student, task, dev_set``): each side is then reduced to its best
    value per group first. Only groups present in both are compared.
    """
    keys = list(on)
    left = _prepared(treated).groupby(keys, as_index=False)["value"].max()
    right = _prepared(baseline).groupby(keys, as_index=False)["value"].max()
    cells = left.merge(right, on=keys, suffixes=("_treated", "_baseline"))
    difference = cells["value_treated"] - cells["value_baseline"]
    cells = cells.assign(difference=difference)
    return Improvement(
        better=int((difference > 0).sum()),
        equal=int((difference == 0).sum()),
        worse=int((difference < 0).sum()),
        cells=cells,
    )
