"""`kdgrid pretrain` builds two values from its command line, once: the recipe (a ``--recipe`` file, then
``--set``, then the recipe options) and how it runs (`PretrainRun`), and hands both to one body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.commands import pretrain as pretrain_command
from kdgrid.commands.pretrain import PretrainRun, recipe_from_command_line
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError
from kdgrid.pretrain.run_settings import RunSettings


def test_the_command_line_becomes_one_recipe_and_one_run_value(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[tuple[PretrainRecipe, PretrainRun]] = []
    monkeypatch.setattr(pretrain_command, "run_recipe", lambda recipe, run: handed.append((recipe, run)))
    args = ["pretrain", "--student", "bert-tiny", "--corpus", "generated", "--steps", "5", "--micro-batch", "8",
            "--stop-after", "2", "--device", "cpu", "--slurm", "local", "--nodes", "2", "--no-wait", "--no-progress",
            "--set", "dropout=0.0"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert handed == [(
        PretrainRecipe(student="bert-tiny", corpus="generated", steps=5, dropout=0.0),
        PretrainRun(RunSettings(micro_batch=8, stop_after=2, device="cpu", progress=False), slurm="local", nodes=2,
                    wait=False),
    )]  # fmt: skip


def test_options_override_set_fields_which_override_the_recipe_file(tmp_path: Path) -> None:
    file = tmp_path / "recipe.yaml"
    file.write_text("student: bert-mini\ncorpus: generated\nsteps: 10\nseed: 3\n")
    given: dict[str, Any] = {"steps": None, "seed": None, "student": None}
    assert recipe_from_command_line(file, given, []).steps == 10
    assert recipe_from_command_line(file, given, ["steps=20"]).steps == 20
    recipe = recipe_from_command_line(file, {**given, "steps": 30}, ["steps=20"])
    assert (recipe.steps, recipe.seed, recipe.student) == (30, 3, "w256-l4-h4-f1024")
    with pytest.raises(ConfigError, match=r"^name the student: --student bert-tiny"):
        recipe_from_command_line(None, given, [])


def test_each_process_gets_the_run_settings_of_the_value() -> None:
    run = PretrainRun(RunSettings(micro_batch=4, checkpoint_every=7, stop_after=3, work_dir=Path("w"), device="cpu"))
    settings = run.run_settings()
    assert (settings.micro_batch, settings.checkpoint_every, settings.stop_after, settings.work_dir,
            settings.device, settings.progress) == (4, 7, 3, Path("w"), "cpu", True)  # fmt: skip
    assert run.run_settings(progress=False).progress is False  # a SLURM job's log: no progress bar
