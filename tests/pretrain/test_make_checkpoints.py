"""`kdgrid run --make-checkpoints`: the missing checkpoints of the trials to run are made first, one child job
each through the local executor (`kdgrid.pretrain.checkpoint_grid`); nothing to make is a no-op; a checkpoint that
cannot be made stops the run before any trial, with exit status 1 and a message naming it, its error and its log.
The trials themselves run through the fake job function of the launch tests (they train nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kdgrid.cli import main
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.needed import needed_checkpoints, recipe_for_trial
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.pretrain import checkpoint_grid
from kdgrid.pretrain import slurm as pretrain_slurm
from kdgrid.pretrain.checkpoint_grid import CheckpointJobSettings, auto_micro_batch
from kdgrid.store import latest_state, read_store
from kdgrid.sweep_run import RunOptions, run_sweep
from tests.launch.fakes import job_to_store

FAKE_JOBS = {"job_fn": job_to_store, "local_progress": False}
# Trials of a tiny student starting from a recipe's pre-trained checkpoint (init pretrain: no teacher to read).
SWEEP = """name: made
fixed: {{task: mrpc, teacher: bert-base, init: pretrain, options: {{init_recipe: {recipe}}}, epochs: 1}}
axes:
  student: [{students}]
"""


def recipe_file(folder: Path, corpus: str, block_length: int = 16) -> Path:
    path = folder / "tiny_recipe.yaml"
    path.write_text(
        f"corpus: {corpus}\nsteps: 2\nglobal_batch: 8\nblock_length: {block_length}\nlr: 1.0e-3\n"
        "warmup_ratio: 0.0\n"
    )
    return path


def sweep_file(folder: Path, recipe: Path, students: str = "w16-l2-h2-f32") -> Path:
    path = folder / "made.yaml"
    path.write_text(SWEEP.format(recipe=recipe, students=students))
    return path


def test_the_micro_batch_keeps_the_global_batch() -> None:
    assert auto_micro_batch(256, 1) == 32 and auto_micro_batch(256, 8) == 32 and auto_micro_batch(8, 1) == 8
    assert auto_micro_batch(24, 2) == 12 and auto_micro_batch(96, 4) == 24 and auto_micro_batch(7, 2) == 32
    with pytest.raises(ConfigError, match="--pretrain-nodes must be at least 1, got 0"):
        CheckpointJobSettings(nodes=0)


def test_the_missing_checkpoint_is_made_first_then_the_trials_run_and_a_rerun_makes_nothing(
    tmp_path: Path, corpus: str
) -> None:
    sweep = sweep_file(tmp_path, recipe_file(tmp_path, corpus))
    (trial,) = (planned.trial for planned in load_sweep(sweep).trials)
    use = recipe_for_trial(trial)
    assert use is not None and not artifacts.exists(use.recipe)
    lines: list[str] = []
    outcome = run_sweep(
        sweep,
        tmp_path / "store",
        RunOptions(executor_settings=FAKE_JOBS, preflight=False, make_checkpoints=True),
        log=lines.append,
    )  # fmt: skip
    assert outcome.ok and outcome.done_now == 1
    assert artifacts.exists(use.recipe)
    log = artifacts.log_path(use.recipe, "local")
    assert [made.outcome for made in outcome.checkpoints] == ["made"]
    assert any(
        line.startswith("checkpoint made in ")
        and f"key {use.recipe.key}): {artifacts.artifact_dir(use.recipe)} (log: {log})" in line
        for line in lines
    ), lines
    assert log.is_file() and artifacts.recipe_path(use.recipe).is_file()
    # Once made, nothing is made again: the checkpoint is named as already there.
    lines.clear()
    again = run_sweep(
        sweep,
        tmp_path / "store2",
        RunOptions(executor_settings=FAKE_JOBS, preflight=False, make_checkpoints=True),
        log=lines.append,
    )  # fmt: skip
    assert again.ok and again.done_now == 1 and [m.outcome for m in again.checkpoints] == ["already there"]
    assert not any(line.startswith("making ") for line in lines)


def test_make_checkpoints_with_nothing_to_make_changes_nothing(tmp_path: Path) -> None:
    sweep = tmp_path / "plain.yaml"
    sweep.write_text(
        "name: plain\nfixed: {task: mrpc, teacher: bert-base, epochs: 1}\naxes:\n  student: [bert-tiny]\n"
    )
    lines: list[str] = []
    outcome = run_sweep(
        sweep,
        tmp_path / "store",
        RunOptions(executor_settings=FAKE_JOBS, preflight=False, make_checkpoints=True),
        log=lines.append,
    )  # fmt: skip
    assert outcome.ok and outcome.done_now == 1 and outcome.checkpoints == ()
    assert not any("checkpoint" in line for line in lines), lines
    assert not artifacts.pretrained_root().exists()
    # `kdgrid resume` takes the option too: nothing to make, nothing left to run.
    with pytest.raises(SystemExit) as exit_info:
        main(["resume", str(sweep), "--store", str(tmp_path / "store"), "--no-preflight", "--make-checkpoints",
              "--set", "job_fn=tests.launch.fakes:job_to_store", "--set", "local_progress=false"])  # fmt: skip
    assert exit_info.value.code == 0
    assert not artifacts.pretrained_root().exists()


def test_a_checkpoint_that_cannot_be_made_stops_the_run_before_any_trial(
    tmp_path: Path, corpus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    short = tmp_path / "short.txt"
    short.write_text("too short for one block.")
    bad = recipe_file(tmp_path, str(short), block_length=128)
    sweep = sweep_file(tmp_path, bad, students="w16-l2-h2-f32, w32-l2-h2-f64")
    tiny, small = (recipe_for_trial(planned.trial) for planned in load_sweep(sweep).trials)
    assert tiny is not None and small is not None
    store = tmp_path / "store"
    argv = ["run", str(sweep), "--store", str(store), "--no-preflight", "--make-checkpoints",
            "--set", "job_fn=tests.launch.fakes:job_to_store", "--set", "local_progress=false"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert "2 of 2 pre-training checkpoint(s) could not be made, so no trial ran:" in out
    for use in (tiny, small):
        log = artifacts.log_path(use.recipe, "local")
        assert (
            f"  pretrain of {use.recipe.student} (recipe {bad}, key {use.recipe.key}): exit status 2: " in out
        )
        assert f"(log: {log})" in out and "fewer than one block of 128" in log.read_text()
    assert "fewer than one block of 128" in out
    assert "resumes from its newest step checkpoint" in out
    assert out.count("checkpoint FAILED after ") == 2
    assert not store.exists()  # no trial ran: the store was not even created


def test_make_checkpoints_with_smoke_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "demo", "--smoke", "--make-checkpoints"])
    assert exit_info.value.code == 2
    assert "--make-checkpoints goes with a real run, not --smoke" in capsys.readouterr().err


@pytest.mark.slow
def test_end_to_end_the_local_executor_makes_the_checkpoint_then_runs_the_trials(
    tmp_path: Path, teacher: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kdgrid run --make-checkpoints` of a tiny sweep: a general distillation from the offline MiniLM on generated
    text (10 steps) in a child process, then the trials through the real core, starting from it; run again, it
    does nothing."""
    recipe = tmp_path / "gd_recipe.yaml"
    recipe.write_text(
        "teacher: minilm-l6\ncorpus: generated\nmax_documents: 200\nsteps: 10\nglobal_batch: 8\n"
        "block_length: 32\nlr: 1.0e-3\n"
    )
    sweep = tmp_path / "gd.yaml"
    spec = {
        "name": "gd",
        "fixed": {"task": "synthetic-single-binary-n96-d32", "teacher": teacher, "student": "w32-l2-h2-f64",
                  "init": "general_distillation", "batch_size": 16, "max_length": 24, "epochs": 1, "lr": 2e-3,
                  "options": {**NOT_MEANT_TO_BE_ACCURATE, "init_recipe": str(recipe)}},
        "axes": {"knowledge": [[], ["value_relation"]], "strategy": ["Last-1"]},
    }  # fmt: skip
    sweep.write_text(json.dumps(spec))
    (trial, _) = (planned.trial for planned in load_sweep(sweep).trials)
    use = recipe_for_trial(trial)
    assert use is not None and use.recipe.teacher == "minilm-l6" and use.recipe.steps == 10
    store = tmp_path / "store"
    argv = ["run", str(sweep), "--store", str(store), "--make-checkpoints", "--set", "local_progress=false"]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out = capsys.readouterr().out
    assert exit_info.value.code == 0, out
    assert (
        "checkpoint made in " in out and f"key {use.recipe.key}): {artifacts.artifact_dir(use.recipe)}" in out
    )
    assert artifacts.exists(use.recipe)
    frame = read_store(store)
    assert len(frame) == 2 and set(latest_state(frame)["state"]) == {"done"}
    for extra in frame["extra_json"]:
        recorded = json.loads(extra)
        assert recorded["init_recipe"] == {"name": str(recipe), "key": use.recipe.key}
        assert recorded["init_source"] == str(artifacts.artifact_dir(use.recipe))
    with pytest.raises(SystemExit) as again:
        main(argv)
    out = capsys.readouterr().out
    assert again.value.code == 0 and "to run now 0" in out and "checkpoint" not in out
    assert len(read_store(store)) == 2


def test_slurm_checkpoint_jobs_are_reported_as_each_ends_not_in_submission_order(
    tmp_path: Path, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submitted first, the slow job must not hold back the line (and the time) of a job that ended before it."""
    sweep = sweep_file(tmp_path, recipe_file(tmp_path, corpus), students="w16-l2-h2-f32, w16-l1-h2-f32")
    needed = needed_checkpoints(planned.trial for planned in load_sweep(sweep).trials)
    assert len(needed) == 2
    polls_left = {needed[0].key: 3, needed[1].key: 0}  # the first submitted ends three polls after the second

    class FakeJob:
        def __init__(self, key: str) -> None:
            self.key, self.paths = key, SimpleNamespace(folder=tmp_path / key)

        def done(self) -> bool:
            polls_left[self.key] -= 1
            return polls_left[self.key] < 0

    runner = SimpleNamespace(settings=SimpleNamespace(), poll_interval_s=0.0)
    monkeypatch.setattr(pretrain_slurm, "job_shape", lambda *args: SimpleNamespace(world_size=1))
    monkeypatch.setattr(pretrain_slurm, "submit", lambda recipe, *args, **kwargs: FakeJob(recipe.key))
    monkeypatch.setattr(pretrain_slurm, "wait", lambda job: {})
    lines: list[str] = []
    made = checkpoint_grid.make_on_slurm(needed, runner, CheckpointJobSettings(), lines.append)  # type: ignore[arg-type]
    assert [m.needed.key for m in made] == [n.key for n in needed]  # returned in the order needed
    ended = [line for line in lines if line.startswith("checkpoint ")]
    assert [needed[1].key in ended[0], needed[0].key in ended[1]] == [True, True], ended
    assert all(
        m.outcome == checkpoint_grid.FAILED and "without the checkpoint" in m.error for m in made
    )  # nothing was trained
