"""No traceback from input: every command fed a hostile corpus (Rich markup, control characters, huge numbers,
CJK, ``../``) ends with a clean run or a refusal (exit status 1 or 2) and never a traceback; a refusal of kdgrid's
own is one line. User text printed through Rich is shown as written (`kdgrid.markup.plain`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from kdgrid.cli import main
from kdgrid.markup import plain, printable
from tests.commands.test_sweep_commands import FAKE

MARKUP = "[bold]x[/x] [red]y"
CONTROL = "a\x1b[31mb\x07c\nd"
HUGE = "99999999999999999999999"
CJK = "掃除機" * 50
TRAVERSAL = "../../etc/passwd"
CORPUS = [MARKUP, CONTROL, HUGE, CJK, TRAVERSAL]


def test_plain_shows_markup_and_control_characters_as_written() -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(f"sweep {plain(MARKUP)} done")
    assert console.export_text().strip() == f"sweep {MARKUP} done"
    assert printable(CONTROL) == "a\\x1b[31mb\\x07c\\nd"
    assert "\n" not in plain(CONTROL) and "\x1b" not in plain(CONTROL)


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str]:
    """The CLI as a user runs it: its exit status and output; any exception but SystemExit fails the test."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output, output
    return code, output


def command_lines(tmp_path: Path, value: str) -> list[list[object]]:
    store = tmp_path / "store"
    return [
        ["plan", value, "--store", store],
        ["status", value, "--store", store],
        ["run", value, "--store", store, *FAKE],
        ["resume", value, "--store", store, *FAKE],
        ["plan", "demo", "--store", value],
        ["plan", "demo", "--store", store, "--max-group-size", value],
        ["plan", "demo", "--store", store, "--max-trials", value],
        ["plan", "demo", "--store", store, "--memory-budget-gb", value],
        ["plan", "demo", "--store", store, "--set", f"local_workers={value}"],
        ["prefetch", value, "--check"],
        ["trial", value],
        ["teacher", "finetune", value],
        ["teacher", "finetune", "sst2", "--seed", value],
        ["pretrain", value, "--dry-run"],
        ["tables", value, "--store", store],
        ["tables", "all", "--store", value],
        ["tables", "all", "--store", store, "--resamples", value],
        ["figures", "--store", value],
        ["report", "--store", value, "--out", tmp_path / "r"],
        ["report", "--store", store, "--out", value],
        ["store", "check", "--store", value],
        ["store", "compact", "--store", store, "--target-rows", value],
        ["store", "forget", value, "--store", store],
        ["export", "mlflow", "--store", value],
    ]


@pytest.mark.parametrize("value", CORPUS, ids=["markup", "control", "huge", "cjk", "traversal"])
def test_every_command_refuses_or_runs_hostile_input_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative `../` never reaches outside the test's folder anyway
    for args in command_lines(tmp_path, value):
        code, output = run_cli(capsys, *args)
        assert code in (0, 1, 2), (args, code, output)
        assert "\x1b" not in output, (args, output)  # no escape sequence reaches the terminal
        if code == 2 and output.startswith("error:"):
            # kdgrid's refusal: one message (a sweep's problems follow it, one indented line each)
            lines = output.rstrip("\n").split("\n")
            assert output.count("error:") == 1, (args, output)
            if "\n" not in value:  # (a newline the user typed is shown as one)
                assert all(line.startswith("  ") for line in lines[1:]), (args, output)


def test_a_sweep_named_in_markup_runs_with_its_progress_bar_and_prints_the_name_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {
        "name": MARKUP,
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte"},
        "axes": {"lr": [1e-4, 2e-4]},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))
    args = ["run", path, "--store", tmp_path / "store", "--no-preflight", "--set",
            "job_fn=tests.launch.fakes:job_to_store", "--set", "local_progress=true"]  # fmt: skip
    code, output = run_cli(capsys, *args)
    assert code == 0, output
    assert f"{MARKUP}: 2 trials" in output
    code, output = run_cli(capsys, "plan", path, "--store", tmp_path / "store")
    assert code == 0 and MARKUP in output, output
