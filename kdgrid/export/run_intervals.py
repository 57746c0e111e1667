"""The intervals an exported run carries: each done row's score on each dev set with its 95% bootstrap interval
over the dev examples, from the row's stored per-example predictions (`kdgrid.analysis.stats.bootstrap_interval`, the
metric the paper reports for the task: `kdgrid.paper.reported_metric`).

This is one run's interval (examples resampled, this run's seed fixed); the tables' cell intervals, over seeds
where a cell has several, are the ones to compare methods by. Predictions are read `CHUNK_ROWS` rows at a time,
so memory stays bounded on a 30,000-trial store. Rows without predictions (failed rows, schema version 1) get
none.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from kdgrid.analysis.stats import bootstrap_interval
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.export.run_content import RunInterval
from kdgrid.paper import reported_metric

EXPORT_RESAMPLES = 1000  # resamples per run: a 95% percentile interval to about +-0.002 at GLUE dev sizes
CHUNK_ROWS = 256
CONFIDENCE = 0.95
SEED = 0


def _chunks(rows: list[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def run_intervals(store: Path, rows: Iterable[tuple[str, str]]) -> dict[str, list[RunInterval]]:
    """``{row_id: [RunInterval per dev set]}`` for ``rows`` = (row id, task) pairs whose rows hold predictions."""
    found: dict[str, list[RunInterval]] = {}
    for chunk in _chunks(list(rows), CHUNK_ROWS):
        tasks = dict(chunk)
        for row_id, predictions in load_predictions(store, tasks).items():
            metric = reported_metric(tasks[row_id])
            found[row_id] = [
                RunInterval(dev_set, metric, interval.low, interval.high)
                for dev_set, dev in predictions.items()
                for interval in [
                    bootstrap_interval(
                        metric,
                        dev.gold,
                        dev.student,
                        resamples=EXPORT_RESAMPLES,
                        confidence=CONFIDENCE,
                        seed=SEED,
                    )
                ]
            ]
    return found
