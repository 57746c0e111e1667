"""`kdgrid run` and `kdgrid resume` build one `RunOptions` from their command line and hand it down whole: each
flag lands in its field, ``resume`` differs only by ``max_attempts``, and ``--smoke`` gets the same value."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from kdgrid import sweep_run
from kdgrid.cli import app
from kdgrid.commands import sweep as sweep_command
from kdgrid.errors import ConfigError
from kdgrid.pretrain.checkpoint_grid import CheckpointJobSettings
from kdgrid.sweep_run import RunOptions

FLAGS = ["--set", "local_workers=2", "--max-group-size", "3", "--memory-budget-gb", "4", "--no-preflight",
         "--online", "--no-compact", "--pretrain-nodes", "2", "--pretrain-checkpoint-every", "50",
         "--max-trials", "500"]  # fmt: skip
EXPECTED = RunOptions(
    executor="local",
    executor_settings={"local_workers": 2},
    memory_budget_gb="4",
    max_group_size=3,
    preflight=False,
    online=True,
    compact_after=False,
    checkpoint_settings=CheckpointJobSettings(checkpoint_every=50, nodes=2),
    max_trials=500,
)


@pytest.fixture
def handed_down(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What `run_sweep` and `smoke_sweep` were called with (nothing runs)."""
    seen: list[tuple[str, Any]] = []

    def fake_run(sweep: Path, store: Path, options: RunOptions, *, log: Any) -> Any:
        seen.append(("run", (Path(sweep).name, Path(store).name, options)))
        return SimpleNamespace(ok=True)

    def fake_smoke(sweep: Path, options: RunOptions, *, keep: bool, log: Any) -> Any:
        seen.append(("smoke", (Path(sweep).name, options, keep)))
        return SimpleNamespace(ok=False)

    monkeypatch.setattr(sweep_run, "run_sweep", fake_run)
    monkeypatch.setattr(sweep_run, "smoke_sweep", fake_smoke)
    return seen


def test_run_hands_its_flags_down_as_one_value(handed_down: list[tuple[str, Any]]) -> None:
    result = CliRunner().invoke(app, ["run", "demo", "--store", "elsewhere", *FLAGS])
    assert result.exit_code == 0, result.output
    assert handed_down == [("run", ("demo", "elsewhere", EXPECTED))]


def test_resume_is_run_with_max_attempts(handed_down: list[tuple[str, Any]]) -> None:
    result = CliRunner().invoke(
        app, ["resume", "demo", "--store", "elsewhere", "--max-attempts", "2", *FLAGS]
    )
    assert result.exit_code == 0, result.output
    [(_, (_, _, options))] = handed_down
    assert options.max_attempts == 2 and options == RunOptions(**{**EXPECTED.__dict__, "max_attempts": 2})


def test_smoke_gets_the_same_value_and_exits_1_when_a_group_failed(
    handed_down: list[tuple[str, Any]],
) -> None:
    result = CliRunner().invoke(app, ["run", "demo", "--smoke", "--keep", *FLAGS])
    assert result.exit_code == 1
    assert handed_down == [("smoke", ("demo", EXPECTED, True))]


def test_a_bad_flag_is_refused_before_anything_runs(handed_down: list[tuple[str, Any]]) -> None:
    result = CliRunner().invoke(app, ["run", "demo", "--pretrain-nodes", "0"])
    assert isinstance(result.exception, ConfigError)  # `kdgrid` prints it and exits 2 (kdgrid.cli.main)
    assert str(result.exception) == "--pretrain-nodes must be at least 1, got 0"
    result = CliRunner().invoke(app, ["resume", "demo", "--set", "local_workers"])
    assert isinstance(result.exception, ConfigError) and "write KEY=VALUE" in str(result.exception)
    assert handed_down == []


PLAN_FLAGS = [
    "--set",
    "local_workers=2",
    "--max-group-size",
    "3",
    "--memory-budget-gb",
    "4",
    "--max-trials",
    "500",
]


@pytest.mark.parametrize(
    ("command", "view"), [("plan", sweep_command.PLAN_VIEW), ("status", sweep_command.STATUS_VIEW)]
)
def test_plan_and_status_hand_down_the_planning_half_of_runs_value(
    monkeypatch: pytest.MonkeyPatch, command: str, view: Any
) -> None:
    # `plan` / `status` must plan the jobs `run` will start: the same flags give the same planning fields.
    seen: list[tuple[str, Any, Any]] = []
    monkeypatch.setattr(
        sweep_command,
        "_show",
        lambda sweep, store, options, shown: seen.append((Path(sweep).name, options, shown)),
    )
    result = CliRunner().invoke(app, [command, "demo", "--json", *PLAN_FLAGS])
    assert result.exit_code == 0, result.output
    [(name, options, shown)] = seen
    assert (name, shown) == ("demo", view)
    assert options == sweep_command.PlanOptions(
        executor="local", executor_settings={"local_workers": 2}, memory_budget_gb="4", max_group_size=3,
        max_trials=500, as_json=True,
    )  # fmt: skip
    planning = ("executor", "executor_settings", "memory_budget_gb", "max_group_size", "max_trials")
    assert {k: getattr(options, k) for k in planning} == {k: getattr(EXPECTED, k) for k in planning}


def test_plan_refuses_a_bad_flag_before_reading_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_command, "_show", lambda *args: pytest.fail("the sweep was read"))
    result = CliRunner().invoke(app, ["plan", "no-such-sweep", "--profile", "gpu"])
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == "--profile is a SLURM setting; the executor is 'local'"
