"""Every command's help reads plainly: no Python types beside options or arguments, no braces in the usage line,
and one example that the command itself accepts."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.commands.help_style import PLAIN_WORDS

TYPE_NOISE = re.compile(r"<(bool|path|int|float|str|list\[[a-z]+\])>")


def commands() -> Iterator[tuple[list[str], Any]]:
    pending: list[tuple[list[str], Any]] = [([], typer.main.get_command(app))]
    while pending:
        path, command = pending.pop(0)
        if hasattr(command, "commands"):
            pending.extend(([*path, name], sub) for name, sub in command.commands.items())
        else:
            yield path, command


ALL = list(commands())


def test_every_command_is_checked() -> None:
    names = {" ".join(path) for path, _ in ALL}
    assert {"run", "tables", "figures", "report", "prefetch", "teacher check", "store forget"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=[" ".join(p) for p, _ in ALL])
def test_help_without_type_noise_or_braces_and_with_an_example(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert TYPE_NOISE.findall(result.output) == []
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert f"Example: kdgrid {' '.join(path)}" in " ".join(result.output.split())


@pytest.mark.parametrize("path,command", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_each_example_is_accepted_by_its_command(path: list[str], command: Any) -> None:
    example = re.search(r"Example: (.*)", command.help or "")
    assert example is not None
    for line in re.split(r", (?:then|or) ", example.group(1)):
        words = shlex.split(line)
        if words[1 : 1 + len(path)] != path:
            continue  # a follow-up with another command ("then kdgrid plan ...")
        command.make_context(" ".join(["kdgrid", *path]), words[1 + len(path) :])  # parses, runs nothing


def test_usage_names_arguments_in_capitals_and_options_by_plain_words() -> None:
    output = CliRunner().invoke(app, ["prefetch", "--help"], env={"COLUMNS": "200"}).output
    assert "kdgrid prefetch [OPTIONS] SWEEPS..." in output
    output = CliRunner().invoke(app, ["tables", "--help"], env={"COLUMNS": "200"}).output
    assert "kdgrid tables [OPTIONS] [TABLE]" in output
    assert re.search(r"--resamples\s+N\b", output) and re.search(r"--store\s+PATH\b", output)
    assert re.search(r"--pairs\s+With --sweep", output)  # a flag: nothing between its name and its help
    assert set(PLAIN_WORDS.values()) == {"N", "NUMBER", "TEXT", "PATH"}
