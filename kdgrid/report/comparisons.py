"""The report's view of two sweeps side by side: for each two sweeps of the store that ran some of the same cells
on other trials (a rerun with other seeds, a new version), the table ``kdgrid tables --sweep A --sweep B`` prints
(`kdgrid.analysis.sweep_compare.compare_runs`: both means, the difference and its test, the correction, the cells
only one ran), on the tables page after the tables. At most `MAX_PAIRS` pairs, in the order of the sweeps' names;
two sweeps whose shared cells are the very same trials (one sweep file listing another's trials) are not
compared: their difference is zero by construction.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

from kdgrid.analysis.sweep_compare import RUN_COLUMNS, compare_runs
from kdgrid.analysis.sweep_tables import SweepRuns
from kdgrid.analysis.tables import TableView
from kdgrid.errors import KdgridError
from kdgrid.predictions import TrialPredictions

MAX_PAIRS = 6


def _keyed(runs: SweepRuns, fields: list[str]) -> list[tuple[tuple[str, ...], str]]:
    """(the run's cell: its settings as labels, ``""`` where it has none; its trial id) of every run."""
    frame = runs.runs.reindex(columns=[*fields, "trial_id"], fill_value="")
    keys = frame[fields].astype(str).itertuples(index=False, name=None)
    return list(zip(keys, frame["trial_id"].astype(str), strict=True))


def comparable(first: SweepRuns, second: SweepRuns) -> bool:
    """Whether the two sweeps share a cell (every setting but the seeds) that they ran on other trials."""
    fields = list(dict.fromkeys(c for r in (first, second) for c in r.runs.columns if c not in RUN_COLUMNS))
    a, b = _keyed(first, fields), _keyed(second, fields)
    shared = {key for key, _ in a} & {key for key, _ in b}
    return bool(shared) and {t for key, t in a if key in shared} != {t for key, t in b if key in shared}


def comparison_views(
    runs: Mapping[str, SweepRuns], predictions: Mapping[str, TrialPredictions]
) -> tuple[list[TableView], list[str]]:
    """The comparisons the tables page shows, and a note when pairs were left out."""
    views: list[TableView] = []
    pairs = [(a, b) for a, b in itertools.combinations(sorted(runs), 2) if comparable(runs[a], runs[b])]
    for a, b in pairs[:MAX_PAIRS]:
        try:
            built = compare_runs((runs[a], runs[b]), (a, b), predictions)
        except KdgridError:
            continue
        built.view.name = "compare-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{a}-vs-{b}")
        views.append(built.view)
    notes = []
    if len(pairs) > MAX_PAIRS:
        notes.append(
            f"{len(pairs)} pairs of sweeps share cells; the first {MAX_PAIRS} are compared here "
            "(kdgrid tables --sweep A --sweep B compares any two)"
        )
    return views, notes
