"""`kdgrid tables` / `kdgrid figures` and `demo_table`, end to end on small stores written with the store's API."""

from __future__ import annotations

import csv
import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

import kdgrid.bundled_sweeps as bundled_sweeps
from kdgrid.analysis.tables_report import demo_table
from kdgrid.cli import app, main
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.store.membership import record_membership
from tests.analysis.tables_testing import result, write


@pytest.fixture(autouse=True)
def sweeps_dir(tmp_path, monkeypatch):
    """An empty folder of bundled sweeps: the hints in messages do not depend on the sweep files kdgrid ships
    (the tables never read a sweep file)."""
    folder = tmp_path / "sweeps"
    folder.mkdir()
    monkeypatch.setattr(bundled_sweeps, "BUNDLED_SWEEPS_DIR", folder)
    return folder


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    write(
        path,
        "table4",
        result(0.7010, student="bert-mini", temperature=1.0, alpha=0.1),
        result(0.7181, student="bert-mini", temperature=2.0, alpha=0.1),
        result(0.7034, student="bert-mini", temperature=1.0, alpha=0.5, seed=0),
        result(0.7134, student="bert-mini", temperature=1.0, alpha=0.5, seed=1),
    )
    return path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_markdown_table_from_a_store(store):
    out = invoke("tables", "4", "--store", str(store), "--format", "markdown")
    assert out.exit_code == 0, out.output
    assert "### MRPC" in out.output
    assert "| 0.1 | 0.7010 | **0.7181** | - | - |" in out.output
    assert "| 0.5 | 0.7084±0.0071 | - | - | - |" in out.output


def test_compare_paper_shows_published_numbers_and_agreement(store):
    out = invoke("tables", "4", "--store", str(store), "--format", "markdown", "--compare", "paper")
    assert out.exit_code == 0, out.output
    # the paper's MRPC T=1, weight 0.1 is 0.701; ours is the same number
    assert "| 0.1 | 0.7010 / 0.7010 (+0.0000) | **0.7181** / 0.7181 (+0.0000) |" in out.output
    assert "agreement with the paper over 3 cells" in out.output
    # blocks only the paper has (other tasks) are shown with our side missing
    assert "### QQP" in out.output and "- / 0.8925" in out.output


def test_terminal_and_out_file(store, tmp_path):
    out = invoke("tables", "4", "--store", str(store))
    assert out.exit_code == 0 and "0.7181" in out.output
    target = tmp_path / "t" / "table4.tex"
    out = invoke("tables", "4", "--store", str(store), "--format", "latex", "--out", str(target))
    assert out.exit_code == 0, out.output
    text = target.read_text()
    # the packages it needs are said first (booktabs for the rules, amssymb for the marks), then the table
    assert text.startswith("% needs \\usepackage{booktabs} (the rules: \\toprule")
    assert text.splitlines()[1].startswith("% needs \\usepackage{amssymb} (the marks: \\blacktriangle")
    assert text.splitlines()[2] == "\\begin{table}[t]" and "\\textbf{0.7181}" in text


def test_all_renders_what_is_there_and_lists_what_is_not(store):
    out = invoke("tables", "all", "--store", str(store), "--format", "markdown")
    assert out.exit_code == 0, out.output
    assert "Table 4" in out.output
    assert "no trials of Table 5" in out.output and "sweeps/table5_*.yaml" in out.output


def test_a_table_with_no_trials_names_its_sweep_and_exits_2(store, sweeps_dir, capsys):
    (sweeps_dir / "table5_single_match.yaml").write_text("# placeholder\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["tables", "5", "--store", str(store)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "holds no trials of Table 5" in err and "sweeps/table5_single_match.yaml" in err
    assert "Traceback" not in err


def test_bad_arguments_exit_2_with_the_choices(store, capsys):
    for args, message in (
        (["tables", "9", "--store", str(store)], "unknown table '9'"),
        (["tables", "4", "--store", str(store), "--format", "html"], "unknown --format 'html'"),
        (["tables", "4", "--store", str(store), "--compare", "arxiv"], "unknown --compare 'arxiv'"),
        (["tables", "4", "--store", str(store / "nope")], "no results store at"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_csv_of_all_tables_has_one_header(store):
    write(store, "table5", result(0.8, knowledge=("cos",), strategy="Last-1"))
    out = invoke("tables", "all", "--store", str(store), "--format", "csv")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("table,block,row") and sum(line.startswith("table,") for line in lines) == 1
    assert {line.split(",")[0] for line in lines[1:]} == {"4", "5"}


def test_demo_table_is_a_renderable_with_baselines(tmp_path):
    store = tmp_path / "demo"
    write(
        store,
        "demo",
        result(0.81, task="polarity", teacher="minilm-l6", knowledge=("cos",), strategy="Last-1"),
        result(0.79, task="polarity", teacher="minilm-l6"),
        result(0.75, task="polarity", teacher="minilm-l6", soft_weight=0.0),
    )
    console = Console(record=True, width=200)
    console.print(demo_table(store))
    text = console.export_text()
    assert "polarity · bert-tiny" in text and "soft labels only" in text and "hard labels only" in text
    assert "0.8100" in text and "0.7500" in text


def test_demo_table_of_a_store_without_the_demo_names_the_sweep(store):
    from kdgrid.errors import KdgridError

    with pytest.raises(
        KdgridError, match=r"holds no trials of the demo table; they come from sweeps/demo.yaml"
    ):
        demo_table(store)


def test_a_trial_listed_by_another_tables_sweep_counts_there(store):
    # The MRPC T=1, weight 0.1 trial was written by table4's sweep; a table1 sweep listing it counts it too,
    # as the membership its run recorded in the store says (the table1 sweep itself ran nothing).
    shared = result(0.7010, student="bert-mini", temperature=1.0, alpha=0.1).trial.trial_id
    out = invoke("tables", "1", "--store", str(store), "--format", "markdown")
    assert "holds no trials of Table 1" in str(out.exception)  # not before its sweep listed it
    record_membership(store, "table1_init", {shared: "main"})
    out = invoke("tables", "1", "--store", str(store), "--format", "markdown")
    assert out.exit_code == 0, out.output
    assert "0.7010" in out.output


def test_figures_command(store, tmp_path):
    out_dir = tmp_path / "figs"
    out = invoke("figures", "--store", str(store), "--out", str(out_dir))
    assert out.exit_code == 0, out.output
    names = sorted(p.name for p in out_dir.iterdir())
    assert "table4_temperature_x_hard_label_weight.png" in names
    assert "table4_temperature_x_hard_label_weight.pdf" in names
    assert "reproduced_vs_published.png" in names


def test_figures_of_a_store_with_nothing_to_draw(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main(["figures", "--store", str(empty), "--out", str(tmp_path / "f")])
    assert exit_info.value.code == 2
    assert "holds nothing a figure is drawn from" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_table_from_a_real_run_of_the_core(tmp_path):
    # The whole path the demo takes: real trials through the worker into the store, then the demo table.
    import torch

    from kdgrid.assets import teacher_dir
    from kdgrid.launch.worker import run_job_to_store
    from kdgrid.trial import Trial

    torch.set_num_threads(1)
    base = {
        "task": "synthetic-single-binary",
        "teacher": str(teacher_dir()),
        "student": "bert-tiny",
        "init": "random",
        "max_train_samples": 32,
        "epochs": 1,
        "max_length": 32,
        "batch_size": 16,
        "options": NOT_MEANT_TO_BE_ACCURATE,  # the raw MiniLM: its classifier head is random
    }
    trials = [
        Trial(**base, knowledge=("cos",), strategy="Last-1"),
        Trial(**base, knowledge=("mmd",), strategy="First"),
        Trial(**base),
        Trial(**base, soft_weight=0.0, alpha=1.0),
    ]
    store = tmp_path / "store"
    run_job_to_store(trials, store, sweep="demo", studies={t.trial_id: "single_match" for t in trials})
    console = Console(record=True, width=200)
    console.print(demo_table(store))
    text = console.export_text()
    assert "synthetic-single-binary · bert-tiny" in text
    assert "soft labels only" in text and "hard labels only" in text
    # every trial's number is in its place, a real accuracy
    from kdgrid.analysis.tables import HARD_ONLY, SOFT_ONLY, Column, build_view, get_spec
    from kdgrid.analysis.tables_report import load_tidy

    view = build_view(get_spec("demo"), load_tidy(store))
    main_block, baselines = view.blocks
    values = [
        main_block.cell("cos", Column("Last-1")).value,
        main_block.cell("mmd", Column("First")).value,
        baselines.cell(SOFT_ONLY, Column("score")).value,
        baselines.cell(HARD_ONLY, Column("score")).value,
    ]
    assert all(0.0 <= v <= 1.0 for v in values), values
    assert main_block.cell("cos", Column("First")).missing


def test_compared_csv_with_the_demo_keeps_one_header(store):
    write(store, "demo", result(0.8, task="polarity", knowledge=("cos",), strategy="First"))
    out = invoke("tables", "all", "--store", str(store), "--format", "csv", "--compare", "paper")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].endswith(",paper,diff") and sum(line.startswith("table,") for line in lines) == 1
    demo = [line for line in lines if line.startswith("demo,")]
    assert demo and all(line.endswith(",,") for line in demo)  # no published numbers for the demo
    parsed = list(csv.reader(io.StringIO(out.output)))
    assert {len(row) for row in parsed} == {len(parsed[0])}
