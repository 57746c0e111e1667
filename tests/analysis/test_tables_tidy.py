"""`kdgrid.analysis.tidy`: the store, read back with its own reader, adapted to the tidy format."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kdgrid.analysis.tidy import (
    aggregate_seeds,
    knowledge_label,
    reasons_of_dev_set,
    store_to_tidy,
    table_name,
    table_of,
)
from kdgrid.errors import ConfigError
from kdgrid.paper import reported_metric
from kdgrid.store import read_store, scores_long
from tests.analysis.tables_testing import result, tidy_rows, write


def tidy_of(store, **kwargs) -> pd.DataFrame:
    frame = read_store(store)
    return store_to_tidy(frame, scores_long(frame), **kwargs)


def test_seeds_become_mean_and_sample_std(tmp_path):
    write(
        tmp_path,
        "table5",
        result(0.80, knowledge=("cos",), strategy="Last-1", seed=0),
        result(0.84, knowledge=("cos",), strategy="Last-1", seed=1),
        result(0.70, knowledge=("pkd",), strategy="Last-1", seed=0),
    )
    tidy = tidy_of(tmp_path).set_index("knowledge")
    assert tidy.loc["cos", "value"] == pytest.approx(0.82)
    assert tidy.loc["cos", "std"] == pytest.approx(math.sqrt(((0.02**2) * 2) / 1))  # sample std of 0.80, 0.84
    assert tidy.loc["cos", "n_seeds"] == 2
    assert tidy.loc["pkd", "value"] == pytest.approx(0.70)
    assert math.isnan(tidy.loc["pkd", "std"]) and tidy.loc["pkd", "n_seeds"] == 1
    assert set(tidy["table"]) == {"5"}


def test_per_seed_keeps_each_seed(tmp_path):
    write(
        tmp_path,
        "table5",
        *(result(0.5 + s / 10, knowledge=("cos",), strategy="First", seed=s) for s in range(3)),
    )
    tidy = tidy_of(tmp_path, per_seed=True)
    assert sorted(tidy["seed"]) == [0, 1, 2]
    assert sorted(tidy["value"]) == pytest.approx([0.5, 0.6, 0.7])


def test_failed_rows_are_not_numbers_and_a_retried_trial_counts_once(tmp_path):
    write(tmp_path, "table4", result(0.0, status="failed", temperature=2.0))
    write(tmp_path, "table4", result(0.75, temperature=2.0))
    write(tmp_path, "table4", result(0.9, status="failed", temperature=4.0))  # never succeeded
    tidy = tidy_of(tmp_path)
    assert list(tidy["temperature"]) == [2.0]
    assert list(tidy["value"]) == [0.75] and list(tidy["n_seeds"]) == [1]


def test_config_columns_are_normalised(tmp_path):
    write(
        tmp_path,
        "table8",
        result(0.6, knowledge=("value_relation", "attention_ce_mean"), strategy="First-1", beta="auto"),
        result(0.7, knowledge=(), soft_weight=0.0, alpha=1.0),
    )
    tidy = tidy_of(tmp_path).sort_values("value")
    pair, baseline = tidy.iloc[0], tidy.iloc[1]
    assert pair["knowledge"] == "attention_ce_mean+value_relation"  # sorted: a pair is a set
    assert pair["beta"] == "auto" and pair["strategy"] == "First-1"
    assert baseline["knowledge"] == "" and baseline["strategy"] == ""
    assert baseline["soft_weight"] == 0.0 and baseline["beta"] == "1"
    assert set(tidy["role"]) == {"student"}


def test_every_metric_and_dev_set_is_kept_and_the_reported_metric_picks_the_papers(tmp_path):
    mnli = {
        "validation_matched": {"accuracy": 0.71},
        "validation_mismatched": {"accuracy": 0.72},
    }
    stsb = {"validation": {"pearson": 0.85, "spearman": 0.84}}
    write(tmp_path, "table1", result(mnli, task="mnli"), result(stsb, task="stsb"))
    tidy = tidy_of(tmp_path)
    assert len(tidy) == 4
    reported = tidy[tidy["metric"] == tidy["task"].map(reported_metric)].set_index(["task", "dev_set"])[
        "value"
    ]
    assert reported.to_dict() == {
        ("mnli", "validation_matched"): 0.71,
        ("mnli", "validation_mismatched"): 0.72,
        ("stsb", "validation"): 0.85,
    }


def test_kind_last_reads_the_last_epoch(tmp_path):
    write(tmp_path, "table4", result(0.8, last=0.78))
    assert list(tidy_of(tmp_path, kind="last")["value"]) == [0.78]
    assert list(tidy_of(tmp_path, kind="best")["value"]) == [0.8]
    with pytest.raises(ConfigError, match="unknown score kind 'final'; allowed: best, last"):
        tidy_of(tmp_path, kind="final")


def test_facts_teacher_scores_and_latency_come_along(tmp_path):
    write(
        tmp_path,
        "table2",
        result(
            0.7,
            student="w128-l12",
            student_params=6_360_000,
            student_flops=2_830_000_000,
            extra={"latency_ms": 148.0, "teacher_scores": {"validation": {"accuracy": 0.8775}}},
        ),
    )
    tidy = tidy_of(tmp_path)
    student = tidy[tidy["role"] == "student"].iloc[0]
    assert (student["params_m"], student["flops_g"], student["latency_ms"]) == pytest.approx(
        (6.36, 2.83, 148.0)
    )
    teacher = tidy[tidy["role"] == "teacher"].iloc[0]
    assert teacher["student"] == "" and teacher["teacher"] == "bert-base" and teacher["value"] == 0.8775


def test_latency_is_missing_unless_measured(tmp_path):
    write(tmp_path, "table2", result(0.7, student="w128-l12", student_flops=2_830_000_000))
    assert math.isnan(tidy_of(tmp_path)["latency_ms"].iloc[0])


def test_a_trial_shared_by_two_sweeps_counts_in_both_tables(tmp_path):
    shared = result(0.79, student="bert-mini", temperature=1.0, alpha=0.1)
    write(tmp_path, "table1", shared)
    tidy = tidy_of(tmp_path, table_trials={"table4": [shared.trial.trial_id], "5": ["not-in-store"]})
    assert sorted(tidy["table"]) == ["1", "4"]


def test_table_of_prefers_a_table_name():
    assert table_of("table5", "whatever.yaml") == "5"
    assert table_of("single_match", "sweeps/table5_single_match.yaml") == "5"
    # The controls sweep (Reverse, Random) is no paper table: its rows never land in Table 5's columns.
    assert table_of("main", "sweeps/controls.yaml") == "main"
    assert table_of("main", "controls") == "main"
    assert table_of("demo", "demo") == "demo"
    assert table_of("my-study", "mine.yaml") == "my-study"
    assert table_name("2021-runs") == "2021-runs" and table_name(7) == "7"


def test_knowledge_label_accepts_every_spelling():
    assert knowledge_label(["cos", "attention_ce_mean"]) == "attention_ce_mean+cos"
    assert knowledge_label("cos,attention_ce_mean") == "attention_ce_mean+cos"
    assert knowledge_label('["mmd"]') == "mmd"
    assert knowledge_label(None) == "" and knowledge_label([]) == ""


def test_aggregate_keeps_nan_keyed_rows():
    # Paper-style rows have no temperature: grouping must not drop them.
    rows = tidy_rows(
        [{"table": "5", "task": "rte", "value": 0.6}, {"table": "5", "task": "rte", "value": 0.7}]
    )
    out = aggregate_seeds(rows)
    assert len(out) == 1 and out["value"].iloc[0] == pytest.approx(0.65) and out["n_seeds"].iloc[0] == 2


def test_a_frame_that_is_not_a_store_says_so():
    with pytest.raises(ConfigError, match="is it a kdgrid results store"):
        store_to_tidy(
            pd.DataFrame({"x": [1]}),
            pd.DataFrame({"trial_id": ["a"], "dev_set": ["v"], "metric": ["m"], "value": [1.0]}),
        )


def test_an_empty_store_gives_an_empty_tidy_frame(tmp_path):
    tidy = tidy_of(tmp_path)
    assert tidy.empty and {"table", "knowledge", "value", "std", "n_seeds"} <= set(tidy.columns)


def test_degenerate_reasons_go_to_the_cell_of_their_dev_set():
    reasons = ("validation_matched: constant predictions (every example 0)", "collapsed")
    dev_sets = ("validation_matched", "validation_mismatched")
    assert reasons_of_dev_set(reasons, "validation_matched", dev_sets) == reasons
    assert reasons_of_dev_set(reasons, "validation_mismatched", dev_sets) == ("collapsed",)


def test_aggregating_the_per_seed_rows_gives_the_aggregated_frame(tmp_path):
    # store_to_tidy aggregates a frame it has normalised itself; aggregate_seeds normalises what it is given.
    for seed, value in enumerate((0.70, 0.72, 0.75)):
        write(
            tmp_path,
            "table5",
            result(value, student="bert-mini", knowledge=("mmd",), strategy="Last", seed=seed),
        )
    write(tmp_path, "table5", result(0.6, student="bert-tiny", knowledge=("cos", "mmd"), strategy="First"))
    aggregated = tidy_of(tmp_path)
    pd.testing.assert_frame_equal(aggregated, aggregate_seeds(tidy_of(tmp_path, per_seed=True)))
    assert sorted(aggregated["n_seeds"]) == [1, 3]
