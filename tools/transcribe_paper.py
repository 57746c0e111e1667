"""Transcribe Tables 1-8 of the paper (an OCR of the PDF, Markdown with HTML tags) into tidy CSV files.

One row per published number, written to ``kdgrid/analysis/paper/table{1..8}.csv``. Every value is kept exactly as
printed (``value_text``) and parsed into ``value``; bold markers become the ``bold`` column; numbers that cannot be
what the authors measured are flagged ``doubtful`` with the reason in ``note``. The judgements this script
encodes (which unlabelled row is which task, how drifting headers are read, ...) are written down in
``kdgrid/analysis/paper/NOTES.md``; the constants below carry the same reasoning in short.

Run from the repository root::

    .venv/bin/python tools/transcribe_paper.py [--source PATH] [--out DIR] [--check]

``--check`` re-parses and fails if the committed CSVs differ from what the source gives (a CI guard against
hand edits). A one-off tool kept beside the package, not installed with it. The OCR text is not part of the repository: give it with ``--source`` or
``$KDGRID_PAPER_TEXT`` (CI sets it where its machine keeps a copy).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from kdgrid.analysis.paper_numbers import COLUMNS as PAPER_COLUMNS
from kdgrid.analysis.schema import PAPER_KEY
from kdgrid.paper import (
    APPENDIX_DEV_SETS,
    DEFAULT_INIT,
    PAPER_INITS,
    PAPER_KNOWLEDGE,
    PAPER_STRATEGIES,
    PAPER_STUDENTS,
    TABLE1_STUDENTS,
    reported_metric,
)

# Where the CSVs are kept: package data of `kdgrid.analysis` (this tool lives outside the package, in tools/).
PAPER_DIR = Path(__file__).resolve().parent.parent / "kdgrid" / "analysis" / "paper"


def default_source() -> Path | None:
    """The OCR text of the paper named by ``$KDGRID_PAPER_TEXT`` (None when unset)."""
    env = os.environ.get("KDGRID_PAPER_TEXT")
    return Path(env) if env else None


# --- vocabulary -------------------------------------------------------------------------------------------------
# The paper's names and orders (knowledge, strategies, students, dev sets, metric) come from `kdgrid.paper`; below
# are only the spellings the OCR uses for them and the judgements of this transcription.

# The strategy headers of Tables 5, 6 and 8, lower-cased, as printed (every header that names them does so in the
# order `PAPER_STRATEGIES`; Table 8 writes "First1").
_STRATEGY_ALIASES = {"first": "First", "last": "Last", "dilatation": "Dilatation"}
_STRATEGY_ALIASES |= {"first1": "First-1", "first-1": "First-1", "last1": "Last-1", "last-1": "Last-1"}

# (task, dev_set) for every spelling of a dev-set header met in the OCR, keyed by the header lower-cased with
# everything but letters and digits removed ("MNLi-mm", "mnl_i_mismatched" -> "mnlimm", "mnlimismatched").
_DEV_HEADERS: dict[str, tuple[str, str]] = {
    "mrpc": ("mrpc", "validation"),
    "sst2": ("sst2", "validation"),
    "qqp": ("qqp", "validation"),
    "qnli": ("qnli", "validation"),
    "rte": ("rte", "validation"),
    "cola": ("cola", "validation"),
    "stsb": ("stsb", "validation"),
    "mnlim": ("mnli", "validation_matched"),
    "mnlimatched": ("mnli", "validation_matched"),
    "mnlimm": ("mnli", "validation_mismatched"),
    "mnlimismatched": ("mnli", "validation_mismatched"),
}

# GLUE dev-set sizes: an accuracy printed to 4 decimals must be round(k / N, 4) for some whole k.
DEV_SET_SIZES: dict[tuple[str, str], int] = {
    ("cola", "validation"): 1043,
    ("sst2", "validation"): 872,
    ("mrpc", "validation"): 408,
    ("qqp", "validation"): 40430,
    ("qnli", "validation"): 5463,
    ("rte", "validation"): 277,
    ("mnli", "validation_matched"): 9815,
    ("mnli", "validation_mismatched"): 9832,
}

# Table 3 prints no task names. Its rows follow the order of Tables 4, 5, 6 and 8 (MRPC, SST-2, QQP, QNLI, RTE,
# CoLA, STS-B, MNLI-mm, MNLI-m): the bert-base teacher column agrees with Table 7's BERT-base row to 3 decimals on
# all seven dev sets they share (0.8775~0.877 MRPC, 0.9231~0.923 SST-2, ... 0.8456~0.845 MNLI-m).
TABLE3_ROW_ORDER: tuple[tuple[str, str], ...] = APPENDIX_DEV_SETS

# Table 1's second MNLI row has no label. Read as mismatched: the first row's bert-mini pre-train score
# 0.7664 equals Table 4's best bert-mini MNLI-m score, and Table 7 prints MNLI as "matched mismatched".
TABLE1_UNLABELLED_ROW = "mnlimm"

# Table 1's scheme headers, lower-cased with everything but letters removed ("General Distillation").
INIT_NAMES = {name.replace("_", ""): name for name in PAPER_INITS}

# The paper's defaults (Appendix A.1.1): beta = 1, initialization = pre-train (`DEFAULT_INIT`), temperature and
# hard-label weight = the best of Table 4 per task (not printed beside the later tables, so left empty there).

# Judgements that no rule finds: (table, task, dev_set, student, knowledge, strategy, init) -> reason.
# Matched on every key given (None = any).
MANUAL_DOUBTS: list[tuple[dict[str, str], str]] = [
    (
        {"table": "1", "task": "sst2", "student": "bert-small"},
        "the four bert-small SST-2 scores repeat bert-tiny's row digit for digit (0.7959 0.8337 0.8314 0.8222; "
        "only the bold moved); probably a copy-paste slip in the paper",
    ),
    (
        {"table": "4", "task": "stsb", "temperature": "8", "alpha": "2"},
        "0.8454 stands alone in a column of 0.44-0.47 (T=8) and repeats the T=1, weight 0.5 score exactly",
    ),
    (
        {"table": "5", "knowledge": "query_relation", "strategy": "Last-1"},
        "the query_relation x Last-1 column of Table 5 is suspect as a whole: 11 of its 15 values on dev sets small "
        "enough to check are impossible accuracies (the rest of Tables 5, 6 and 8 has none), and MNLI-m bert-tiny "
        "prints 5 decimals",
    ),
]

# The CSV columns, in order: the loader's list (one definition for writer and reader).
COLUMNS = PAPER_COLUMNS


@dataclass
class Row:
    """One published number; every field is text as it goes into the CSV (empty = not applicable)."""

    table: str
    task: str
    dev_set: str
    student: str
    teacher: str
    role: str
    metric: str
    value_text: str
    source_line: int
    knowledge: str = ""
    strategy: str = ""
    init: str = ""
    temperature: str = ""
    alpha: str = ""
    beta: str = ""
    block: str = ""
    params_m: str = ""
    flops_g: str = ""
    latency_ms: str = ""
    value: str = ""
    bold: bool = False
    doubtful: bool = False
    note: str = ""

    def add_note(self, text: str, *, doubtful: bool = False) -> None:
        self.note = f"{self.note}; {text}" if self.note else text
        self.doubtful = self.doubtful or doubtful

    def key(self) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in KEY_COLUMNS)


# What identifies a published number inside its table.
KEY_COLUMNS: tuple[str, ...] = PAPER_KEY


class TranscriptionError(ValueError):
    """The OCR text does not have the shape the parser expects (a line it cannot place)."""


# --- cells ------------------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_BOLD = re.compile(r"^(?:<b>(.*)</b>|\*\*(.*)\*\*)$")


@dataclass(frozen=True)
class Cell:
    text: str
    bold: bool


def split_cells(line: str) -> list[Cell]:
    """Tab-separated cells with ``<hr/>`` dropped, bold markers removed into ``Cell.bold``, empty cells dropped."""
    cells = []
    for raw in line.replace("<hr/>", "").split("\t"):
        raw = raw.strip()
        if not raw:
            continue
        match = _BOLD.match(raw)
        if match:
            text = (match.group(1) or match.group(2) or "").strip()
            cells.append(Cell(text, True))
        else:
            cells.append(Cell(raw, False))
    return cells


def is_number(text: str) -> bool:
    return bool(_NUMBER.match(text))


def dev_header(text: str) -> tuple[str, str] | None:
    """(task, dev_set) for a dev-set header in any of the spellings met, else None."""
    return _DEV_HEADERS.get(re.sub(r"[^a-z0-9]", "", text.lower()))


def decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def feasible_accuracy(text: str, size: int, places: int = 4) -> bool:
    """True if ``text`` is round(k/size, places) for some whole k, trailing zeros dropped on both sides.

    The paper prints at most 4 decimals and drops trailing zeros (286/408 = 0.70098 is printed "0.701"), so a
    value with d <= 4 decimals must equal round(k/size, 4) with the zeros dropped. (Table 7 prints 3.)
    """
    value = float(text)
    k_near = value * size
    for k in range(max(0, math.floor(k_near) - 2), math.ceil(k_near) + 3):
        rounded = round(k / size + 1e-12, places)
        if f"{rounded:.{places}f}".rstrip("0").rstrip(".") == text.rstrip("0").rstrip("."):
            return True
    return False


# --- source -----------------------------------------------------------------------------------------------------


class Source:
    """The OCR text as numbered lines (1-based, as `grep -n` and editors count)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def line(self, number: int) -> str:
        return self.lines[number - 1]

    def find(self, pattern: str, start: int = 1) -> int:
        """Number of the first line at or after ``start`` that matches the regular expression ``pattern``."""
        regex = re.compile(pattern)
        for number in range(start, len(self.lines) + 1):
            if regex.search(self.line(number)):
                return number
        raise TranscriptionError(f"no line matches {pattern!r} after line {start}")

    def numbered(self, start: int, end: int) -> Iterator[tuple[int, str]]:
        """Lines start .. end - 1 with their numbers."""
        for number in range(start, min(end, len(self.lines) + 1)):
            yield number, self.line(number)


def _skippable(line: str) -> bool:
    """Page furniture: blank lines, rules, 'continued from previous page' banners, the bare axis label."""
    text = line.replace("<hr/>", "").strip()
    if not text or set(text) <= set("-\t "):
        return True
    if "continued from previous page" in text:
        return True
    return text in {"Hard", "Label", "Weight", "Hard Label Weight"}


def _value(
    cell: Cell, number: int, *, table: str, task: str, dev_set: str, student: str, teacher: str, **extra: str
) -> Row:
    role = extra.pop("role", "student")
    metric = extra.pop("metric", reported_metric(task))
    row = Row(
        table=table,
        task=task,
        dev_set=dev_set,
        student=student,
        teacher=teacher,
        role=role,
        metric=metric,
        value_text=cell.text,
        source_line=number,
        bold=cell.bold,
        **extra,
    )
    row.value = repr(float(cell.text))
    return row


# --- Table 1: initialization schemes ----------------------------------------------------------------------------


def parse_table1(src: Source) -> list[Row]:
    """Tasks x (student x init); 9 dev rows x 3 students x 4 schemes = 108 numbers."""
    start = src.find(r"^Table 1:")
    header = src.find(r"^Initialization\t", start)
    inits_line = split_cells(src.line(header + 1))
    inits = [INIT_NAMES[re.sub(r"[^a-z]", "", c.text.lower())] for c in inits_line]
    if len(inits) != 12:
        raise TranscriptionError(
            f"Table 1: expected 12 scheme columns at line {header + 1}, got {len(inits)}"
        )
    rows: list[Row] = []
    number = header + 2
    while number <= len(src.lines) and src.line(number).strip():
        line = src.line(number)
        label, *cells = line.split("\t")
        values = split_cells("\t".join(cells))
        key = re.sub(r"[^a-z0-9]", "", label.lower())
        note = ""
        if key == "mnli":
            key = "mnlim"
            note = "first of two MNLI rows, read as matched (see NOTES.md)"
        elif key == "":
            key = TABLE1_UNLABELLED_ROW
            note = "unlabelled row under MNLI, read as mismatched (see NOTES.md)"
        task, dev_set = _DEV_HEADERS[key]
        if len(values) != 12:
            raise TranscriptionError(f"Table 1 line {number}: expected 12 values, got {len(values)}")
        for index, cell in enumerate(values):
            row = _value(
                cell,
                number,
                table="1",
                task=task,
                dev_set=dev_set,
                student=TABLE1_STUDENTS[index // 4],
                teacher="bert-base",
                init=inits[index],
            )
            if note:
                row.add_note(note)
            if row.init == "preload":
                row.add_note("the pre-load student is 768 wide (Section 4.2), not the named student's width")
            rows.append(row)
        number += 1
    _check_bold(rows, group=("task", "dev_set", "student"))
    return rows


# --- Table 2: width x depth -------------------------------------------------------------------------------------


def parse_table2(src: Source) -> list[Row]:
    """Two blocks (about 6.2M parameters; 2 GFLOPs) of shapes x 8 dev sets; shape extras as columns."""
    start = src.find(r"^Table 2:")
    end = src.find(r"^#### 4\.6", start)
    rows: list[Row] = []
    block = ""
    dev_columns: list[tuple[str, str]] = []
    for number, line in src.numbered(start + 1, end):
        if _skippable(line):
            continue
        cells = split_cells(line)
        first = cells[0].text
        if first.startswith("#para"):
            block = "fixed_params"
            continue
        if first.startswith("flops ="):
            block = "fixed_flops"
            continue
        if first == "Dimension":
            names = [c.text for c in cells]
            if names[:5] != ["Dimension", "#Layer", "#para (M)", "flops (G)", "Latency (ms)"]:
                raise TranscriptionError(f"Table 2 line {number}: unexpected header {names[:5]}")
            dev_columns = []
            for name in names[5:]:
                found = dev_header(name)
                if found is None:
                    raise TranscriptionError(f"Table 2 line {number}: unknown dev set {name!r}")
                dev_columns.append(found)
            continue
        if not block or not dev_columns:
            raise TranscriptionError(f"Table 2 line {number}: value row before its header: {line!r}")
        width, layers, params, flops, latency, *values = cells
        if len(values) != len(dev_columns):
            raise TranscriptionError(
                f"Table 2 line {number}: {len(values)} values for {len(dev_columns)} columns"
            )
        shape = f"w{width.text}-l{layers.text}"
        bold_extras = [
            name for name, c in (("flops", flops), ("latency", latency), ("params", params)) if c.bold
        ]
        for (task, dev_set), cell in zip(dev_columns, values, strict=True):
            row = _value(
                cell,
                number,
                table="2",
                task=task,
                dev_set=dev_set,
                student=shape,
                teacher="bert-base",
                init="general_distillation",
                block=block,
                params_m=params.text,
                flops_g=flops.text,
                latency_ms=latency.text,
            )
            if bold_extras:
                row.add_note(f"the paper prints this shape's {' and '.join(bold_extras)} in bold")
            rows.append(row)
    _check_bold(rows, group=("block", "task", "dev_set"))
    return rows


# --- Table 3: teacher x student ---------------------------------------------------------------------------------


def parse_table3(src: Source) -> list[Row]:
    """9 unlabelled dev rows x (2 teacher scores + 3 students x 2 teachers) = 72 numbers."""
    start = src.find(r"^Table 3:")
    header = src.find(r"^Teacher Model\t", start)
    students = [c.text for c in split_cells(src.line(header + 1))]
    teachers = [c.text for c in split_cells(src.line(header + 2))]
    if students != list(PAPER_STUDENTS) or teachers != ["bert-base", "bert-large"] * 4:
        raise TranscriptionError(f"Table 3: unexpected header at lines {header + 1}-{header + 2}")
    rows: list[Row] = []
    for index, (task, dev_set) in enumerate(TABLE3_ROW_ORDER):
        number = header + 3 + index
        cells = split_cells(src.line(number))
        if len(cells) != 8 or not all(is_number(c.text) for c in cells):
            raise TranscriptionError(f"Table 3 line {number}: expected 8 numbers")
        for column, cell in enumerate(cells):
            teacher = teachers[column]
            if column < 2:
                row = _value(
                    cell,
                    number,
                    table="3",
                    task=task,
                    dev_set=dev_set,
                    student="",
                    teacher=teacher,
                    role="teacher",
                )
            else:
                student = students[(column - 2) // 2]
                row = _value(
                    cell,
                    number,
                    table="3",
                    task=task,
                    dev_set=dev_set,
                    student=student,
                    teacher=teacher,
                    init=DEFAULT_INIT,
                )
            row.add_note("task not printed; inferred from the row order (see NOTES.md)")
            rows.append(row)
    if split_cells(src.line(header + 3 + len(TABLE3_ROW_ORDER))):
        raise TranscriptionError("Table 3: more than 9 rows")
    return rows


# --- Table 4: temperature x hard-label weight -------------------------------------------------------------------


def parse_table4(src: Source) -> list[Row]:
    """bert-mini; 9 dev sets x 6 hard-label weights x 4 temperatures = 216 numbers."""
    start = src.find(r"^Table 4:")
    end = src.find(r"A\.3\.2 Single-Match", start)
    temperatures: list[str] = []
    task = dev_set = ""
    rows: list[Row] = []
    for number, line in src.numbered(start + 1, end):
        if _skippable(line):
            continue
        cells = split_cells(line.replace("Hard Label Weight", ""))
        if [c.text for c in cells] == ["Temperature"]:
            continue
        if cells and all(is_number(c.text) for c in cells) and len(cells) == 4 and not temperatures:
            temperatures = [c.text for c in cells]
            continue
        if len(cells) == 1 and (found := dev_header(cells[0].text)):
            task, dev_set = found
            continue
        if len(cells) == 5 and all(is_number(c.text) for c in cells) and task:
            alpha, *values = cells
            for temperature, cell in zip(temperatures, values, strict=True):
                rows.append(
                    _value(
                        cell,
                        number,
                        table="4",
                        task=task,
                        dev_set=dev_set,
                        student="bert-mini",
                        teacher="bert-base",
                        init=DEFAULT_INIT,
                        temperature=temperature,
                        alpha=alpha.text,
                    )
                )
            continue
        raise TranscriptionError(f"Table 4 line {number}: cannot place {line!r}")
    _check_bold(rows, group=("task", "dev_set"))
    return rows


# --- Tables 5, 6, 8: knowledge x strategy per dev set and student -----------------------------------------------


def _knowledge_label(text: str) -> str | None:
    """'attention_ce_mean, cos' -> 'attention_ce_mean+cos' (paper's order kept); None if not knowledge."""
    names = [part.strip() for part in text.split(",")]
    if all(name in PAPER_KNOWLEDGE for name in names) and len(names) <= 2:
        return "+".join(names)
    return None


def _strategies(cells: list[Cell], number: int, table: str) -> tuple[list[str], set[str]]:
    """Strategy names of a header row in canonical spelling, and those the OCR dropped from its end.

    A header that names only a prefix of the canonical five (Table 8's first: "First Last Dilatation First1")
    is read as all five in the usual order; the dropped names are returned so their values get a note.
    """
    names = []
    for cell in cells:
        name = _STRATEGY_ALIASES.get(cell.text.lower())
        if name is None:
            raise TranscriptionError(f"Table {table} line {number}: unknown strategy {cell.text!r}")
        names.append(name)
    if tuple(names) == PAPER_STRATEGIES[: len(names)]:
        return list(PAPER_STRATEGIES), set(PAPER_STRATEGIES[len(names) :])
    raise TranscriptionError(
        f"Table {table} line {number}: strategies {names} not in the order {PAPER_STRATEGIES}"
    )


def parse_match_table(src: Source, table: str, start: int, end: int, *, beta: str) -> list[Row]:
    """Dev-set headers, student headers (with or without strategy names), then knowledge rows of five values."""
    task = dev_set = student = ""
    strategies: list[str] = list(PAPER_STRATEGIES)
    dropped: set[str] = set()
    header_line = 0
    rows: list[Row] = []
    for number, line in src.numbered(start, end):
        if _skippable(line) or line.startswith("#") or line.startswith("**A.3") or line.startswith("Table "):
            continue
        cells = split_cells(line)
        first = cells[0].text
        if len(cells) == 1 and (found := dev_header(first)):
            task, dev_set = found
            student = ""
            continue
        if first in PAPER_STUDENTS:
            student = first
            if len(cells) > 1:
                strategies, dropped = _strategies(cells[1:], number, table)
                header_line = number
            continue
        if first.lower() in _STRATEGY_ALIASES:
            strategies, dropped = _strategies(cells, number, table)
            header_line = number
            continue
        knowledge = _knowledge_label(first)
        if knowledge is None:
            raise TranscriptionError(f"Table {table} line {number}: cannot place {line!r}")
        if not (task and student):
            raise TranscriptionError(
                f"Table {table} line {number}: values before a dev set and student header"
            )
        values = cells[1:]
        if len(values) != len(strategies) or not all(is_number(c.text) for c in values):
            raise TranscriptionError(f"Table {table} line {number}: expected {len(strategies)} numbers")
        for strategy, cell in zip(strategies, values, strict=True):
            row = _value(
                cell,
                number,
                table=table,
                task=task,
                dev_set=dev_set,
                student=student,
                teacher="bert-base",
                knowledge=knowledge,
                strategy=strategy,
                init=DEFAULT_INIT,
                beta=beta,
            )
            if strategy in dropped:
                row.add_note(
                    f"column header {strategy!r} missing in the OCR (line {header_line}); read as the usual fifth column"
                )
            rows.append(row)
    return rows


def parse_table5(src: Source) -> list[Row]:
    start = src.find(r"A\.3\.2 Single-Match")
    end = src.find(r"A\.3\.3 Double-Match", start)
    return parse_match_table(src, "5", start + 1, end, beta="1")


def parse_table6(src: Source) -> list[Row]:
    start = src.find(r"A\.3\.3 Double-Match")
    end = src.find(r"A\.3\.4 Best Practices", start)
    return parse_match_table(src, "6", start + 1, end, beta="1")


def parse_table8(src: Source) -> list[Row]:
    start = src.find(r"^Table 8:")
    return parse_match_table(src, "8", start + 1, len(src.lines) + 1, beta="auto")


# --- Table 7: best practice -------------------------------------------------------------------------------------

# Row label -> (student, teacher, role, init).
TABLE7_SYSTEMS = {
    "BERT <sub>base</sub>": ("", "bert-base", "teacher", ""),
    "Previous SOTA (ELECTRA-small)": ("electra-small", "", "baseline", ""),
    "Ours (BERT <sub>mini</sub> )": ("bert-mini", "bert-base", "student", DEFAULT_INIT),
}


def parse_table7(src: Source) -> list[Row]:
    """3 systems x (8 dev sets + the average); MNLI's cell holds "matched mismatched"; no CoLA column."""
    start = src.find(r"^Table 7:")
    header = src.find(r"^\t#para", start)
    names = [c.text for c in split_cells(src.line(header))]
    expected = ["#para (M)", "SST-2", "STS-B", "QQP", "MRPC", "RTE", "MNLI", "QNLI", "average"]
    if names != expected:
        raise TranscriptionError(f"Table 7 line {header}: unexpected header {names}")
    rows: list[Row] = []
    for number in range(header + 1, header + 1 + len(TABLE7_SYSTEMS)):
        label, *rest = src.line(number).split("\t")
        if label.strip() not in TABLE7_SYSTEMS:
            raise TranscriptionError(f"Table 7 line {number}: unknown system {label.strip()!r}")
        student, teacher, role, init = TABLE7_SYSTEMS[label.strip()]
        cells = split_cells("\t".join(rest))
        params, *values = cells
        columns: list[tuple[str, str, str, Cell, str]] = []
        for name, cell in zip(names[1:], values, strict=True):
            if name == "MNLI":
                matched, mismatched = cell.text.split()
                note = "one cell prints 'matched mismatched'; split in that order (see NOTES.md)"
                columns.append(("mnli", "validation_matched", "accuracy", Cell(matched, cell.bold), note))
                columns.append(
                    ("mnli", "validation_mismatched", "accuracy", Cell(mismatched, cell.bold), note)
                )
            elif name == "average":
                note = (
                    "the paper's average: the mean of SST-2, STS-B, QQP, MRPC, RTE and QNLI (MNLI left out)"
                )
                columns.append(("", "", "average", cell, note))
            else:
                found = dev_header(name)
                if found is None:
                    raise TranscriptionError(f"Table 7 line {header}: unknown dev set {name!r}")
                columns.append((*found, reported_metric(found[0]), cell, ""))
        for task, dev_set, metric, cell, note in columns:
            row = _value(
                cell,
                number,
                table="7",
                task=task,
                dev_set=dev_set,
                student=student,
                teacher=teacher,
                role=role,
                metric=metric,
                init=init,
                params_m=params.text,
            )
            if note:
                row.add_note(note)
            rows.append(row)
    return rows


# --- checks shared by all tables --------------------------------------------------------------------------------


def _check_bold(rows: list[Row], group: tuple[str, ...]) -> None:
    """Note bold values that are not their block's maximum, and blocks whose maximum is not bold."""
    blocks: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        blocks.setdefault(tuple(getattr(row, name) for name in group), []).append(row)
    for members in blocks.values():
        best = max(float(r.value_text) for r in members)
        bold = [r for r in members if r.bold]
        for row in bold:
            if float(row.value_text) < best:
                row.add_note(f"bold in the paper but not the best of its block ({best:g} is higher)")
        if bold:
            for row in members:
                if float(row.value_text) == best and not row.bold:
                    row.add_note("best of its block but not bold in the paper")


def apply_checks(rows: list[Row]) -> None:
    """Flag malformed and impossible numbers, apply the manual judgements, and refuse duplicate keys."""
    for row in rows:
        places = decimals(row.value_text)
        if places > 4:
            row.add_note(
                f"{places} decimals where the paper prints at most 4; malformed in print", doubtful=True
            )
        elif row.metric == "accuracy" and (row.table != "7" or row.role == "student"):
            # Table 7 prints GLUE-style 3-decimal scores, and its teacher and baseline rows are quoted from other
            # papers: only its own student's row is checked, at the precision printed.
            size = DEV_SET_SIZES[(row.task, row.dev_set)]
            places = 3 if row.table == "7" and places <= 3 else 4
            if not feasible_accuracy(row.value_text, size, places):
                row.add_note(
                    f"not k/{size} for any k (no accuracy on a {size}-example dev set prints so)",
                    doubtful=True,
                )
        for match, reason in MANUAL_DOUBTS:
            if all(getattr(row, name) == value for name, value in match.items()):
                row.add_note(reason, doubtful=True)
    seen: dict[tuple[str, ...], int] = {}
    for row in rows:
        if row.key() in seen:
            raise TranscriptionError(
                f"duplicate key {row.key()} at lines {seen[row.key()]} and {row.source_line}"
            )
        seen[row.key()] = row.source_line


PARSERS = {
    "1": parse_table1,
    "2": parse_table2,
    "3": parse_table3,
    "4": parse_table4,
    "5": parse_table5,
    "6": parse_table6,
    "7": parse_table7,
    "8": parse_table8,
}


def transcribe(text: str) -> dict[str, list[Row]]:
    """Every table's rows, checked, keyed by table number as text."""
    src = Source(text)
    tables = {name: parser(src) for name, parser in PARSERS.items()}
    apply_checks([row for rows in tables.values() for row in rows])
    return tables


def to_csv(rows: Iterable[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        record = asdict(row)
        record["bold"] = "true" if row.bold else "false"
        record["doubtful"] = "true" if row.doubtful else "false"
        writer.writerow({name: record[name] for name in COLUMNS})
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None, help="the OCR text of the paper")
    parser.add_argument("--out", type=Path, default=PAPER_DIR, help="where table{N}.csv go")
    parser.add_argument(
        "--check", action="store_true", help="fail if the CSVs in --out differ from the source"
    )
    args = parser.parse_args(argv)
    source = args.source or default_source()
    if source is None or not source.is_file():
        print(f"paper text not found: {source} (set KDGRID_PAPER_TEXT or pass --source)", file=sys.stderr)
        return 2
    tables = transcribe(source.read_text(encoding="utf-8"))
    stale = []
    for name, rows in tables.items():
        path = args.out / f"table{name}.csv"
        text = to_csv(rows)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
        doubtful = sum(row.doubtful for row in rows)
        print(f"table {name}: {len(rows)} numbers, {doubtful} doubtful")
    if stale:
        print(f"out of date with the source: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


assert {f.name for f in fields(Row)} == set(COLUMNS), "Row and COLUMNS must name the same fields"

if __name__ == "__main__":
    raise SystemExit(main())
