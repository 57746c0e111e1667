"""The per-example dev predictions of a store's rows, for `kdgrid.analysis.cell_stats`: the analysis's one door to them.

Rows of schema version 1 (written before predictions were kept) and failed rows have none: they are absent from
the answer, and their cells simply get no interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kdgrid.predictions import TrialPredictions
from kdgrid.store.predictions import read_predictions


def load_predictions(store_dir: Path, row_ids: Iterable[str]) -> dict[str, TrialPredictions]:
    """Row id -> its predictions per dev set, for those of ``row_ids`` that have any."""
    wanted = sorted({row_id for row_id in row_ids if row_id})
    if not wanted:
        return {}
    return dict(read_predictions(Path(store_dir), wanted))
