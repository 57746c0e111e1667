"""Teacher fine-tuning and its cache; the `kdgrid teacher finetune` and `kdgrid trial` commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml
from transformers import BertForSequenceClassification
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.core.data import get_task
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape, resolve_teacher
from kdgrid.core.model.teacher_cache import TeacherRecipe, cached_teacher, teacher_cache_root
from kdgrid.core.teacher.finetune import finetune_teacher
from kdgrid.errors import KdgridError
from tests.teachers import TINY_TEACHER_SHAPE, save_random_teacher

TASK = "synthetic-single-binary-n192-d64"
RECIPE = TeacherRecipe(lr=3e-3, epochs=4, batch_size=16, max_length=24)


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A tiny random BERT base with the MiniLM tokenizer; the cache in a temporary directory."""
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    yield save_random_teacher(tmp_path / "base", TINY_TEACHER_SHAPE)


def test_finetune_caches_a_teacher_that_beats_the_majority_class(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = finetune_teacher(TASK, base, RECIPE)
    accuracy = record.dev_scores["validation"]["accuracy"]
    assert accuracy > record.info["majority_baseline"]["accuracy"] + 0.2  # a marker-word task is easy
    assert record.path.parent == teacher_cache_root() and record.path.name == record.info["key"]
    assert json.loads((record.path / "teacher.json").read_text())["recipe"]["epochs"] == 4
    assert [p.name for p in teacher_cache_root().iterdir()] == [record.path.name]  # no temporary left behind
    reloaded = BertForSequenceClassification.from_pretrained(record.path)
    assert reloaded.config.num_labels == 2 and (record.path / "tokenizer.json").is_file()
    # Cached: a second call trains nothing.
    import kdgrid.core.data.batching as batching

    monkeypatch.setattr(batching, "train_batches", lambda *a, **k: pytest.fail("trained again"))
    assert finetune_teacher(TASK, base, RECIPE).path == record.path
    assert cached_teacher(TASK, base, RECIPE) is not None
    # Another recipe or another task is another teacher.
    assert cached_teacher(TASK, base, TeacherRecipe(lr=1e-3, epochs=4, batch_size=16, max_length=24)) is None
    assert cached_teacher("synthetic-single-binary-n192-d64-s1", base, RECIPE) is None


def test_a_teacher_that_does_not_beat_the_majority_is_an_error_and_not_cached(base: str) -> None:
    weak = TeacherRecipe(
        lr=3e-3, epochs=1, batch_size=16, max_length=24, max_train_samples=32, min_margin=0.6
    )
    with pytest.raises(KdgridError, match=r"not above the majority class .* by more than 0.6"):
        finetune_teacher(TASK, base, weak)
    assert not teacher_cache_root().exists() or list(teacher_cache_root().iterdir()) == []


def test_the_minilm_alias_resolves_to_the_finetuned_teacher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alias is looked up by (MiniLM weights, task, default recipe): a teacher put in the cache by that key."""
    import kdgrid.core.model.teacher_cache as teacher_module

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    key = teacher_module.teacher_key("minilm-l6", get_task(TASK), TeacherRecipe())
    target = teacher_cache_root() / key
    target.mkdir(parents=True)
    (target / "teacher.json").write_text(json.dumps({"key": key, "dev_scores": {}}))
    BertForSequenceClassification(bert_config(StudentShape(2, 32, 2, 64), 2)).config.save_pretrained(target)
    resolved = resolve_teacher("minilm-l6", TASK)
    assert resolved.source == str(target) and resolved.is_local and resolved.shape.width == 32


def test_cli_teacher_finetune_and_trial(base: str, tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(
        app,
        [
            "teacher",
            "finetune",
            TASK,
            "--base",
            base,
            "--epochs",
            "4",
            "--lr",
            "3e-3",
            "--batch-size",
            "16",
            "--max-length",
            "24",
        ],
    )
    assert done.exit_code == 0, done.output
    teacher = json.loads(done.stdout[done.stdout.index("{") :])["path"]
    common = {
        "task": TASK,
        "teacher": teacher,
        "student": "w32-l2-h2-f64",
        "init": "random",
        "batch_size": 16,
        "max_length": 24,
        "epochs": 1,
        "lr": 2e-3,
    }
    config = tmp_path / "group.yaml"
    config.write_text(
        yaml.safe_dump({"trials": [common, {**common, "knowledge": ["hidden_mse"], "strategy": "Last"}]})
    )
    done = runner.invoke(
        app, ["trial", str(config), "--json", "--device", "cpu", "--save-student", str(tmp_path / "s")]
    )
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["status"] for r in rows] == ["done", "done"]
    assert rows[1]["layer_pairs"] == [[1, 1], [2, 2]] and rows[1]["trial"]["knowledge"] == ["hidden_mse"]
    assert rows[0]["extra"]["teacher_scores"]["validation"]["accuracy"] > 0.7
    assert rows[0]["extra"]["teacher_params"] > 1_000_000
    assert (tmp_path / "s" / rows[0]["trial_id"] / "config.json").is_file()
    # Bad input: one clear error, exit status 2, no traceback.
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**common, "colour": "red"}))
    from kdgrid.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["trial", str(bad)])
    assert exit_info.value.code == 2


def test_the_result_table_shows_scores_and_failures() -> None:
    from rich.console import Console

    from kdgrid.commands.core import _table, result_row
    from kdgrid.result import TrialResult
    from kdgrid.trial import Trial

    trial = Trial(task=TASK, teacher="t", student="bert-tiny", knowledge=("cos",), strategy="First")
    done = TrialResult(
        trial, "done", scores={"validation": {"accuracy": 0.75}}, best_epoch=2, wall_time_s=3.0
    )
    failed = TrialResult(trial, "failed", error_message="diverged at step 3")
    console = Console(record=True, width=200)
    console.print(_table([done, failed]))
    text = console.export_text()
    assert "accuracy=0.7500" in text and "failed: diverged at step 3" in text and trial.trial_id in text
    row = result_row(done)
    assert (
        row["trial_id"] == trial.trial_id and row["trial"]["knowledge"] == ["cos"] and row["status"] == "done"
    )
