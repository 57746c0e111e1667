"""`plan` refuses what `run` could not run, with bounds: seeds, synthetic task sizes, grid size (``--max-trials``),
names that must become file names; each refusal is one message, exit status 2, and nothing is written; task files
are read strictly (finite regression labels, ASCII class ids)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kdgrid.core.data import load_splits, task_from_spec
from kdgrid.errors import ConfigError
from tests.commands.test_sweep_commands import FAKE, invoke, user_error


def sweep(tmp_path: Path, *, name: str = "bounds", seeds: object = None, **fixed: object) -> Path:
    spec: dict = {
        "name": name,
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte", **fixed},
        "axes": {"lr": [1e-4, 2e-4]},
    }
    if seeds is not None:
        spec["seeds"] = seeds
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec, ensure_ascii=False))
    return path


@pytest.fixture
def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """``refused(sweep file, *words, command=...)``: the command exits 2 with one message holding ``words``, no
    traceback, and nothing written into the store."""

    def check(path: Path, *words: str, command: str = "plan") -> str:
        store = tmp_path / "store"
        args = [command, path, "--store", store] + (list(FAKE) if command == "run" else [])
        message = user_error(capsys, *args)
        for word in words:
            assert word in message, message
        assert not (store / "memberships").exists()  # nothing written before the refusal
        return message

    return check


@pytest.mark.parametrize("seed", [-1, 2**32, 99999999999999999999])
def test_a_seed_outside_0_to_2_32_is_refused_by_plan_and_run(tmp_path: Path, refused, seed: int) -> None:
    path = sweep(tmp_path, seed=seed)
    refused(path, f"seed={seed}", "allowed: an integer in [0, 2^32)")
    refused(path, f"seed={seed}", command="run")


def test_a_data_seed_of_2_32_is_refused(tmp_path: Path, refused) -> None:
    refused(sweep(tmp_path, options={"data_seed": 2**32}), "data_seed=4294967296", "below 4294967296")


def test_seeds_that_walk_past_2_32_are_refused(tmp_path: Path, refused) -> None:
    refused(sweep(tmp_path, seed=2**32 - 2, seeds=3), "seed=4294967296")


def test_a_synthetic_task_larger_than_the_limit_is_refused(tmp_path: Path, refused) -> None:
    path = sweep(tmp_path, task="synthetic-single-binary-n100000000000", teacher="minilm")
    refused(path, "train_size 100,000,000,000 is above the limit of 1,000,000")


def test_a_max_length_beyond_the_position_embeddings_is_refused(tmp_path: Path, refused) -> None:
    refused(sweep(tmp_path, max_length=10**12), "max_length=1000000000000", "allowed: an integer in 8..")


def test_a_grid_above_the_cap_is_refused_at_once_and_max_trials_raises_the_cap(
    tmp_path: Path, refused, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = sweep(tmp_path, seeds=100_000_000)
    refused(huge, "expands to 200,000,000 grid points, above the limit of 50,000", "--max-trials")
    small = sweep(tmp_path, seeds=3)  # 6 trials
    out = user_error(capsys, "plan", small, "--store", tmp_path / "store", "--max-trials", "5")
    assert "expands to 6 grid points, above the limit of 5" in out
    code, out = invoke("plan", small, "--store", tmp_path / "store", "--max-trials", "6")
    assert code == 0, out
    out = user_error(capsys, "plan", small, "--store", tmp_path / "store", "--max-trials", "0")
    assert "--max-trials: expected an integer in 1..100,000,000" in out


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("掃" * 120, ["is 120 characters long; allowed: at most 100"]),
        ("bad\x1b[31mname", ["'\\x1b'"]),
        ("tab\there", ["'\\t'"]),
        ("..", ["'..' is not a name"]),
    ],
)
def test_a_sweep_name_that_cannot_be_a_file_name_is_refused_before_anything_is_written(
    tmp_path: Path, refused, name: str, words: list[str]
) -> None:
    path = sweep(tmp_path, name=name)
    refused(path, "name", *words)
    refused(path, *words, command="run")


def test_a_long_cjk_name_within_the_limit_runs_and_records_its_membership(tmp_path: Path) -> None:
    path = sweep(tmp_path, name="掃" * 100, options={"test_seconds": 0})
    code, out = invoke("run", path, "--store", tmp_path / "store", *FAKE)
    assert code == 0, out
    [membership] = list((tmp_path / "store" / "memberships").iterdir())
    assert len(membership.name.encode()) <= 255


def test_a_study_name_is_checked_as_a_sweep_name(tmp_path: Path, refused) -> None:
    spec = {
        "name": "ok",
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte"},
        "studies": {"x" * 101: {"axes": {"lr": [1e-4]}}},
    }
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(spec))
    refused(path, "the study name is 101 characters long")


def _regression_task(tmp_path: Path, scores: list[object]) -> object:
    pd.DataFrame({"text": [f"t{i}" for i in range(len(scores))], "score": scores}).to_csv(
        tmp_path / "tr.csv", index=False
    )
    return task_from_spec(
        {"name": "r", "files": {"train": "tr.csv", "validation": "tr.csv"}, "text_columns": "text",
         "label_column": "score", "type": "regression"},
        base_dir=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("bad", ["inf", "-inf", "1e308"])
def test_regression_labels_must_be_finite_and_bounded(tmp_path: Path, bad: str) -> None:
    task = _regression_task(tmp_path, [1.0, bad, 2.0])
    with pytest.raises(ConfigError, match=r"regression label\(s\) .* are invalid; allowed: finite numbers"):
        load_splits(task)


def test_a_superscript_digit_is_not_a_class_id(tmp_path: Path) -> None:
    pd.DataFrame({"text": ["a", "b", "c"], "y": ["0", "²", "1"]}).to_csv(tmp_path / "c.csv", index=False)
    task = task_from_spec(
        {"name": "c", "files": {"train": "c.csv", "validation": "c.csv"}, "text_columns": "text",
         "label_column": "y", "type": "classification", "num_labels": 2},
        base_dir=tmp_path,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"label '²' is not a class id in 0\.\.1"):
        load_splits(task)


def test_run_smoke_refuses_a_store_it_would_not_touch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = user_error(capsys, "run", "demo", "--smoke", "--store", tmp_path / "mine")
    assert f"--smoke runs in a throwaway store and never touches --store {tmp_path / 'mine'}" in message
    assert not (tmp_path / "mine").exists()
