"""`kdgrid.analysis.render`: the four output formats, checked against golden files and by their conventions."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest

from kdgrid.analysis.render import latex_escape, number_text, render
from kdgrid.analysis.tables import Column, build_view, get_spec
from kdgrid.analysis.tidy import aggregate_seeds
from kdgrid.errors import ConfigError
from tests.analysis.tables_testing import tidy_rows

GOLDEN = Path(__file__).parent / "golden"


def small_table4():
    """A fixed input: two tasks, a missing cell, two seeds in one cell."""
    rows = [
        {"table": "4", "task": "rte", "temperature": 1.0, "alpha": 0.1, "value": 0.6751},
        {"table": "4", "task": "rte", "temperature": 2.0, "alpha": 0.1, "value": 0.6679},
        {"table": "4", "task": "rte", "temperature": 1.0, "alpha": 0.2, "value": 0.6570},
        # T = 2, weight 0.2 missing
        {"table": "4", "task": "stsb", "metric": "pearson", "temperature": 1.0, "alpha": 0.1, "value": 0.85},
        {"table": "4", "task": "stsb", "metric": "pearson", "temperature": 1.0, "alpha": 0.1, "value": 0.86},
        {
            "table": "4",
            "task": "stsb",
            "metric": "pearson",
            "temperature": 2.0,
            "alpha": 0.1,
            "value": 0.8515,
        },
    ]
    return build_view(get_spec("4"), aggregate_seeds(tidy_rows(rows)))


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KDGRID_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; KDGRID_UPDATE_GOLDEN=1 rewrites it after a review"


def test_markdown_golden():
    check_golden("table4_markdown.md", render(small_table4(), "markdown"))


def test_latex_golden():
    check_golden("table4_latex.tex", render(small_table4(), "latex"))


def test_markdown_conventions():
    text = render(small_table4(), "markdown")
    assert "| 0.2 | 0.6570 | - |" in text  # missing is "-", never 0
    assert "**0.6751**" in text  # best of the RTE block
    assert "**0.8550±0.0071**" in text  # mean±std of two seeds, and the best of STS-B


def test_csv_is_long_and_keeps_full_precision():
    rows = list(csv.DictReader(io.StringIO(render(small_table4(), "csv"))))
    assert (
        len(rows) == (2 + 1) * 4
    )  # every cell of both blocks' layouts (RTE 2 rows, STS-B 1), missing ones too
    missing = [r for r in rows if r["block"] == "RTE" and r["row"] == "0.2" and r["column"] == "2"]
    assert missing[0]["value"] == "" and missing[0]["n_seeds"] == ""
    stsb = next(r for r in rows if r["block"] == "STS-B" and r["row"] == "0.1" and r["column"] == "1")
    assert float(stsb["value"]) == pytest.approx(0.855) and stsb["n_seeds"] == "2" and stsb["bold"] == "1"


def test_terminal_text_shows_the_numbers():
    text = render(small_table4(), "terminal")
    assert "Table 4" in text and "0.6751" in text and "0.8550±0.0071" in text
    assert " - " in text or "-│" in text


def test_number_text():
    assert number_text(float("nan"), Column("x")) == "-"
    assert number_text(0.70456, Column("x")) == "0.7046"
    assert number_text(6.3612, Column("#para (M)", fact=True)) == "6.361"
    assert number_text(0.8, Column("x"), std=0.01, n_seeds=3) == "0.8000±0.0100"


def test_latex_escape():
    assert latex_escape("attention_ce_mean") == r"attention\_ce\_mean"
    assert latex_escape("#para ≈ 6.2M") == r"\#para $\approx$ 6.2M"


def test_unknown_format_names_the_choices():
    with pytest.raises(ConfigError, match="unknown --format 'html'; allowed: terminal, markdown, latex, csv"):
        render(small_table4(), "html")
