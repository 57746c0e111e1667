"""Sweeps shipped with kdgrid: found through the package, and named by bare name on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.bundled_sweeps import BUNDLED_SWEEPS_DIR, bundled_sweep, bundled_sweep_files, find_sweep
from kdgrid.cli import app
from kdgrid.demo import demo_sweep_path


def test_the_bundled_sweeps_are_the_papers_the_demo_and_the_controls() -> None:
    names = [path.stem for path in bundled_sweep_files()]
    assert "demo" in names and {f"table{n}" for n in range(1, 9)} <= {name.split("_")[0] for name in names}
    assert not any(name.startswith("_") for name in names)  # included defaults are not sweeps
    assert [p.name for p in bundled_sweep_files("table5_*.yaml")] == ["table5_single_match.yaml"]
    assert "controls" in names  # the negative-control strategies beside Table 5
    assert demo_sweep_path() == BUNDLED_SWEEPS_DIR / "demo.yaml" and demo_sweep_path().is_file()


def test_a_bare_name_finds_a_bundled_sweep_and_a_path_that_exists_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bundled_sweep("demo") == bundled_sweep("demo.yaml") == BUNDLED_SWEEPS_DIR / "demo.yaml"
    for name in ("nope", "_paper_defaults", "../sweeps/demo", ""):
        assert bundled_sweep(name) is None
    assert find_sweep("demo") == BUNDLED_SWEEPS_DIR / "demo.yaml"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").write_text("name: mine\n")
    assert find_sweep("demo") == Path("demo")  # the user's own file is never shadowed
    assert find_sweep("missing/demo.yaml") == Path("missing/demo.yaml")  # load_sweep reports it


def test_plan_takes_a_bundled_sweep_by_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["plan", "demo", "--store", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["sweep"] == "demo" and plan["trials"] == 52 and plan["file"].endswith("demo.yaml")
