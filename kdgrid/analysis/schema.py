"""The columns that say where a number of a table goes (its cell key), one definition for every analysis module.

The tidy format of the store (`kdgrid.analysis.tidy`), the published numbers (`kdgrid.analysis.paper_numbers`,
``paper/table*.csv``) and the transcription of the paper (``tools/transcribe_paper.py``) all name a number's
place with these columns; each module imports them from here.

    CONFIG_COLUMNS  a configuration's place: the cell key of every table (``seed`` is aggregated away)
    LABEL_COLUMNS   those of them that are labels (text); the others are numbers (temperature, alpha, soft_weight)
    FACT_COLUMNS    per-configuration facts carried beside the score: parameters (M), FLOPs (G), latency (ms)
    PAPER_KEY       what identifies a published number inside its table: the cell key less beta (it follows
                    from the table: 1 in Tables 5 and 6, auto in Table 8), soft_weight (never printed) and metric
                    (it follows from the task: `kdgrid.paper.reported_metric`)
"""

from __future__ import annotations

CONFIG_COLUMNS: tuple[str, ...] = (
    "table",
    "task",
    "dev_set",
    "student",
    "teacher",
    "role",
    "knowledge",
    "strategy",
    "init",
    "temperature",
    "alpha",
    "beta",
    "soft_weight",
    "block",
    "metric",
)
NUMBER_COLUMNS: tuple[str, ...] = ("temperature", "alpha", "soft_weight")
LABEL_COLUMNS: tuple[str, ...] = tuple(c for c in CONFIG_COLUMNS if c not in NUMBER_COLUMNS)
FACT_COLUMNS: tuple[str, ...] = ("params_m", "flops_g", "latency_ms")
PAPER_KEY: tuple[str, ...] = tuple(c for c in CONFIG_COLUMNS if c not in ("beta", "soft_weight", "metric"))
