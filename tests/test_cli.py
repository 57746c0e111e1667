"""The command line: every sub-command has useful help; commands not built yet say so and exit non-zero."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app, main

COMMANDS = [
    "plan",
    "run",
    "status",
    "resume",
    "tables",
    "figures",
    "teacher",
    "trial",
    "assets",
    "store",
    "demo",
]


def test_top_level_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output and len(result.output) > 200


def test_user_errors_print_one_message_and_exit_2(capsys, monkeypatch):
    from kdgrid.errors import ConfigError

    def failing_app(args=None, prog_name=None):
        raise ConfigError(
            "sweeps/x.yaml: axes.student: unknown student 'bert-tiy'; allowed: bert-tiny, bert-mini"
        )

    monkeypatch.setattr("kdgrid.cli.app", failing_app)
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "sweeps/x.yaml"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown student 'bert-tiy'" in err and "allowed: bert-tiny" in err and "Traceback" not in err


def test_a_command_not_built_yet_says_so_and_fails(capsys, monkeypatch):
    from kdgrid.commands.common import not_yet

    def unbuilt_app(args=None, prog_name=None):
        raise not_yet("figures", "analysis issue")

    monkeypatch.setattr("kdgrid.cli.app", unbuilt_app)
    with pytest.raises(SystemExit) as exit_info:
        main(["figures"])
    assert exit_info.value.code == 2
    assert "`kdgrid figures` is not implemented yet" in capsys.readouterr().err


def test_console_script_is_installed_and_light():
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
        student=trial.student,
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
