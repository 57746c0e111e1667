"""Finding your way: `kdgrid sweeps`, "did you mean" on unknown names, and descriptions that leave trial ids be."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.bundled_sweeps import BUNDLED_SWEEPS_DIR, bundled_sweep_files
from kdgrid.cli import app, main
from kdgrid.core.data import get_task
from kdgrid.core.knowledge import canonical_knowledge
from kdgrid.core.matching import canonical_strategy
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.grid import load_sweep
from kdgrid.suggest import close_names, did_you_mean


def test_close_names_prefer_what_a_shortened_name_starts_then_similar_spellings() -> None:
    known = ["table5_single_match", "table6_double_match", "table8_weighted", "demo"]
    assert close_names("table5", known) == ["table5_single_match"]
    assert close_names("TABLE8_WEIGHTD", known) == ["table8_weighted"]  # case and a typo
    assert close_names("zzz", known) == [] and did_you_mean("zzz", known) == ""
    assert did_you_mean("dem", known) == "; did you mean 'demo'?"
    assert close_names("", known) == []


def test_unknown_knowledge_strategy_and_task_names_suggest_the_close_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown knowledge 'hiden_mse'; valid names: .*; did you mean 'hidden_mse'\?$"
    ):
        canonical_knowledge("hiden_mse")
    with pytest.raises(ConfigError, match=r"'Dilatatoin'; valid strategies: .*; did you mean 'Dilatation'"):
        canonical_strategy("Dilatatoin")
    with pytest.raises(ConfigError, match=r"unknown task 'sst'; known tasks: .*; did you mean 'sst2'"):
        get_task("sst")


def test_an_unknown_teacher_alias_suggests_the_close_one() -> None:
    from kdgrid.core.model.shapes import resolve_teacher

    with pytest.raises(KdgridError, match=r"teacher 'bert-bse' is neither .*; did you mean 'bert-base'"):
        resolve_teacher("bert-bse", "rte")


def test_an_unknown_sweep_name_suggests_the_bundled_one_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "table5", "--store", str(tmp_path / "s")])
    assert exit_info.value.code == 2
    message = " ".join(capsys.readouterr().err.split())
    assert message.startswith("error: table5: cannot read the file")
    assert "did you mean 'table5_single_match'?" in message and "kdgrid sweeps" in message
    assert not (tmp_path / "s").exists()


def test_sweeps_lists_every_bundled_sweep_with_its_trials_and_purpose() -> None:
    result = CliRunner().invoke(app, ["sweeps", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    files = bundled_sweep_files()
    assert [item["name"] for item in listed] == [path.stem for path in files]
    for item, path in zip(listed, files, strict=True):
        sweep = load_sweep(path)
        assert item["trials"] == len(sweep.trials) and item["studies"] == sweep.studies
        assert (
            item["purpose"] == sweep.description and item["purpose"]
        )  # every bundled sweep says what it is for
        assert "\n" not in item["purpose"]
    table5 = next(item for item in listed if item["name"] == "table5_single_match")
    assert table5["purpose"].startswith("Table 5: single match")
    text = CliRunner().invoke(app, ["sweeps"]).output
    assert "table5_single_match" in text and "1,200" in text


def test_a_sweep_without_a_description_shows_its_first_comment_line(tmp_path: Path) -> None:
    from kdgrid.sweep_listing import sweep_purpose

    path = tmp_path / "mine.yaml"
    path.write_text("#\n# My study: cos vs mmd.\n# more\nname: mine\n")
    assert sweep_purpose("", path) == "My study: cos vs mmd."
    assert sweep_purpose("  given\n  here ", path) == "given here"


@pytest.mark.parametrize("name", ["demo", "table5_single_match", "table1_init"])
def test_a_description_does_not_change_trial_ids(tmp_path: Path, name: str) -> None:
    """The description is the sweep's, not its trials': the same file without it gives the same ids."""
    shutil.copy(BUNDLED_SWEEPS_DIR / "_paper_defaults.yaml", tmp_path / "_paper_defaults.yaml")
    text = (BUNDLED_SWEEPS_DIR / f"{name}.yaml").read_text()
    assert "\ndescription: " in text
    stripped = "\n".join(line for line in text.splitlines() if not line.startswith("description: "))
    (tmp_path / f"{name}.yaml").write_text(stripped)
    with_description = load_sweep(BUNDLED_SWEEPS_DIR / f"{name}.yaml")
    without = load_sweep(tmp_path / f"{name}.yaml")
    assert without.description == "" and with_description.description
    assert [p.trial.trial_id for p in without.trials] == [p.trial.trial_id for p in with_description.trials]


def test_plan_shows_the_axes_and_why_trials_run_as_the_jobs_they_do(tmp_path: Path) -> None:
    from tests.commands.test_sweep_commands import as_json, invoke, sweep_file

    sweep, store = sweep_file(tmp_path), tmp_path / "store"  # task x temperature (2 x 3), and rte at T=8
    plan = as_json("plan", sweep, "--store", store, "--memory-budget-gb", "0")
    assert plan["axes"] == {"task": ["rte", "mrpc"], "temperature": ["1.0", "2.0", "4.0", "8.0"]}
    assert plan["job_split"] == {"groups": 2, "group_fields_differing": {"task": 2}, "split_groups": 0,
                                 "jobs_of_split_groups": 0, "split_by": None}  # fmt: skip
    split = as_json("plan", sweep, "--store", store, "--memory-budget-gb", "0", "--max-group-size", "2")
    assert split["jobs"] == 4  # rte: 4 trials -> 2 jobs; mrpc: 3 -> 2
    assert split["job_split"]["split_groups"] == 2 and split["job_split"]["jobs_of_split_groups"] == 4
    assert split["job_split"]["split_by"] == "--max-group-size 2"
    tight = as_json("plan", sweep, "--store", store, "--memory-budget-gb", "0.5")
    assert tight["jobs"] > 2 and tight["job_split"]["split_by"] == "the memory budget (0.5 GB per job)"
    code, out = invoke("plan", sweep, "--store", store, "--memory-budget-gb", "0", "--max-group-size", "2")
    assert code == 0
    assert "axis task (2): rte, mrpc" in out and "axis temperature (4): 1.0, 2.0, 4.0, 8.0" in out
    assert (
        "jobs: 2 group(s) of trials sharing one teacher pass, apart because they differ in task (2); "
        "2 group(s) split into 4 jobs by --max-group-size 2"
    ) in out


@pytest.mark.parametrize("command", ["plan", "status", "run", "resume", "sweeps"])
def test_the_sweep_commands_help_shows_an_example_and_no_type_noise_on_their_flags(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "160"})
    assert result.exit_code == 0
    assert f"Example: kdgrid {command}" in result.output
    noisy = [line for line in result.output.splitlines() if "<bool>" in line and "--help" not in line]
    assert noisy == [] and "<list[str]>" not in result.output
