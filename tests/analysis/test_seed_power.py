"""Seeds needed from a measured seed SD: the power of the t-test over seeds against textbook values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kdgrid.analysis.seed_power import pooled_seed_sd, seeds_needed, seeds_needed_notes, t_test_power
from kdgrid.analysis.tables import Cell, build_view, get_spec
from kdgrid.analysis.tidy import aggregate_seeds
from tests.analysis.tables_testing import tidy_rows


def test_seeds_needed_matches_cohens_table():
    # Cohen (1988): two-sided alpha 0.05, power 0.80: d = 0.5 needs 64 per group, d = 0.8 needs 26, d = 1.0 17
    assert seeds_needed(1.0, 0.5) == 64
    assert seeds_needed(1.0, 0.8) == 26
    assert seeds_needed(1.0, 1.0) == 17
    # the scale: a 4.4-point seed SD and a 1-point difference
    assert seeds_needed(0.044, 0.01) == pytest.approx(2 * (1.96 + 0.8416) ** 2 * 4.4**2, abs=3)
    assert seeds_needed(0.044, 0.00001) is None


def test_power_grows_with_seeds_and_matches_simulation():
    assert t_test_power(3, 0.044, 0.01) < t_test_power(30, 0.044, 0.01) < 1
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 1.0, (20_000, 5)), rng.normal(1.5, 1.0, (20_000, 5))
    from scipy import stats as scipy_stats

    simulated = np.mean(scipy_stats.ttest_ind(a, b, axis=1).pvalue <= 0.05)
    assert simulated == pytest.approx(t_test_power(5, 1.0, 1.5), abs=0.015)
    with pytest.raises(ValueError, match=">= 2 seeds"):
        t_test_power(1, 1.0, 1.0)


def test_pooled_seed_sd_and_the_tables_note():
    cells = [Cell(0.7, std=0.03, n_seeds=3), Cell(0.7, std=0.04, n_seeds=5), Cell(0.7, n_seeds=1)]
    sd, pooled = pooled_seed_sd(cells)
    assert pooled == 2 and sd == pytest.approx(math.sqrt((2 * 0.03**2 + 4 * 0.04**2) / 6))
    rows = [
        {
            "table": "5",
            "task": "rte",
            "knowledge": "cos",
            "strategy": s,
            "value": v,
            "seed": j,
            "row_id": f"{s}{j}",
        }
        for s, values in (("First", (0.70, 0.74, 0.66)), ("Last", (0.71, 0.69, 0.73)))
        for j, v in enumerate(values)
    ]
    view = build_view(get_spec("5"), aggregate_seeds(tidy_rows(rows)))
    (note,) = seeds_needed_notes(view)
    sd = math.sqrt((0.04**2 + 0.02**2) / 2)
    assert (
        f"seed SD {sd:.4f} (pooled over 2 cells)" in note
        and f"you need {seeds_needed(sd, 0.01)} seeds" in note
    )
