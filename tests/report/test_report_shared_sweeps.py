"""Two sweeps that share a store's trials (one wrote the rows, the other lists the same trials and one more): the
report counts each trial once, shows each sweep's state as `kdgrid status` counts it, states a finding once, and
says under a sweep's table that some of its trials are pending."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from kdgrid.predictions import DevSetPredictions
from kdgrid.report.build import ReportWriter
from kdgrid.store.membership import record_membership
from kdgrid.trial import Trial
from tests.analysis.tables_testing import result, write

N = 200
GOLD = np.arange(N) % 2


def run(share: float, **fields):
    student = np.where(np.arange(N) < round(share * N), GOLD, 1 - GOLD)
    outcome = {"validation": DevSetPredictions(GOLD, student, None, "d" * 64)}
    return dataclasses.replace(result(share, task="sst2", **fields), predictions=outcome)


def test_two_sweeps_sharing_trials(tmp_path: Path) -> None:
    store = tmp_path / "store"
    made = [run(share, lr=lr, seed=seed) for lr, shares in ((1e-3, (0.6, 0.62)), (1e-2, (0.8, 0.83)))
            for seed, share in enumerate(shares)]  # fmt: skip
    write(store, "main", *made, sweep="first")
    ids = {r.trial.trial_id: "main" for r in made}
    record_membership(store, "first", ids)
    extra = Trial(task="sst2", teacher="bert-base", student="bert-tiny", lr=1e-1, seed=0).trial_id
    record_membership(store, "second", {**ids, extra: "main"})
    out = tmp_path / "report"
    ReportWriter(store, out, figures=False).update()
    overview = (out / "index.html").read_text()
    cards = dict(
        (label, int(value.replace(",", "")))
        for value, label in re.findall(
            r'<div class="big[^"]*">([\d,]+)</div><div class="label">([^<]+)</div>', overview
        )
    )
    assert cards["trials done"] == 4  # not 8: the second sweep lists the same four trials
    assert cards["pending (0 running)"] == 1
    studies = overview[overview.index('<table class="overview">') :].split("</table>")[0]
    lines = re.findall(r"<tr><td>(first|second)</td><td>main</td><td>.*?</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>",
                       studies)  # fmt: skip
    assert sorted(lines) == [
        ("first", "4", "0", "0"),
        ("second", "4", "0", "1"),
    ]  # as `status` counts each sweep
    # lr 0.01 beats lr 0.001 by 0.2 in both sweeps' tables: one finding, not two
    assert "1 better and 0 worse than their reference, of 1 cells tested" in overview
    tables = (out / "tables.html").read_text()
    assert "pending: 1 trial(s) of this sweep have no row yet" in tables
