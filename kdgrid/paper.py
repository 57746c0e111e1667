"""The paper's vocabulary: the names and orders of "Knowledge Distillation of Transformer-based Language Models
Revisited" as its tables print them, in one place.

Everything here is a fact of the paper, written in the names the rest of kdgrid uses: knowledge types as
`kdgrid.core.knowledge` registers them, strategies as `kdgrid.core.matching` does, tasks and dev sets as
`kdgrid.core.data` names them (``("mnli", "validation_matched")``), students as `kdgrid.core.model.models` does. The
transcribed tables (``kdgrid/analysis/paper/table*.csv``) are the authority: ``tests/test_paper.py`` checks every order
below against them and that the registries know every name.

A leaf module (no imports beyond the standard library), so the core, the grid and the analysis can all import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# A dev set as the core names it: (task, dev set), e.g. ("mnli", "validation_mismatched").
DevSet = tuple[str, str]

# --- tables ----------------------------------------------------------------------------------------------------

# The paper's tables, and every table kdgrid lays out: those and the demo's (Table 5 in miniature). A sweep
# file's ``table:`` key names one of `TABLES`.
PAPER_TABLES: tuple[str, ...] = ("1", "2", "3", "4", "5", "6", "7", "8")
DEMO_TABLE = "demo"
TABLES: tuple[str, ...] = (*PAPER_TABLES, DEMO_TABLE)

# --- knowledge and matching (Tables 5, 6, 8) ------------------------------------------------------------------

# The paper's ten intermediate knowledge types, in the order of Table 5's (and Table 8's) rows.
PAPER_KNOWLEDGE: tuple[str, ...] = (
    "attention_mse_sum",
    "attention_ce_mean",
    "hidden_mse",
    "mmd",
    "gram",
    "cos",
    "pkd",
    "query_relation",
    "key_relation",
    "value_relation",
)

# How the paper's prose writes each of them (Appendix A.2, Section 4.3), the names its tables' cells use.
PAPER_KNOWLEDGE_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "attention_mse_sum": "attention mse",
        "attention_ce_mean": "attention ce",
        "hidden_mse": "hidden mse",
        "mmd": "mmd",
        "gram": "gram",
        "cos": "cos",
        "pkd": "pkd",
        "query_relation": "query relation",
        "key_relation": "key relation",
        "value_relation": "value relation",
    }
)

# The five matching strategies (Section 4.4), in the order of the columns of Tables 5, 6 and 8.
PAPER_STRATEGIES: tuple[str, ...] = ("First", "Last", "Dilatation", "First-1", "Last-1")

# Table 6's 31 double matches, in its row order (alphabetical by the printed "first,second"). Each pair takes
# one knowledge type from each of two regions (attention x hidden 2 x 5, attention x qkv 2 x 3, hidden x qkv
# 5 x 3), written region first as `kdgrid.core.knowledge.canonical_pair` orders it: "mmd,key_relation".
DOUBLE_MATCH_PAIRS: tuple[tuple[str, str], ...] = (
    ("attention_ce_mean", "cos"),
    ("attention_ce_mean", "gram"),
    ("attention_ce_mean", "hidden_mse"),
    ("attention_ce_mean", "key_relation"),
    ("attention_ce_mean", "mmd"),
    ("attention_ce_mean", "pkd"),
    ("attention_ce_mean", "query_relation"),
    ("attention_ce_mean", "value_relation"),
    ("attention_mse_sum", "cos"),
    ("attention_mse_sum", "gram"),
    ("attention_mse_sum", "hidden_mse"),
    ("attention_mse_sum", "key_relation"),
    ("attention_mse_sum", "mmd"),
    ("attention_mse_sum", "pkd"),
    ("attention_mse_sum", "query_relation"),
    ("attention_mse_sum", "value_relation"),
    ("cos", "key_relation"),
    ("cos", "query_relation"),
    ("cos", "value_relation"),
    ("gram", "key_relation"),
    ("gram", "query_relation"),
    ("gram", "value_relation"),
    ("hidden_mse", "key_relation"),
    ("hidden_mse", "query_relation"),
    ("hidden_mse", "value_relation"),
    ("mmd", "key_relation"),
    ("mmd", "query_relation"),
    ("mmd", "value_relation"),
    ("pkd", "key_relation"),
    ("pkd", "query_relation"),
    ("pkd", "value_relation"),
)

# --- students and initialisation ------------------------------------------------------------------------------

# The three students, in the order of Tables 3, 5, 6 and 8 (blocks, or column groups in Table 3).
PAPER_STUDENTS: tuple[str, ...] = ("bert-small", "bert-mini", "bert-tiny")
# Table 1 prints them the other way round (column groups, left to right).
TABLE1_STUDENTS: tuple[str, ...] = ("bert-tiny", "bert-mini", "bert-small")

# The initialisation schemes of Table 1 (Section 4.2), in its column order, as `kdgrid.core.job.init` names them.
PAPER_INITS: tuple[str, ...] = ("random", "preload", "general_distillation", "pretrain")
# The paper's default initialisation (Appendix A.1.1): every student of Tables 3-8 (Table 2's are general-distilled).
DEFAULT_INIT = "pretrain"

# --- tasks, dev sets and the metric reported -----------------------------------------------------------------

# The nine dev sets in the order of Tables 4, 5, 6 and 8 (and, read so by the transcription, of the unlabelled
# rows of Table 3): MNLI mismatched before matched.
APPENDIX_DEV_SETS: tuple[DevSet, ...] = (
    ("mrpc", "validation"),
    ("sst2", "validation"),
    ("qqp", "validation"),
    ("qnli", "validation"),
    ("rte", "validation"),
    ("cola", "validation"),
    ("stsb", "validation"),
    ("mnli", "validation_mismatched"),
    ("mnli", "validation_matched"),
)
# Table 1's rows (its unlabelled second MNLI row read as mismatched; kdgrid/analysis/paper/NOTES.md).
TABLE1_DEV_SETS: tuple[DevSet, ...] = (
    ("qnli", "validation"),
    ("mrpc", "validation"),
    ("rte", "validation"),
    ("stsb", "validation"),
    ("qqp", "validation"),
    ("mnli", "validation_matched"),
    ("mnli", "validation_mismatched"),
    ("sst2", "validation"),
    ("cola", "validation"),
)
# Table 2's columns: eight dev sets, MNLI matched only.
TABLE2_DEV_SETS: tuple[DevSet, ...] = (
    ("cola", "validation"),
    ("mrpc", "validation"),
    ("stsb", "validation"),
    ("rte", "validation"),
    ("qqp", "validation"),
    ("mnli", "validation_matched"),
    ("sst2", "validation"),
    ("qnli", "validation"),
)
# Table 7's columns: no CoLA; its one MNLI cell prints matched then mismatched.
TABLE7_DEV_SETS: tuple[DevSet, ...] = (
    ("sst2", "validation"),
    ("stsb", "validation"),
    ("qqp", "validation"),
    ("mrpc", "validation"),
    ("rte", "validation"),
    ("mnli", "validation_matched"),
    ("mnli", "validation_mismatched"),
    ("qnli", "validation"),
)
# What Table 7's "average" column averages: MNLI left out. This mean reproduces all three printed averages; the
# mean of all eight numbers does not (kdgrid/analysis/paper/NOTES.md).
TABLE7_AVERAGED: tuple[DevSet, ...] = tuple(d for d in TABLE7_DEV_SETS if d[0] != "mnli")

# The metric the paper reports per task (Section 4.1): accuracy everywhere (both MNLI dev sets included) except
# STS-B, where it is Pearson's r. Names as `kdgrid.metrics` gives them.
DEFAULT_METRIC = "accuracy"
REPORTED_METRIC: Mapping[str, str] = MappingProxyType({"stsb": "pearson"})


def reported_metric(task: str) -> str:
    """The metric the paper reports for ``task``: ``pearson`` for STS-B, ``accuracy`` for any other task."""
    return REPORTED_METRIC.get(task, DEFAULT_METRIC)
