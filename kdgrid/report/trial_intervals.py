"""Each done trial's 95% interval for the report's trial list: the percentile bootstrap interval of the score the
list shows (the task's reported metric on its first dev set) over that dev set's examples, from the row's
per-example predictions.

The same interval as `kdgrid.analysis.stats.bootstrap_interval` of that one run (1,000 resamples, seed 0): rows are
scored on shared example samples (`kdgrid.analysis.replicate_bank.ReplicateBank`, which draws a dev set's samples
once for every run on it), a block of `CHUNK_ROWS` rows at a time so memory stays bounded at 30,000 trials. A row
never changes, so `TrialIntervals` computes each row's interval once, however often a watched report is updated.
Rows without predictions (schema version 1) and failed rows get none.
"""

from __future__ import annotations

from pathlib import Path

from kdgrid.analysis import stats
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.paper import reported_metric
from kdgrid.report.gather import ReportData, parse_json

CHUNK_ROWS = 1024
"""Rows scored per pass: the replicate scores of a pass are resamples x rows float64 (8 MB at 1,000 x 1,024)."""

Interval = tuple[float, float]


def first_dev_set(scores_json: object) -> str | None:
    """The dev set the trial list's score is on: the first of the row's scores (as `trial_list.primary_score`)."""
    scores = parse_json(scores_json, {})
    return next(iter(scores), None) if isinstance(scores, dict) else None


class TrialIntervals:
    """The 95% intervals of a store's done trials, each row's computed once.

    Args:
        store: the store whose rows' predictions are read.
        resamples: bootstrap resamples of each interval (`stats.DEFAULT_RESAMPLES`, as the tables').
    """

    def __init__(self, store: Path, resamples: int = stats.DEFAULT_RESAMPLES) -> None:
        self.store = Path(store)
        self.resamples = resamples
        self._by_row: dict[str, Interval | None] = {}

    def of(self, data: ReportData) -> dict[str, Interval]:
        """Trial id -> (low, high) for every done trial of ``data`` whose row has predictions on its first dev set."""
        done = data.trials[data.trials["state"] == "done"]
        wanted = {
            str(row_id): (str(task), first_dev_set(scores))
            for row_id, task, scores in zip(done["row_id"], done["task"], done["scores_json"], strict=True)
            if str(row_id) not in self._by_row
        }
        ids = list(wanted)
        for start in range(0, len(ids), CHUNK_ROWS):
            self._score({row_id: wanted[row_id] for row_id in ids[start : start + CHUNK_ROWS]})
        out = {}
        for trial_id, row_id in zip(done.index, done["row_id"], strict=True):
            interval = self._by_row.get(str(row_id))
            if interval is not None:
                out[str(trial_id)] = interval
        return out

    def _score(self, rows: dict[str, tuple[str, str | None]]) -> None:
        predictions = load_predictions(self.store, rows)
        bank = ReplicateBank(self.resamples, seed=0)
        registered = []
        for row_id, (task, dev_set) in rows.items():
            dev = predictions.get(row_id, {}).get(dev_set) if dev_set else None
            self._by_row[row_id] = None
            if dev is None or len(dev.gold) == 0:
                continue
            metric = reported_metric(task)
            bank.register(metric, dev.fingerprint, dev.gold, row_id, dev.student)
            registered.append((row_id, metric, dev.fingerprint))
        for row_id, metric, fingerprint in registered:
            replicates, full, _ = bank.replicates(metric, fingerprint, (row_id,))
            interval = stats.interval_from_replicates(
                replicates[:, 0], float(full[0]), stats.DEFAULT_CONFIDENCE
            )
            self._by_row[row_id] = (interval.low, interval.high)
