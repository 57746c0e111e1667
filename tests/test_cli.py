"""The command line: every sub-command is registered and has useful help; errors a user can act on print one
message and exit 2, and bugs are not disguised as such errors."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import subprocess
import sys

import click
import pytest
import typer
from typer.testing import CliRunner

from kdgrid import errors
from kdgrid.cli import app, main

COMMANDS = [
    "plan",
    "run",
    "status",
    "resume",
    "sweeps",
    "prefetch",
    "tables",
    "figures",
    "report",
    "teacher",
    "trial",
    "assets",
    "store",
    "demo",
    "export",
    "pretrain",
    "methods",
]


def listed_commands(help_text: str) -> set[str]:
    """The names that start a row of the help's "Commands" panel (the app's own description is not searched:
    words such as "run" or "store" occur in it whatever is registered)."""
    panel = help_text.split("Commands", 1)[1]
    return set(re.findall(r"^│ ([a-z]+) ", panel, flags=re.MULTILINE))


def test_top_level_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert listed_commands(result.output) == set(COMMANDS)
    group = typer.main.get_command(app)
    assert set(group.list_commands(click.Context(group))) == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output and len(result.output) > 200
    assert f"Usage: kdgrid {command} " in result.output


def test_user_errors_print_one_message_and_exit_2(tmp_path, capsys):
    sweep = tmp_path / "x.yaml"
    sweep.write_text("name: x\nfixed: {task: polarity, teacher: minilm-l6, student: bert-tiy}\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", str(sweep), "--store", str(tmp_path / "store")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown student 'bert-tiy'" in err and "bert-tiny" in err and "Traceback" not in err
    assert err.count("error:") == 1


USER_ERRORS = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.KdgridError) and cls.__module__ == errors.__name__
]


@pytest.mark.parametrize("error_class", USER_ERRORS, ids=lambda cls: cls.__name__)
def test_every_user_error_class_prints_its_message_alone_and_exits_2(error_class, capsys, monkeypatch):
    def failing_app(args=None, prog_name=None):
        raise error_class(f"what to do about {error_class.__name__}")

    monkeypatch.setattr("kdgrid.cli.app", failing_app)
    with pytest.raises(SystemExit) as exit_info:
        main(["figures"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"what to do about {error_class.__name__}" in err and "Traceback" not in err


def test_a_bug_is_not_reported_as_a_user_error(monkeypatch):
    def buggy_app(args=None, prog_name=None):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("kdgrid.cli.app", buggy_app)
    with pytest.raises(ZeroDivisionError):
        main(["figures"])


def test_console_script_is_installed_and_light():
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "kdgrid"]
    assert script.value == "kdgrid.cli:main"
    # importing the CLI must not start Ray or import torch: `kdgrid --help` stays fast
    code = (
        "import sys, kdgrid.cli; print(sorted(m for m in ('ray', 'torch', 'submitit') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_trial_config_reports_every_problem_at_once_and_canonicalises_names(tmp_path):
    from kdgrid.commands.core import read_trials
    from kdgrid.errors import ConfigError
    from kdgrid.trial import Trial

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "- {task: polarty, teacher: minilm-l6, student: bert-tny, knowledge: [hiden_mse], strategy: Last-2}\n"
        "- {task: polarity, teacher: minilm-l6, student: bert-tiny, colour: red}\n"
    )
    with pytest.raises(ConfigError) as error:
        read_trials(bad)
    message = str(error.value)
    for expected in ("polarty", "bert-tny", "hiden_mse", "Last-2", "trial 1: unknown key 'colour'"):
        assert expected in message

    good = tmp_path / "good.yaml"
    good.write_text(
        "{task: polarity, teacher: minilm-l6, student: bert-tiny, knowledge: [vr], strategy: last-1}\n"
    )
    (trial,) = read_trials(good)
    assert trial == Trial(
        task="polarity",
        teacher="minilm-l6",
        student="bert-tiny",
        knowledge=("value_relation",),
        strategy="Last-1",
    )


def test_scientific_notation_without_a_dot_is_a_number_in_sweep_and_trial_files(tmp_path):
    # PyYAML (YAML 1.1) would read `1e-3` as a string; learning rates are written that way.
    from kdgrid.commands.core import read_trials
    from kdgrid.grid.spec import Problems, load_yaml

    path = tmp_path / "trial.yaml"
    path.write_text(
        "{task: polarity, teacher: minilm-l6, student: bert-tiny, lr: 1e-3, weight_decay: 5E-2}\n"
    )
    assert load_yaml(path, Problems()) == {
        "task": "polarity",
        "teacher": "minilm-l6",
        "student": "bert-tiny",
        "lr": 0.001,
        "weight_decay": 0.05,
    }
    (trial,) = read_trials(path)
    assert (trial.lr, trial.weight_decay) == (0.001, 0.05)
