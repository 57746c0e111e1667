"""`kdgrid tables` and uncertainty through the CLI: cells aggregate seeds only, bad input exits 2 with one
message, and statistics never change a stored row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import kdgrid.bundled_sweeps as bundled_sweeps
from kdgrid.analysis.tidy import aggregate_seeds, trial_setting
from kdgrid.errors import ConfigError
from kdgrid.store import read_store
from tests.analysis.tables_testing import result, run_kdgrid, tidy_rows, write


@pytest.fixture(autouse=True)
def sweeps_dir(tmp_path, monkeypatch):
    folder = tmp_path / "sweeps"
    folder.mkdir()
    monkeypatch.setattr(bundled_sweeps, "BUNDLED_SWEEPS_DIR", folder)
    return folder


def demo_store(tmp_path, *extra):
    store = tmp_path / "store"
    write(
        store,
        "demo",
        result(0.80, task="polarity", soft_weight=1.0),
        result(0.82, task="polarity", knowledge=("cos",), strategy="First"),
        *extra,
    )
    return store


def test_trials_differing_in_lr_are_refused_naming_the_field_and_the_filter(tmp_path, capsys):
    store = demo_store(tmp_path, result(0.70, task="polarity", knowledge=("cos",), strategy="First", lr=3e-3))
    code, _, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store))
    assert code == 2 and "Traceback" not in err
    assert "differ in lr" in err and "not only in their seed" in err and "--where lr=" in err
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--where", "lr=0.003", "--format", "csv"
    )
    assert code == 0, err
    assert ",0.7," in out and ",0.82," not in out


def test_seeds_of_one_setting_are_aggregated_and_keep_their_rows(tmp_path, capsys):
    store = demo_store(tmp_path, result(0.84, task="polarity", knowledge=("cos",), strategy="First", seed=1))
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--format", "csv")
    assert code == 0, err
    cos = next(line for line in out.splitlines() if ",cos,,First," in line)
    assert ",0.83," in cos and ",2," in cos  # mean of 0.82 and 0.84, two seeds


def test_the_data_order_seed_is_a_seed_too():
    base = {"task": "polarity", "lr": 0.001, "options": {"data_seed": 3, "soft_t2": True}}
    one = json.dumps({**base, "seed": 0, "v": 2})
    other = json.dumps({**base, "seed": 1, "options": {"data_seed": 4, "soft_t2": True}, "v": 2})
    assert trial_setting(one) == trial_setting(other)
    changed = json.dumps({**base, "seed": 1, "options": {"data_seed": 3, "soft_t2": False}})
    assert trial_setting(changed) != trial_setting(one)
    rows = tidy_rows(
        [
            {"table": "demo", "task": "polarity", "value": 0.8, "seed": 0, "setting": trial_setting(one)},
            {"table": "demo", "task": "polarity", "value": 0.7, "seed": 1, "setting": trial_setting(changed)},
        ]
    )
    with pytest.raises(ConfigError, match=r"differ in soft_t2 \(false, true\)"):
        aggregate_seeds(rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resamples", "0"], "--resamples must be at least 1"),
        (["--test-resamples", "0"], "--test-resamples must be at least 1"),
        (["--intervals", "on"], "row schema version 1"),
        (["--reference", "knowledge=hidden_mse"], "no cell matching --reference knowledge=hidden_mse"),
        (["--reference", "colour=blue"], "--reference takes FIELD=VALUE"),
        (["--intervals", "maybe"], "unknown --intervals 'maybe'"),
        (["--values", "loss"], "unknown --values 'loss'"),
        (["--where", "lr"], "--where takes FIELD=VALUE"),
        (["--values", "agreement", "--compare", "paper"], "nothing to --compare with the paper"),
        (["--where", "colour=blue"], "no trial field or option 'colour'"),
        (["--family", "all"], "unknown --family 'all'; allowed: condition, table"),
        (["--correction", "bonferroni"], "unknown --correction 'bonferroni'; allowed: holm, fdr"),
        (["--test", "magic"], "unknown --test 'magic'; allowed: auto, bootstrap"),
        (["--kind", "last", "--intervals", "on"], "--kind last with --intervals on"),
    ],
)
def test_bad_input_gets_one_message_and_exit_2(tmp_path, capsys, args, message):
    store = demo_store(tmp_path)
    code, _, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), *args)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_statistics_never_change_a_stored_row(tmp_path, capsys):
    store = demo_store(tmp_path)
    before = read_store(store)
    files = sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file() and "rows" in p.parts)
    for args in (
        ["--format", "csv"],
        ["--compare", "paper"],
        ["--values", "agreement"],
        ["--resamples", "0"],
    ):
        run_kdgrid(capsys, "tables", "all", "--store", str(store), *args)
    after = read_store(store)
    pd.testing.assert_frame_equal(before, after)
    assert (
        sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file() and "rows" in p.parts) == files
    )


def test_the_agreement_view_shows_the_recorded_agreement(tmp_path, capsys):
    store = demo_store(tmp_path)
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--values", "agreement", "--format", "markdown"
    )
    assert code == 0, err
    assert "student-teacher agreement" in out  # rows without a recorded agreement show "-"


def test_demo_csv_carries_the_uncertainty_columns(tmp_path, capsys):
    store = demo_store(tmp_path)
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--format", "csv")
    assert code == 0, err
    header = out.splitlines()[0].split(",")
    for column in ("value", "ci_low", "ci_high", "n_seeds", "p_vs_reference", "significant"):
        assert column in header
