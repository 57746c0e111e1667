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


def one_line_refusal(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    """The CLI's refusal of ``args``: exit status 2 and one line starting ``error:``; returns that line."""
    code, output = run_cli(capsys, *args)
    assert code == 2, (code, output)
    lines = output.strip().split("\n")
    assert lines[0].startswith("error:") and all(line.startswith("  ") for line in lines[1:]), output
    return output


def sweep_text(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_nul_byte_in_a_sweep_or_trial_file_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sweep_text(tmp_path, "name: t\x00\nfixed: {}\n")
    for args in (["plan", path, "--store", tmp_path / "store"], ["trial", path, "--device", "cpu"]):
        output = one_line_refusal(capsys, *args)
        assert str(path) in output and "not valid YAML" in output and "#x0000" in output, output
    assert not (tmp_path / "store").exists()


def test_yaml_nested_a_hundred_thousand_deep_is_refused_in_sweeps_and_slurm_profiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    path = sweep_text(tmp_path, deep)
    output = one_line_refusal(capsys, "plan", path, "--store", tmp_path / "store")
    assert str(path) in output and "nests lists or mappings too deeply" in output, output
    sweep = sweep_text(tmp_path, json.dumps(
        {"name": "t", "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte"}}
    ), "ok.yaml")  # fmt: skip
    profile = sweep_text(tmp_path, deep, "profile.yaml")
    output = one_line_refusal(
        capsys, "plan", sweep, "--store", tmp_path / "store", "--executor", "slurm", "--profile", profile
    )
    assert str(profile) in output and "too deeply" in output, output


def test_a_worker_count_past_any_machine_is_refused_before_the_store_folder_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = sweep_text(tmp_path, json.dumps(
        {"name": "t", "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte"}}
    ))  # fmt: skip
    store = tmp_path / "store"
    for value in ("99999999999999999999", "4097"):
        output = one_line_refusal(capsys, "run", sweep, "--store", store, *FAKE, "--set", f"local_workers={value}")
        assert f"local_workers: expected a whole number >= 0 and <= 4096, got {value}" in output, output
        assert not store.exists()
    output = one_line_refusal(capsys, "run", sweep, "--store", store, *FAKE, "--set", "local_jobs_per_gpu=1e30")
    assert "local_jobs_per_gpu" in output and not store.exists()


@pytest.mark.parametrize("interval", ["1e308", "0", "-1", "nan", "inf", "0.01"])
def test_a_watch_interval_outside_a_tenth_of_a_second_to_a_day_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], interval: str
) -> None:
    out = tmp_path / "report"
    output = one_line_refusal(
        capsys, "report", "--store", tmp_path / "store", "--out", out, "--watch", "--interval", interval
    )
    assert "--interval: expected seconds from 0.1 to 86400" in output, output
    assert not out.exists()
