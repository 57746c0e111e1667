"""End to end with the real core: a sweep file -> `kdgrid run` -> rows from `run_job` -> status / scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.store import latest_state, read_store, scores_long

TASK = "synthetic-single-binary-n96-d32"


def count_teacher_passes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Wrap the core so that it records each job it loads (its batches per epoch) and each teacher forward."""
    from kdgrid.core.training import train

    seen: dict[str, list[int]] = {"jobs": [], "forwards": []}
    load_job, teacher_forward = train.load_job, train.teacher_forward

    def counting_load_job(*args, **kwargs):
        job = load_job(*args, **kwargs)
        seen["jobs"].append(job.steps_per_epoch)
        return job

    def counting_forward(job, capture, batch):
        seen["forwards"].append(int(batch["input_ids"].shape[0]))
        return teacher_forward(job, capture, batch)

    monkeypatch.setattr(train, "load_job", counting_load_job)
    monkeypatch.setattr(train, "teacher_forward", counting_forward)
    return seen


def test_a_tiny_sweep_runs_through_the_real_core(
    tmp_path: Path, teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two studies sharing a group (same task, teacher, seed, batch, length, epochs): one job, so one teacher
    forward per batch for all three trials, and each row under its own study."""
    seen = count_teacher_passes(monkeypatch)
    sweep = tmp_path / "tiny.yaml"
    spec = {
        "name": "tiny",
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random",
                  "batch_size": 16, "max_length": 24, "epochs": 2, "lr": 2e-3,
                  "options": NOT_MEANT_TO_BE_ACCURATE},
        "studies": {
            "match": {"axes": {"knowledge": ["cos", "value_relation"], "strategy": ["Last-1"]}},
            "baseline": {"include": [{"knowledge": []}]},
        },
    }  # fmt: skip
    sweep.write_text(json.dumps(spec))
    store = tmp_path / "store"
    result = CliRunner().invoke(
        app,
        ["run", str(sweep), "--store", str(store), "--set", "local_progress=false"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    [steps_per_epoch] = seen["jobs"]  # one job for both studies
    assert len(seen["forwards"]) == 2 * steps_per_epoch  # epochs x batches: one teacher pass per batch
    frame = read_store(store)
    assert len(frame) == 3 and set(latest_state(frame)["state"]) == {"done"}
    baseline = frame["loss_terms_json"].map(lambda t: not any("@" in k for k in json.loads(t)))
    assert set(zip(frame["study"], baseline, strict=True)) == {("match", False), ("baseline", True)}
    match = frame[frame["study"] == "match"]
    assert all(json.loads(p) == [[2, 3]] for p in match["layer_pairs_json"])  # Last-1: student 2 <- teacher 3
    assert all(
        any(k.startswith(("cos@", "value_relation@")) for k in json.loads(t))
        for t in match["loss_terms_json"]
    )
    assert (frame["wall_time_s"] > 0).all() and frame["best_epoch"].between(1, 2).all()
    assert (frame["student_layers"] == 2).all() and (frame["student_width"] == 32).all()
    tidy = scores_long(frame)
    assert set(tidy["dev_set"]) == {"validation"} and tidy["value"].between(0, 1).all()
    assert (store / "_checkpoints").is_dir()  # run_job was given a checkpoint folder under the store
    assert not any((store / "_checkpoints").rglob("*.pt"))  # finished trials leave no checkpoint behind
    again = CliRunner().invoke(app, ["run", str(sweep), "--store", str(store)], catch_exceptions=False)
    assert again.exit_code == 0 and "to run now 0" in again.output


def test_a_run_whose_output_is_a_log_writes_a_line_per_epoch(tmp_path: Path, teacher: str) -> None:
    """`kdgrid run > run.log`: the output is no terminal, so the real core's epochs each leave a plain line."""
    sweep = tmp_path / "logged.yaml"
    spec = {
        "name": "logged",
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random",
                  "batch_size": 32, "max_length": 24, "epochs": 3, "lr": 2e-3,
                  "options": NOT_MEANT_TO_BE_ACCURATE},
        "studies": {"match": {"axes": {"knowledge": [[], ["cos"]], "strategy": ["Last-1"]}}},
    }  # fmt: skip
    sweep.write_text(json.dumps(spec))
    result = CliRunner().invoke(
        app, ["run", str(sweep), "--store", str(tmp_path / "store")], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    epochs = [line for line in result.stdout.splitlines() if ": epoch " in line]  # stderr has tqdm bars
    assert [line.split(": epoch ")[1].split(" done")[0] for line in epochs] == ["1/3", "2/3", "3/3"], (
        result.stdout
    )
    assert all(line.startswith("kdgrid: job 1/1 (2 students, ") and "ETA" in line for line in epochs), epochs
    assert "kdgrid: job 1/1 ended: 2 done, 0 failed" in result.stdout
