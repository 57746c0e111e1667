"""A sweep's table holds its level under a method-level null with training-seed variance, through the table's own
code path (`kdgrid.analysis.sweep_tables.build_sweep_table`): every configuration has the same expected score,
and each run's score is that plus a seed component shared by every cell of the seed (the seed's data order and
initialisation) plus one of its own. Cell marks, pairs and the marginals' and differences' intervals must each
hold their level; the forest plot's intervals exclude 0 exactly when the raw test marks the difference."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kdgrid.analysis.sweep_tables import SweepRuns, build_sweep_table, choose_layout

KNOWLEDGE = ("hidden_mse", "cos", "mmd")
STRATEGIES = ("First-1", "Last-1", "LAD")
TRUE_MEAN = 0.7
TABLES = 150  # tables per seed count: 1,200 cell tests, 900 pairs, 900 marginal means, 1,200 differences


def sweep_runs(
    rng: np.random.Generator,
    seeds: int,
    *,
    shared_sd: float = 0.02,
    own_sd: float = 0.02,
    effects: dict[tuple[str, str], float] | None = None,
) -> SweepRuns:
    """A knowledge x strategy sweep of ``seeds`` seeds a cell: ``TRUE_MEAN`` (+ a cell's planted effect) + the
    seed's shared component + the run's own, both Gaussian."""
    shared = rng.normal(0.0, shared_sd, seeds)
    rows = []
    for knowledge in KNOWLEDGE:
        for strategy in STRATEGIES:
            own = rng.normal(0.0, own_sd, seeds)
            effect = (effects or {}).get((knowledge, strategy), 0.0)
            for seed in range(seeds):
                name = f"{knowledge}-{strategy}-{seed}"
                rows.append(
                    {
                        "trial_id": name,
                        "row_id": name,
                        "dev_set": "validation",
                        "metric": "accuracy",
                        "value": TRUE_MEAN + effect + shared[seed] + own[seed],
                        "seed": seed,
                        "degenerate": (),
                        "teacher_agreement": math.nan,
                        "task": "sst2",
                        "knowledge": knowledge,
                        "strategy": strategy,
                    }
                )
    return SweepRuns("simulated", pd.DataFrame(rows), ["knowledge", "strategy"])


def table(runs: SweepRuns, **options: object):
    return build_sweep_table(runs, choose_layout(runs.axes), {}, pairs=True, **options)


@pytest.mark.parametrize("seeds", [3, 5])
def test_under_a_method_level_null_with_seed_variance_every_number_holds_its_level(seeds: int) -> None:
    rng = np.random.default_rng(20 + seeds)
    cell_marks = cell_tests = pair_marks = pair_tests = 0
    marginal_misses = marginals = cell_misses = cells = difference_misses = differences = warned = 0
    for _ in range(TABLES):
        built = table(sweep_runs(rng, seeds))
        main = built.view.blocks[0]
        warned += any(note.startswith("warning:") for note in built.view.notes)  # no crossover to warn of
        for cell in main.cells.values():
            cells += 1
            cell_misses += not cell.ci_low <= TRUE_MEAN <= cell.ci_high
            if not cell.is_reference:
                cell_tests += 1
                cell_marks += cell.p_raw <= 0.05
        for difference in built.differences:
            differences += 1
            difference_misses += not difference.low <= 0.0 <= difference.high
            # the forest plot's interval and the raw test are one procedure
            assert (difference.low > 0 or difference.high < 0) == (difference.p_raw <= 0.05)
        for block in built.view.blocks[1:]:
            for (_, column), cell in block.cells.items():
                if column.label == "mean":
                    marginals += 1
                    marginal_misses += not cell.ci_low <= TRUE_MEAN <= cell.ci_high
                elif column.label == "difference":
                    pair_tests += 1
                    pair_marks += cell.p_raw <= 0.05
                    assert (cell.ci_low > 0 or cell.ci_high < 0) == (cell.p_raw <= 0.05)
    assert cell_tests == 8 * TABLES and pair_tests == 6 * TABLES and marginals == 6 * TABLES
    assert cell_marks / cell_tests <= 0.07
    assert pair_marks / pair_tests <= 0.07
    assert marginal_misses / marginals <= 0.07  # a marginal interval that misses the true mean: a false claim
    for misses, total in (
        (cell_misses, cells),
        (marginal_misses, marginals),
        (difference_misses, differences),
    ):
        assert 0.92 <= 1 - misses / total <= 0.98


def test_a_planted_difference_is_marked_and_a_null_cell_is_not() -> None:
    rng = np.random.default_rng(7)
    runs = sweep_runs(rng, 5, shared_sd=0.02, own_sd=0.005, effects={("cos", "LAD"): 0.05})
    built = table(runs)
    main = built.view.blocks[0]
    planted = main.cell("cos", main.column("LAD"))
    assert planted.significant and planted.direction == 1 and planted.uncertainty == "seed-level"
    # the shared seed component (SD 0.02, four times the runs' own) cancels in the pairing: nothing else marked
    assert sum(c.significant for c in main.cells.values()) == 1
