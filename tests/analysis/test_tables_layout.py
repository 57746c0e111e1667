"""`kdgrid.analysis.tables`: where each number goes, what is bold, what is missing."""

from __future__ import annotations

import math

import pytest

from kdgrid.analysis.tables import (
    EXTRA_STRATEGIES,
    HARD_ONLY,
    SOFT_ONLY,
    TABLE6_ROW_ORDER,
    Column,
    build_view,
    get_spec,
    shape_label,
    strategy_column,
    task_label,
    teacher_label,
)
from kdgrid.errors import ConfigError
from kdgrid.paper import DOUBLE_MATCH_PAIRS, PAPER_STRATEGIES
from tests.analysis.tables_testing import tidy_rows


def table4_rows():
    rows = []
    for task, dev_set, base in (("mrpc", "validation", 0.70), ("mnli", "validation_mismatched", 0.77)):
        for t_index, temperature in enumerate((1.0, 2.0, 4.0, 8.0)):
            for a_index, alpha in enumerate((0.1, 0.2)):
                value = round(base + 0.001 * t_index - 0.002 * a_index, 4)
                rows.append(
                    {
                        "table": "4",
                        "task": task,
                        "dev_set": dev_set,
                        "student": "bert-mini",
                        "temperature": temperature,
                        "alpha": alpha,
                        "value": value,
                    }
                )
    return rows


def test_table4_blocks_rows_columns_in_the_papers_order():
    view = build_view(get_spec("4"), tidy_rows(table4_rows()))
    assert [b.title for b in view.blocks] == ["MRPC", "MNLI-mm"]  # the appendix order, not the input order
    mrpc = view.block("MRPC")
    assert mrpc.rows == ["0.1", "0.2"]
    assert [c.label for c in mrpc.columns] == ["1", "2", "4", "8"]
    assert mrpc.cell("0.2", Column("4")).value == pytest.approx(0.70 + 0.002 - 0.002)


def test_best_per_block_is_bold_and_only_it():
    view = build_view(get_spec("4"), tidy_rows(table4_rows()))
    for block in view.blocks:
        bold = [(r, c.label) for (r, c), cell in block.cells.items() if cell.bold]
        assert bold == [("0.1", "8")]


def test_ties_are_all_bold():
    rows = [
        {"table": "5", "task": "rte", "student": "bert-tiny", "knowledge": k, "strategy": s, "value": 0.6}
        for k in ("cos", "pkd")
        for s in ("First", "Last")
    ]
    (block,) = build_view(get_spec("5"), tidy_rows(rows)).blocks
    assert all(cell.bold for cell in block.cells.values())


def test_missing_cells_stay_missing_and_the_papers_columns_all_show():
    rows = [
        {
            "table": "5",
            "task": "sst2",
            "student": "bert-mini",
            "knowledge": "cos",
            "strategy": "Last-1",
            "value": 0.86,
        }
    ]
    (block,) = build_view(get_spec("5"), tidy_rows(rows)).blocks
    assert block.title == "SST-2 · bert-mini"
    assert [c.label for c in block.columns] == ["First", "Last", "Dilatation", "First-1", "Last-1"]
    assert block.cell("cos", Column("First")).missing
    assert math.isnan(block.cell("cos", Column("First")).value)


def test_table1_bold_is_per_task_within_each_student():
    rows = [
        {"table": "1", "task": "rte", "student": student, "init": init, "value": value}
        for student, init, value in (
            ("bert-tiny", "random", 0.53),
            ("bert-tiny", "pretrain", 0.62),
            ("bert-mini", "random", 0.55),
            ("bert-mini", "pretrain", 0.50),
        )
    ]
    (block,) = build_view(get_spec("1"), tidy_rows(rows)).blocks
    assert block.cell("RTE", Column("Pre-train", group="bert-tiny")).bold
    assert block.cell("RTE", Column("Random", group="bert-mini")).bold
    assert not block.cell("RTE", Column("Random", group="bert-tiny")).bold
    assert len(block.columns) == 12  # 3 students x 4 schemes, the absent ones shown as missing


def test_table2_blocks_follow_the_shape_and_carry_facts():
    rows = [
        {
            "table": "2",
            "task": "cola",
            "student": "w128-l12",
            "params_m": 6.36,
            "flops_g": 2.83,
            "value": 0.69,
        },
        {
            "table": "2",
            "task": "cola",
            "student": "w132-l8-h4",
            "params_m": 5.8,
            "flops_g": 2.0,
            "value": 0.73,
        },
        {"table": "2", "task": "cola", "student": "w64-l2", "params_m": 2.1, "flops_g": 0.3, "value": 0.6},
    ]
    view = build_view(get_spec("2"), tidy_rows(rows))
    assert [b.title for b in view.blocks] == ["#para ≈ 6.2M", "flops = 2G", "other shapes"]
    fixed = view.block("#para ≈ 6.2M")
    assert fixed.cell("w128-l12", Column("#para (M)", fact=True)).value == 6.36
    assert fixed.cell("w128-l12", Column("latency (ms)", fact=True)).missing  # never invented
    assert view.block("flops = 2G").rows == ["w132-l8"]


def test_table3_teachers_on_the_left_and_hub_names_grouped():
    rows = [
        {
            "table": "3",
            "task": "mrpc",
            "student": "",
            "role": "teacher",
            "teacher": "textattack/bert-base-uncased-MRPC",
            "value": 0.87,
        },
        {
            "table": "3",
            "task": "mrpc",
            "student": "bert-tiny",
            "teacher": "bert-large-uncased-mrpc",
            "value": 0.77,
        },
    ]
    (block,) = build_view(get_spec("3"), tidy_rows(rows)).blocks
    assert block.columns[0] == Column("bert-base", group="teacher")
    assert block.cell("MRPC", Column("bert-base", group="teacher")).value == 0.87
    assert block.cell("MRPC", Column("bert-large", group="bert-tiny")).value == 0.77


def test_table7_average_is_the_papers_six_task_mean_and_needs_all_six():
    tasks = ("sst2", "stsb", "qqp", "mrpc", "rte", "qnli")
    rows = [
        {
            "table": "7",
            "task": t,
            "student": "bert-mini",
            "value": 0.80 + i / 100,
            "metric": "pearson" if t == "stsb" else "accuracy",
        }
        for i, t in enumerate(tasks)
    ]
    mnli = [
        {"table": "7", "task": "mnli", "dev_set": d, "student": "bert-mini", "value": 0.5}
        for d in ("validation_matched", "validation_mismatched")
    ]
    view = build_view(get_spec("7"), tidy_rows(rows + mnli))
    (block,) = view.blocks
    # MNLI is left out of the average, as in the paper's printed averages
    assert block.cell("ours (bert-mini)", block.column("average")).value == pytest.approx(0.825)
    assert not block.cell(
        "ours (bert-mini)", block.column("average")
    ).bold  # an average is not a score to rank
    assert any("average: the mean of SST-2, STS-B, QQP, MRPC, RTE, QNLI" in note for note in view.notes)
    (partial,) = build_view(get_spec("7"), tidy_rows(rows[:-1] + mnli)).blocks
    assert partial.cell("ours (bert-mini)", partial.column("average")).missing


def test_two_configurations_in_one_cell_show_the_best_and_say_so():
    rows = [
        {"table": "4", "task": "rte", "temperature": 1.0, "alpha": 0.1, "value": 0.6, "init": "pretrain"},
        {"table": "4", "task": "rte", "temperature": 1.0, "alpha": 0.1, "value": 0.65, "init": "random"},
    ]
    view = build_view(get_spec("4"), tidy_rows(rows))
    assert view.blocks[0].cell("0.1", Column("1")).value == 0.65
    assert "more than one configuration" in view.notes[0]


def test_demo_has_its_baselines_beside_it():
    rows = [
        {
            "table": "demo",
            "task": "polarity",
            "student": "bert-tiny",
            "knowledge": "cos",
            "strategy": "Last-1",
            "value": 0.8,
        },
        {"table": "demo", "task": "polarity", "student": "bert-tiny", "soft_weight": 1.0, "value": 0.78},
        {"table": "demo", "task": "polarity", "student": "bert-tiny", "soft_weight": 0.0, "value": 0.74},
    ]
    view = build_view(get_spec("demo"), tidy_rows(rows))
    assert view.side_by_side
    main, baselines = view.blocks
    assert (main.title, main.rows) == ("polarity · bert-tiny", ["cos"])
    assert baselines.title == "polarity · bert-tiny · baselines"
    assert baselines.rows == [SOFT_ONLY, HARD_ONLY]
    assert baselines.cell(HARD_ONLY, baselines.columns[0]).value == 0.74


def test_rows_of_other_tables_and_metrics_are_left_out():
    rows = [
        {
            "table": "5",
            "task": "stsb",
            "knowledge": "cos",
            "strategy": "First",
            "metric": "spearman",
            "value": 0.9,
        },
        {
            "table": "6",
            "task": "stsb",
            "knowledge": "cos",
            "strategy": "First",
            "metric": "pearson",
            "value": 0.8,
        },
    ]
    assert build_view(get_spec("5"), tidy_rows(rows)).blocks == []


def test_labels():
    assert task_label("mnli", "validation_matched") == "MNLI-m"
    assert task_label("sst2") == "SST-2" and task_label("polarity") == "polarity"
    assert teacher_label("yoshitomo-matsubara/bert-large-uncased-rte") == "bert-large"
    assert teacher_label("minilm-l6") == "minilm-l6"
    assert shape_label("w128-l12-h2-f512") == "w128-l12" and shape_label("bert-tiny") == "bert-tiny"


def test_unknown_table_names_the_choices():
    with pytest.raises(ConfigError, match="unknown table '9'; allowed: 1, 2, 3, 4, 5, 6, 7, 8, demo, all"):
        get_spec("9")
    assert get_spec("table5").name == "5" and build_view(get_spec("5"), tidy_rows([])).blocks == []


def match_row(table: str, knowledge: str, strategy: str, value: float) -> dict:
    return {
        "table": table,
        "task": "rte",
        "student": "bert-mini",
        "knowledge": knowledge,
        "strategy": strategy,
        "value": value,
    }


@pytest.mark.parametrize("table", ["5", "6", "8"])
def test_match_tables_keep_controls_and_other_strategies_out_of_the_papers_columns(table):
    rows = [
        match_row(table, "mmd", "Last-1", 0.60),
        match_row(table, "mmd", "Reverse", 0.58),
        match_row(table, "mmd", "Random", 0.57),
        match_row(table, "mmd", "PKD-skip", 0.59),
    ]
    view = build_view(get_spec(table), tidy_rows(rows))
    assert view.titles() == ["RTE · bert-mini", f"RTE · bert-mini · {EXTRA_STRATEGIES}"]
    paper, extra = view.blocks
    assert [c.label for c in paper.columns] == list(PAPER_STRATEGIES)
    assert not any(c.config["strategy"] not in PAPER_STRATEGIES for c in paper.cells.values())
    # The extra block shows only what was run; the controls say so in their column.
    assert [c.label for c in extra.columns] == ["PKD-skip", "Random (control)", "Reverse (control)"]
    assert extra.cell("mmd", Column("Reverse (control)")).value == 0.58
    assert strategy_column("Random") == Column("Random (control)")
    assert strategy_column("Last") == Column("Last")
    # A control is never bold against the paper's strategies: bold is per block.
    assert paper.cell("mmd", Column("Last-1")).bold


def test_table6_rows_follow_the_papers_order_not_the_alphabet():
    pairs = [("pkd", "key_relation"), ("attention_ce_mean", "cos"), ("mmd", "value_relation")]
    rows = [match_row("6", f"{a}+{b}", "Last", 0.6) for a, b in pairs]
    view = build_view(get_spec("6"), tidy_rows(rows))
    shown = view.blocks[0].rows
    assert shown == [label for label in TABLE6_ROW_ORDER if label in shown]
    # The paper lists mmd x value_relation before pkd x key_relation; sorting the labels would not.
    assert shown == ["attention_ce_mean,cos", "mmd,value_relation", "key_relation,pkd"]
    assert len(TABLE6_ROW_ORDER) == len(DOUBLE_MATCH_PAIRS) == len(set(TABLE6_ROW_ORDER))
