"""The transcribed paper numbers: counts, keys, ranges, flags, and values checked against the paper's text."""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from kdgrid.analysis.paper_numbers import COLUMNS, paper_numbers
from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_KNOWLEDGE
from tools import transcribe_paper as transcribe

SOURCE = transcribe.default_source()
SOURCE_FOUND = SOURCE is not None and SOURCE.is_file()
needs_source = pytest.mark.skipif(
    not SOURCE_FOUND, reason=f"paper text not found (KDGRID_PAPER_TEXT={SOURCE})"
)

KEY = list(transcribe.KEY_COLUMNS)
PAPER_TEN = set(PAPER_KNOWLEDGE)
STUDENTS = {"bert-tiny", "bert-mini", "bert-small"}
STRATEGIES = {"First", "Last", "Dilatation", "First-1", "Last-1"}
DEV_SETS = {
    ("cola", "validation"),
    ("mrpc", "validation"),
    ("stsb", "validation"),
    ("rte", "validation"),
    ("qqp", "validation"),
    ("sst2", "validation"),
    ("qnli", "validation"),
    ("mnli", "validation_matched"),
    ("mnli", "validation_mismatched"),
}


@pytest.fixture(scope="module")
def numbers() -> pd.DataFrame:
    return paper_numbers()


@pytest.fixture(scope="module")
def lines() -> list[str]:
    if not SOURCE_FOUND:
        pytest.skip(f"paper text not found (KDGRID_PAPER_TEXT={SOURCE})")
    return SOURCE.read_text(encoding="utf-8").splitlines()


def dev_sets(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(frame["task"], frame["dev_set"], strict=True))


# --- counts: what each table really contains ----------------------------------------------------------------------


def test_counts_per_table(numbers: pd.DataFrame) -> None:
    counts = numbers.groupby("table").size().to_dict()
    assert counts == {"1": 108, "2": 72, "3": 72, "4": 216, "5": 1350, "6": 4180, "7": 27, "8": 1350}


@pytest.mark.parametrize("table", ["5", "8"])
def test_single_match_tables_are_full_grids(numbers: pd.DataFrame, table: str) -> None:
    frame = numbers[numbers["table"] == table]
    assert set(frame["knowledge"]) == PAPER_TEN
    assert set(frame["strategy"]) == STRATEGIES
    assert set(frame["student"]) == STUDENTS
    assert dev_sets(frame) == DEV_SETS
    assert len(frame) == 10 * 5 * 3 * 9
    # No soft-label-only baseline rows are printed in these tables.
    assert (frame["knowledge"] != "").all()
    assert set(frame["beta"]) == {"1" if table == "5" else "auto"}


def test_double_match_table_has_31_pairs_and_one_missing_row(numbers: pd.DataFrame) -> None:
    frame = numbers[numbers["table"] == "6"]
    pairs = set(frame["knowledge"])
    assert len(pairs) == 31
    attention = {"attention_mse_sum", "attention_ce_mean"}
    hidden = {"hidden_mse", "mmd", "gram", "cos", "pkd"}
    qkv = {"query_relation", "key_relation", "value_relation"}
    # The paper's binary combinations of its three regions: attention x hidden, attention x qkv, hidden x qkv,
    # each labelled in the paper's order (the attention or hidden-state member first).
    expected = {f"{a}+{b}" for a in attention for b in hidden | qkv} | {
        f"{h}+{q}" for h in hidden for q in qkv
    }
    assert pairs == expected
    # 31 x 5 x 3 x 9 = 4185 cells; MRPC bert-small prints 30 rows: attention_mse_sum,cos is not in the paper.
    assert len(frame) == 31 * 5 * 3 * 9 - 5
    per_block = frame.groupby(["task", "dev_set", "student"]).size()
    assert per_block.drop(("mrpc", "validation", "bert-small")).eq(155).all()
    mrpc_small = frame[(frame["task"] == "mrpc") & (frame["student"] == "bert-small")]
    assert set(mrpc_small["knowledge"]) == pairs - {"attention_mse_sum+cos"}


def test_table1_initialisation_grid(numbers: pd.DataFrame) -> None:
    frame = numbers[numbers["table"] == "1"]
    assert dev_sets(frame) == DEV_SETS
    assert set(frame["init"]) == {"random", "preload", "general_distillation", "pretrain"}
    assert frame.groupby(["task", "dev_set", "student"]).size().eq(4).all()
    assert len(frame) == 9 * 3 * 4


def test_table2_shapes(numbers: pd.DataFrame) -> None:
    frame = numbers[numbers["table"] == "2"]
    shapes = frame.groupby("block")["student"].agg(lambda s: sorted(set(s))).to_dict()
    assert shapes == {
        "fixed_params": ["w128-l12", "w144-l8", "w160-l4", "w168-l3", "w176-l2"],
        "fixed_flops": ["w132-l8", "w142-l7", "w154-l6", "w170-l5"],
    }
    # Eight dev sets per shape, no CoLA-less rows; MNLI only matched.
    assert frame.groupby("student").size().eq(8).all()
    assert ("mnli", "validation_mismatched") not in dev_sets(frame)
    assert frame[["params_m", "flops_g", "latency_ms"]].notna().all().all()
    assert set(frame.loc[frame["block"] == "fixed_flops", "flops_g"]) == {2.0}
    row = frame[frame["student"] == "w160-l4"].iloc[0]
    assert (row["params_m"], row["flops_g"], row["latency_ms"]) == (6.22, 1.43, 74.1)


def test_table3_teachers_and_students(numbers: pd.DataFrame) -> None:
    frame = numbers[numbers["table"] == "3"]
    assert dev_sets(frame) == DEV_SETS
    teachers = frame[frame["role"] == "teacher"]
    assert len(teachers) == 18 and set(teachers["student"]) == {""}
    students = frame[frame["role"] == "student"]
    assert len(students) == 54
    assert students.groupby(["student", "teacher"]).size().eq(9).all()
    assert set(frame["teacher"]) == {"bert-base", "bert-large"}


def test_table4_temperature_by_weight(numbers: pd.DataFrame) -> None:
    frame = numbers[numbers["table"] == "4"]
    assert dev_sets(frame) == DEV_SETS
    assert sorted(set(frame["temperature"])) == [1.0, 2.0, 4.0, 8.0]
    assert sorted(set(frame["alpha"])) == [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
    assert frame.groupby(["task", "dev_set"]).size().eq(24).all()
    assert set(frame["student"]) == {"bert-mini"} and set(frame["knowledge"]) == {""}


def test_table7_systems(numbers: pd.DataFrame) -> None:
    frame = numbers[numbers["table"] == "7"]
    assert frame.groupby("role").size().to_dict() == {"baseline": 9, "student": 9, "teacher": 9}
    assert ("cola", "validation") not in dev_sets(frame)  # Table 7 prints no CoLA column
    assert set(frame["params_m"]) == {109.0, 14.0, 11.0}
    assert (frame["metric"] == "average").sum() == 3


# --- keys, types, ranges --------------------------------------------------------------------------------------------


def test_no_duplicate_keys(numbers: pd.DataFrame) -> None:
    duplicated = numbers[numbers.duplicated(KEY, keep=False)]
    assert duplicated.empty, duplicated[KEY].to_string()


def test_columns_and_dtypes(numbers: pd.DataFrame) -> None:
    assert tuple(numbers.columns) == COLUMNS
    for column in ("temperature", "alpha", "params_m", "flops_g", "latency_ms", "value"):
        assert numbers[column].dtype == "float64", column
    assert numbers["bold"].dtype == bool and numbers["doubtful"].dtype == bool
    assert numbers["source_line"].dtype == "int64"
    assert set(numbers["table"]) == {str(n) for n in range(1, 9)}


def test_values_in_a_sane_range_and_parsed_from_the_text(numbers: pd.DataFrame) -> None:
    assert numbers["value_text"].str.fullmatch(r"0\.\d{1,5}").all()
    assert (numbers["value_text"].astype(float) == numbers["value"]).all()
    accuracy = numbers[numbers["metric"] == "accuracy"]
    assert accuracy["value"].between(0.5, 1.0).all()  # no task here has a majority class below 50%
    pearson = numbers[numbers["metric"] == "pearson"]
    assert set(pearson["task"]) == {"stsb"} and pearson["value"].between(0.0, 1.0).all()
    assert set(numbers.loc[numbers["task"] == "stsb", "metric"]) == {"pearson"}


def test_vocabulary(numbers: pd.DataFrame) -> None:
    distilled = numbers[numbers["role"] == "student"]
    names = {name for label in distilled["knowledge"] if label for name in label.split("+")}
    assert names == PAPER_TEN
    assert set(numbers["strategy"]) == STRATEGIES | {""}
    assert set(distilled["init"]) == {"random", "preload", "general_distillation", "pretrain"}
    students = set(numbers["student"]) - {""}
    assert students - STUDENTS == {*numbers.loc[numbers["table"] == "2", "student"], "electra-small"}


def test_knowledge_names_are_registered() -> None:
    try:
        knowledge = importlib.import_module("kdgrid.core.knowledge")
    except ImportError:
        pytest.skip("kdgrid.core.knowledge not written yet")
    registry = getattr(knowledge, "KNOWLEDGE", None)
    if not registry:
        pytest.skip("kdgrid.core.knowledge has no KNOWLEDGE registry yet")
    assert set(registry) >= PAPER_TEN


# --- flags ------------------------------------------------------------------------------------------------------


def test_doubtful_flags(numbers: pd.DataFrame) -> None:
    doubtful = numbers[numbers["doubtful"]]
    assert doubtful.groupby("table").size().to_dict() == {"1": 5, "3": 4, "4": 2, "5": 27, "7": 3}
    assert (doubtful["note"] != "").all()
    t5 = doubtful[doubtful["table"] == "5"]
    assert set(zip(t5["knowledge"], t5["strategy"], strict=True)) == {("query_relation", "Last-1")}
    malformed = numbers[numbers["value_text"] == "0.70456"]
    assert len(malformed) == 1 and malformed["doubtful"].all() and "5 decimals" in malformed["note"].iloc[0]
    t4 = doubtful[doubtful["table"] == "4"]
    assert set(t4["value_text"]) == {"0.6642", "0.8454"}
    t1 = doubtful[doubtful["table"] == "1"]
    assert set(zip(t1["task"], t1["student"], strict=True)) == {("sst2", "bert-small"), ("mnli", "bert-tiny")}
    t7 = doubtful[doubtful["table"] == "7"]
    assert set(t7["role"]) == {"student"} and set(t7["task"]) == {"sst2", "mrpc", "rte"}


def test_impossible_accuracies_are_exactly_the_flagged_ones(numbers: pd.DataFrame) -> None:
    rows = numbers[(numbers["metric"] == "accuracy") & (numbers["table"] != "7")]
    for row in rows.itertuples():
        size = transcribe.DEV_SET_SIZES[(row.task, row.dev_set)]
        if not transcribe.feasible_accuracy(row.value_text, size):
            assert row.doubtful, row


def test_feasible_accuracy_by_hand() -> None:
    assert transcribe.feasible_accuracy("0.6913", 1043)  # 721 / 1043 = 0.69127: CoLA's majority class
    assert transcribe.feasible_accuracy("0.701", 408)  # 286 / 408 = 0.70098, trailing zero dropped
    assert transcribe.feasible_accuracy("0.6643", 277)  # 184 / 277
    assert not transcribe.feasible_accuracy("0.6642", 277)
    assert not transcribe.feasible_accuracy("0.8134", 408)  # between 331/408 = 0.8113 and 332/408 = 0.8137
    assert transcribe.feasible_accuracy("0.909", 872, places=3)  # 793 / 872 = 0.90940
    assert not transcribe.feasible_accuracy("0.909", 872)  # at 4 decimals that is 0.9094
    assert not transcribe.feasible_accuracy("0.91", 872, places=3)  # 0.909 or 0.911, never 0.910


def test_bold_markers(numbers: pd.DataFrame) -> None:
    bold = numbers[numbers["bold"]]
    assert bold.groupby("table").size().to_dict() == {"1": 26, "2": 16, "4": 9}
    # The paper says Table 3's better teacher scores are bold; the OCR carries no bold there.
    assert not numbers.loc[numbers["table"] == "3", "bold"].any()
    qnli = numbers[(numbers["table"] == "4") & (numbers["task"] == "qnli") & numbers["bold"]]
    assert qnli["value_text"].tolist() == ["0.844"]
    assert "not the best of its block" in qnli["note"].iloc[0]


# --- values against the text --------------------------------------------------------------------------------------


def cells(line: str) -> list[str]:
    """A raw line's non-empty cells with bold markers removed: the test's own, simpler reading."""
    text = line.replace("<hr/>", "")
    return [re.sub(r"</?b>|\*\*", "", c).strip() for c in text.split("\t") if c.strip()]


def find(lines: list[str], pattern: str, start: int = 0) -> int:
    """Index (0-based) of the first line at or after ``start`` matching ``pattern``."""
    regex = re.compile(pattern)
    for index in range(start, len(lines)):
        if regex.search(lines[index]):
            return index
    raise AssertionError(f"{pattern!r} not found after line {start + 1}")


def walk(lines: list[str], *patterns: str) -> list[str]:
    """Follow ``patterns`` line by line through the text; the cells of the last line matched."""
    index = 0
    for pattern in patterns:
        index = find(lines, pattern, index)
        index += 1
    return cells(lines[index - 1])


def one(numbers: pd.DataFrame, **where: object) -> pd.Series:
    mask = pd.Series(True, index=numbers.index)
    for column, value in where.items():
        mask &= numbers[column] == value
    match = numbers[mask]
    assert len(match) == 1, (where, len(match))
    return match.iloc[0]


@needs_source
def test_every_number_is_on_its_source_line(numbers: pd.DataFrame, lines: list[str]) -> None:
    for row in numbers.itertuples():
        line_cells = cells(lines[row.source_line - 1])
        printed = {part for cell in line_cells for part in cell.split()}  # Table 7's "0.845 0.848" cell
        assert row.value_text in printed, (row.table, row.source_line, row.value_text)


@needs_source
def test_match_tables_column_positions(numbers: pd.DataFrame, lines: list[str]) -> None:
    """In Tables 5, 6 and 8 the value sits in its strategy's column of a row named by its knowledge."""
    order = ["First", "Last", "Dilatation", "First-1", "Last-1"]
    frame = numbers[numbers["table"].isin(["5", "6", "8"])]
    for row in frame.itertuples():
        line_cells = cells(lines[row.source_line - 1])
        assert line_cells[0].replace(" ", "").replace(",", "+") == row.knowledge
        assert line_cells[1 + order.index(row.strategy)] == row.value_text


@needs_source
def test_sample_values_table1(numbers: pd.DataFrame, lines: list[str]) -> None:
    table = find(lines, r"^Table 1:")
    row = cells(lines[find(lines, r"^RTE\t", table)])
    assert row[0] == "RTE" and row[8] == "0.6751"  # bert-mini pre-train, bold in the paper
    assert one(numbers, table="1", task="rte", student="bert-mini", init="pretrain")["value_text"] == "0.6751"
    row = cells(lines[find(lines, r"^STSB\t", table)])
    assert row[1] == "0.0229"
    assert one(numbers, table="1", task="stsb", student="bert-tiny", init="random")["value_text"] == "0.0229"
    row = cells(lines[find(lines, r"^MNLI\t", table) + 1])  # the unlabelled second MNLI row
    assert row[10] == "0.7965"
    got = one(
        numbers, table="1", dev_set="validation_mismatched", student="bert-small", init="general_distillation"
    )
    assert got["value_text"] == "0.7965" and got["bold"]


@needs_source
def test_sample_values_table2(numbers: pd.DataFrame, lines: list[str]) -> None:
    table = find(lines, r"^Table 2:")
    row = cells(lines[find(lines, r"^176\t2\t", table)])
    assert row[7] == "0.4792"  # STS-B
    assert one(numbers, table="2", student="w176-l2", task="stsb")["value_text"] == "0.4792"
    row = cells(lines[find(lines, r"^170\t5\t", table)])
    assert row[6] == "0.7868"
    got = one(numbers, table="2", student="w170-l5", task="mrpc")
    assert got["value_text"] == "0.7868" and got["bold"] and got["block"] == "fixed_flops"
    row = cells(lines[find(lines, r"^128\t12\t", table)])
    assert row[10] == "0.773"
    assert one(numbers, table="2", student="w128-l12", task="mnli")["value_text"] == "0.773"


@needs_source
def test_sample_values_table3(numbers: pd.DataFrame, lines: list[str]) -> None:
    header = find(lines, r"^Teacher Model\t", find(lines, r"^Table 3:"))
    first, cola, last = (cells(lines[header + 3 + i]) for i in (0, 5, 8))
    assert first[3] == "0.8186"  # MRPC, bert-small taught by bert-large
    assert (
        one(numbers, table="3", task="mrpc", student="bert-small", teacher="bert-large")["value_text"]
        == "0.8186"
    )
    assert cola[1] == "0.8485"  # the bert-large teacher itself on CoLA
    assert (
        one(numbers, table="3", task="cola", role="teacher", teacher="bert-large")["value_text"] == "0.8485"
    )
    assert last[7] == "0.7340"  # MNLI-m, bert-tiny taught by bert-large
    got = one(numbers, table="3", dev_set="validation_matched", student="bert-tiny", teacher="bert-large")
    assert got["value_text"] == "0.7340"


@needs_source
def test_sample_values_table4(numbers: pd.DataFrame, lines: list[str]) -> None:
    assert walk(lines, r"^Table 4:", r"QNLI", r"^1\t")[1:] == ["0.5054", "0.842", "0.8402", "0.8406"]
    got = one(numbers, table="4", task="qnli", temperature=1.0, alpha=1.0)
    assert got["value_text"] == "0.5054" and not got["doubtful"]  # QNLI's majority class: a real collapse
    assert walk(lines, r"^Table 4:", r"MNLI-mm", r"^0\.1\t")[3] == "0.7811"
    got = one(numbers, table="4", dev_set="validation_mismatched", temperature=4.0, alpha=0.1)
    assert got["value_text"] == "0.7811" and got["bold"]
    assert walk(lines, r"^Table 4:", r"continued", r"continued", r"^5\t")[4] == "0.7587"  # split across pages
    got = one(numbers, table="4", dev_set="validation_matched", temperature=8.0, alpha=5.0)
    assert got["value_text"] == "0.7587"


@needs_source
def test_sample_values_table5(numbers: pd.DataFrame, lines: list[str]) -> None:
    row = walk(lines, r"A\.3\.2 Single-Match", r"<b>RTE</b>", r"^bert-mini\t", r"^gram\t")
    assert row[3] == "0.6931"
    assert (
        one(numbers, table="5", task="rte", student="bert-mini", knowledge="gram", strategy="Dilatation")[
            "value_text"
        ]
        == "0.6931"
    )
    row = walk(lines, r"A\.3\.2 Single-Match", r"<b>STS-B</b>", r"^bert-tiny\t", r"^mmd\t")
    assert row[2] == "0.6161"
    assert (
        one(numbers, table="5", task="stsb", student="bert-tiny", knowledge="mmd", strategy="Last")[
            "value_text"
        ]
        == "0.6161"
    )
    row = walk(lines, r"A\.3\.2 Single-Match", r"<b>MNLI-m</b>", r"^bert-small\t", r"^pkd\t")
    assert row[5] == "0.807"
    got = one(
        numbers,
        table="5",
        dev_set="validation_matched",
        student="bert-small",
        knowledge="pkd",
        strategy="Last-1",
    )
    assert got["value_text"] == "0.807"


@needs_source
def test_sample_values_table6(numbers: pd.DataFrame, lines: list[str]) -> None:
    row = walk(lines, r"A\.3\.3 Double-Match", r"<b>sst2</b>", r"bert-small", r"^hidden_mse,key_relation\t")
    assert row[5] == "0.906"
    got = one(
        numbers,
        table="6",
        task="sst2",
        student="bert-small",
        knowledge="hidden_mse+key_relation",
        strategy="Last-1",
    )
    assert got["value_text"] == "0.906"
    row = walk(lines, r"A\.3\.3 Double-Match", r"\*\*stsb\*\*", r"^bert-small\t", r"^mmd, query_relation\t")
    assert row[4] == "0.8756"
    got = one(
        numbers,
        table="6",
        task="stsb",
        student="bert-small",
        knowledge="mmd+query_relation",
        strategy="First-1",
    )
    assert got["value_text"] == "0.8756"
    row = walk(lines, r"A\.3\.3 Double-Match", r"mnli_matched", r"^bert-tiny\t", r"^pkd,value_relation\t")
    assert row[1:] == ["0.7107", "0.7206", "0.7249", "0.7201", "0.7249"]
    got = one(
        numbers,
        table="6",
        dev_set="validation_matched",
        student="bert-tiny",
        knowledge="pkd+value_relation",
        strategy="First",
    )
    assert got["value_text"] == "0.7107"


@needs_source
def test_sample_values_table7(numbers: pd.DataFrame, lines: list[str]) -> None:
    row = walk(lines, r"^Table 7:", r"^Ours")
    assert row[6] == "0.7003" and row[7] == "0.797 0.805" and row[9] == "0.8554"
    assert one(numbers, table="7", role="student", task="rte")["value_text"] == "0.7003"
    assert one(numbers, table="7", role="student", dev_set="validation_mismatched")["value_text"] == "0.805"
    assert one(numbers, table="7", role="student", metric="average")["value_text"] == "0.8554"


@needs_source
def test_sample_values_table8(numbers: pd.DataFrame, lines: list[str]) -> None:
    row = walk(lines, r"^Table 8:", r"MRPC", r"bert-small", r"^value_relation\t")
    assert row[5] == "0.8456"  # the column whose header the OCR dropped
    got = one(
        numbers, table="8", task="mrpc", student="bert-small", knowledge="value_relation", strategy="Last-1"
    )
    assert got["value_text"] == "0.8456" and "missing in the OCR" in got["note"]
    row = walk(lines, r"^Table 8:", r"^QNLI", r"^bert-mini\t", r"^gram\t")
    assert row[2] == "0.6447"
    assert (
        one(numbers, table="8", task="qnli", student="bert-mini", knowledge="gram", strategy="Last")[
            "value_text"
        ]
        == "0.6447"
    )
    row = walk(lines, r"^Table 8:", r"^MNLi-m\t", r"^bert-tiny\t", r"^value_relation\t")
    assert row[1] == "0.7285"
    got = one(
        numbers,
        table="8",
        dev_set="validation_matched",
        student="bert-tiny",
        knowledge="value_relation",
        strategy="First",
    )
    assert got["value_text"] == "0.7285"


@needs_source
def test_committed_csvs_match_a_fresh_transcription(tmp_path: Path) -> None:
    assert transcribe.main(["--source", str(SOURCE), "--out", str(transcribe.PAPER_DIR), "--check"]) == 0
    assert transcribe.main(["--source", str(SOURCE), "--out", str(tmp_path)]) == 0
    for table in transcribe.PARSERS:
        name = f"table{table}.csv"
        assert (tmp_path / name).read_text() == (transcribe.PAPER_DIR / name).read_text()


@needs_source
def test_check_mode_reports_stale_csvs(tmp_path: Path) -> None:
    assert transcribe.main(["--source", str(SOURCE), "--out", str(tmp_path)]) == 0
    stale = tmp_path / "table4.csv"
    stale.write_text(stale.read_text().replace("0.5054", "0.5055"))
    assert transcribe.main(["--source", str(SOURCE), "--out", str(tmp_path), "--check"]) == 1


def test_missing_source_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert transcribe.main(["--source", str(tmp_path / "nope.txt"), "--out", str(tmp_path)]) == 2
    assert "KDGRID_PAPER_TEXT" in capsys.readouterr().err


def test_transcription_refuses_text_it_cannot_place() -> None:
    if not SOURCE_FOUND:
        pytest.skip(f"paper text not found (KDGRID_PAPER_TEXT={SOURCE})")
    text = SOURCE.read_text(encoding="utf-8").replace("gram\t0.6859\t0.6606", "gramm\t0.6859\t0.6606", 1)
    with pytest.raises(transcribe.TranscriptionError, match="cannot place"):
        transcribe.transcribe(text)


# --- judgements that the tables confirm ---------------------------------------------------------------------------


def test_table3_row_order_agrees_with_table7(numbers: pd.DataFrame) -> None:
    """Table 3 prints no task names: its bert-base teacher column must match Table 7's BERT-base row."""
    t3 = numbers[
        (numbers["table"] == "3") & (numbers["role"] == "teacher") & (numbers["teacher"] == "bert-base")
    ]
    t7 = numbers[
        (numbers["table"] == "7") & (numbers["role"] == "teacher") & (numbers["metric"] != "average")
    ]
    merged = t3.merge(t7, on=["task", "dev_set"], suffixes=("_3", "_7"))
    assert len(merged) == 8
    assert ((merged["value_3"] - merged["value_7"]).abs() < 0.00065).all()


def test_table1_mnli_rows_read_as_matched_then_mismatched(numbers: pd.DataFrame) -> None:
    """Table 1's first MNLI row holds Table 4's best bert-mini MNLI-m score (same recipe, pre-train init)."""
    t1 = one(numbers, table="1", dev_set="validation_matched", student="bert-mini", init="pretrain")
    t4 = numbers[(numbers["table"] == "4") & (numbers["dev_set"] == "validation_matched")]
    assert t1["value"] == t4["value"].max() == 0.7664
    mismatched = numbers[(numbers["table"] == "4") & (numbers["dev_set"] == "validation_mismatched")]
    assert 0.7664 not in set(mismatched["value"])


def test_table7_average_leaves_mnli_out(numbers: pd.DataFrame) -> None:
    t7 = numbers[numbers["table"] == "7"]
    for _, rows in t7.groupby("role"):
        average = rows.loc[rows["metric"] == "average", "value"].iloc[0]
        six = rows[(rows["metric"] != "average") & (rows["task"] != "mnli")]["value"]
        all_eight = rows[rows["metric"] != "average"]["value"]
        assert len(six) == 6 and math.isclose(six.mean(), average, abs_tol=5e-5)
        assert not math.isclose(all_eight.mean(), average, abs_tol=5e-4)


# --- the loader ---------------------------------------------------------------------------------------------------


def test_paper_numbers_selects_tables() -> None:
    assert set(paper_numbers(5)["table"]) == {"5"}
    assert set(paper_numbers("table8")["table"]) == {"8"}
    assert set(paper_numbers([1, "2"])["table"]) == {"1", "2"}
    clean = paper_numbers(5, include_doubtful=False)
    assert len(clean) == 1350 - 27 and not clean["doubtful"].any()


def test_paper_numbers_returns_a_copy() -> None:
    first = paper_numbers(7)
    first.loc[:, "value"] = 0.0
    assert paper_numbers(7)["value"].gt(0.5).all()


@pytest.mark.parametrize("bad", [0, 9, "table9", "five"])
def test_paper_numbers_rejects_unknown_tables(bad: object) -> None:
    with pytest.raises(ConfigError, match="tables: 1, 2, 3, 4, 5, 6, 7, 8"):
        paper_numbers(bad)  # type: ignore[arg-type]


def test_the_cell_key_has_one_home() -> None:
    # the published numbers, the tidy format and the transcription name a number's place with the same columns
    from kdgrid.analysis import schema, tidy

    assert tidy.CONFIG_COLUMNS is schema.CONFIG_COLUMNS and transcribe.KEY_COLUMNS is schema.PAPER_KEY
    assert [c for c in COLUMNS if c in schema.CONFIG_COLUMNS] == [
        c for c in schema.CONFIG_COLUMNS if c != "soft_weight"
    ]
    assert set(schema.PAPER_KEY) < set(COLUMNS)
