"""`done_rows` and `latest_done_rows`: the one rule of which rows a done trial is done by (`kdgrid.store.read`)."""

from __future__ import annotations

import pandas as pd

from kdgrid.store.read import done_rows, latest_done_rows


def test_done_rows_drop_failed_ones_and_the_latest_done_row_of_a_trial_counts() -> None:
    rows = pd.DataFrame(
        {
            "trial_id": ["a", "a", "a", "b"],
            "status": ["done", "failed", "done", "failed"],
            "written_at": ["2026-01-01", "2026-01-03", "2026-01-02", "2026-01-01"],
            "row_id": ["a1", "a2", "a3", "b1"],
        }
    )
    assert list(done_rows(rows)["row_id"]) == ["a1", "a3"]
    assert list(latest_done_rows(rows)["row_id"]) == ["a3"]  # written last among a's done rows; b never done


def test_a_frame_without_status_is_taken_as_done_rows() -> None:
    rows = pd.DataFrame({"trial_id": ["a", "a"], "row_id": ["a1", "a2"]})
    assert done_rows(rows) is rows
    assert list(latest_done_rows(rows)["row_id"]) == ["a2"]
