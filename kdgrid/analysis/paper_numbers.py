"""The paper's published numbers (Tables 1-8) as a pandas DataFrame in the tidy format.

The numbers live in ``kdgrid/analysis/paper/table{1..8}.csv`` (written by ``tools/transcribe_paper.py`` from the OCR
of the paper; every judgement behind them is in ``kdgrid/analysis/paper/NOTES.md``). One row per published number:

    table        "1" .. "8" (text, as the tidy format of `kdgrid.analysis.tidy` has it)
    task         cola, mrpc, stsb, rte, qqp, mnli, sst2, qnli; "" for Table 7's average column
    dev_set      validation; MNLI: validation_matched / validation_mismatched; "" for the average
    student      bert-tiny, bert-mini, bert-small, a shape "w{width}-l{layers}" (Table 2), electra-small (Table 7
                 baseline); "" on a teacher's own score
    teacher      bert-base (the paper's default) or bert-large (Table 3); "" for the Table 7 baseline
    role         student | teacher (the teacher's own score) | baseline (a system quoted from another paper)
    knowledge    registry names joined by "+" in the paper's order ("attention_ce_mean+cos"); "" for none
    strategy     First, Last, Dilatation, First-1, Last-1; "" for none
    init         random, preload, general_distillation, pretrain ("" where the row is not a distilled student)
    temperature, alpha   float; printed only in Table 4 (NaN elsewhere: the paper's per-task defaults apply)
    beta         "1" (Tables 5, 6), "auto" (Table 8: weights tuned to ~1/10 of the soft loss), "" otherwise
    block        Table 2's sub-study: fixed_params | fixed_flops; "" elsewhere
    params_m, flops_g, latency_ms   float; Table 2 (all three) and Table 7 (params_m); NaN elsewhere
    metric       accuracy; pearson for STS-B; "average" for Table 7's average column
    value_text   the number exactly as printed; value: it as a float
    bold         bool: printed in bold
    doubtful     bool: the printed number is probably not what was measured; note says why
    note         every judgement applied to the row ("" if none)
    source_line  int: the line of the OCR text the number was read from
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pandas as pd

from kdgrid.analysis.schema import CONFIG_COLUMNS, FACT_COLUMNS, LABEL_COLUMNS
from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_TABLES

PAPER_DIR = Path(__file__).resolve().parent / "paper"
TABLES: tuple[str, ...] = PAPER_TABLES

TEXT_COLUMNS: tuple[str, ...] = (*LABEL_COLUMNS, "value_text", "note")
FLOAT_COLUMNS: tuple[str, ...] = ("temperature", "alpha", "params_m", "flops_g", "latency_ms", "value")
BOOL_COLUMNS: tuple[str, ...] = ("bold", "doubtful")
INT_COLUMNS: tuple[str, ...] = ("source_line",)
# The CSV's columns, in order: the cell key (`kdgrid.analysis.schema`; soft_weight is never printed, the metric
# comes after the facts), the facts, then the number and what was judged about it.
COLUMNS: tuple[str, ...] = (
    *(c for c in CONFIG_COLUMNS if c not in ("soft_weight", "metric")),
    *FACT_COLUMNS,
    "metric",
    "value_text",
    "value",
    "bold",
    "doubtful",
    "note",
    "source_line",
)


def table_path(table: str) -> Path:
    """The CSV of one table (``"5"`` -> ``kdgrid/analysis/paper/table5.csv``)."""
    return PAPER_DIR / f"table{table}.csv"


def _table_label(table: int | str) -> str:
    label = str(table).strip().lower().removeprefix("table").strip()
    if label not in TABLES:
        raise ConfigError(f"the paper has no table {table!r}; tables: {', '.join(TABLES)}")
    return label


def _read_table(table: str) -> pd.DataFrame:
    path = table_path(table)
    if not path.is_file():
        raise ConfigError(f"{path} is missing; regenerate it with `python tools/transcribe_paper.py`")
    # Everything as text first so empty cells stay "" and printed numbers keep their digits.
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = sorted(set(COLUMNS) - set(frame.columns))
    if missing:
        raise ConfigError(f"{path} lacks column(s) {missing}")
    for column in FLOAT_COLUMNS:
        frame[column] = pd.to_numeric(frame[column].replace("", None), errors="raise").astype("float64")
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].map({"true": True, "false": False}).astype(bool)
    for column in INT_COLUMNS:
        frame[column] = frame[column].astype("int64")
    for column in TEXT_COLUMNS:
        frame[column] = frame[column].astype(str)
    return frame[list(COLUMNS)]


@cache
def _all_tables() -> pd.DataFrame:
    return pd.concat([_read_table(t) for t in TABLES], ignore_index=True)


def paper_numbers(
    table: int | str | Iterable[int | str] | None = None, *, include_doubtful: bool = True
) -> pd.DataFrame:
    """The published numbers of one table, several, or all (``table=None``), one row per number.

    Args:
        table: ``5``, ``"5"``, ``"table5"``, a list of those, or None for all eight tables.
        include_doubtful: False drops the numbers flagged ``doubtful`` (see ``kdgrid/analysis/paper/NOTES.md``).

    Returns:
        A fresh DataFrame (safe to modify) with the columns described in this module's docstring; text columns
        hold ``""`` where not applicable, float columns NaN.

    Raises:
        ConfigError: a table the paper does not have, or a missing/malformed CSV.
    """
    frame = _all_tables()
    if table is not None:
        wanted = [table] if isinstance(table, (int, str)) else list(table)
        labels = {_table_label(t) for t in wanted}
        frame = frame[frame["table"].isin(labels)]
    if not include_doubtful:
        frame = frame[~frame["doubtful"]]
    return frame.reset_index(drop=True).copy()
