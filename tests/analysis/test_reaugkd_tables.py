"""ReAugKD's transcribed tables: checked against the paper's own averages and each other; our rows beside them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from kdgrid.analysis.reaugkd_tables import TABLE1_AVERAGES, published_table, reaugkd_comparison


def test_table1_transcription_matches_the_papers_averages() -> None:
    table = published_table(1)
    assert set(table["task"]) == {"cola", "qnli", "qqp", "rte", "sst2", "mrpc"}
    means = table.groupby("method")["value"].mean()
    for method, average in TABLE1_AVERAGES.items():
        assert means[method] == pytest.approx(average, abs=0.006), method  # the paper rounds to 2 decimals
    assert set(table.loc[table["task"] == "cola", "metric"]) == {"mcc"}


def test_table2_without_retrieval_is_table1s() -> None:
    table1 = published_table(1).set_index(["method", "task"])["value"]
    table2 = published_table(2)
    for row in table2[table2["k"] == 0].itertuples():
        assert row.value == table1[("ReAugKD w/o retrieval", row.task)]
    assert sorted(set(table2["k"])) == [0, 5, 10, 15, 20]
    with pytest.raises(ValueError, match="tables 1 and 2"):
        published_table(3)


def _row(
    task: str,
    options: dict,
    scores: float,
    *,
    knowledge: list[str],
    without: float | None = None,
    latency: dict | None = None,
) -> dict:
    reaugkd = {}
    if without is not None:
        reaugkd = {
            "scores_without": {"validation": {"accuracy": without}},
            "latency": {"validation": latency or {}},
        }
    return {
        "status": "done",
        "task": task,
        "options_json": json.dumps(options),
        "knowledge": knowledge,
        "scores_json": json.dumps({"validation": {"accuracy": scores}}),
        "extra_json": json.dumps({"reaugkd": reaugkd}),
    }


def test_our_rows_beside_the_paper() -> None:
    latency = {"batches": 4, "student_ms_per_batch": 100.0, "with_retrieval_ms_per_batch": 102.5}
    rows = pd.DataFrame(
        [
            _row("sst2", {}, 0.90, knowledge=[]),
            _row(
                "sst2",
                {"reaugkd_evaluate": True, "retrieval_k": 5, "retrieval_beta": 0.5},
                0.925,
                knowledge=["reaug_relation"],
                without=0.92,
                latency=latency,
            ),
            _row(
                "sst2",
                {"reaugkd_evaluate": True, "retrieval_k": 5, "retrieval_beta": 0.0},
                0.91,
                knowledge=["reaug_relation"],
                without=0.92,
                latency=latency,
            ),
            {
                **_row(
                    "sst2", {"reaugkd_evaluate": True, "retrieval_k": 10}, 0.99, knowledge=["reaug_relation"]
                ),
                "status": "failed",
            },
        ]
    )
    tables = reaugkd_comparison(rows)
    table1 = tables["table1"].set_index(["method", "task"])
    assert table1.loc[("KD", "sst2"), "ours"] == pytest.approx(90.0)
    assert table1.loc[("ReAugKD", "sst2"), "ours"] == pytest.approx(92.5)
    assert table1.loc[("ReAugKD", "sst2"), "difference"] == pytest.approx(92.5 - 92.5)
    assert table1.loc[("ReAugKD w/o retrieval", "sst2"), "ours"] == pytest.approx(92.0)
    assert pd.isna(table1.loc[("ReAugKD", "cola"), "ours"])  # no rows: no number, never 0
    table2 = tables["table2"].set_index(["task", "k"])
    assert table2.loc[("sst2", 5), "ours"] == pytest.approx(92.5)
    assert table2.loc[("sst2", 5), "our_time_s"] == pytest.approx(2.5 * 4 / 1000)
    assert table2.loc[("sst2", 0), "our_time_s"] == pytest.approx(100.0 * 4 / 1000)
    assert pd.isna(table2.loc[("sst2", 10), "ours"])  # the only k = 10 row failed
