"""The row schema of the results store: one row per attempt of a trial, done or failed.

Every `Trial` field is its own column (so pandas can filter on ``student`` or ``temperature`` directly). Nested
results (scores per dev set and metric, the per-epoch curve, loss terms, weights, layer pairs, package versions)
are JSON text columns: their keys differ between tasks, and one fixed Arrow schema for every file is what lets
30,000 files from different tasks, machines and code versions be read back as one dataset. `read_store` expands
the scores into flat columns and `scores_long` into a tidy table.

Bump `SCHEMA_VERSION` when a column changes meaning or type; readers fill columns a file lacks with nulls.

Versions: 1, the first; 2 adds each done trial's per-example dev predictions (``predictions``: the binary form
of `kdgrid.predictions.encode_predictions`, the student's at its best epoch and the job's teacher's), its
agreement with the teacher (``teacher_agreement_json``), why it looks degenerate (``degenerate_json``) and which
examples its predictions are of (``prediction_fingerprints_json``: rows are compared example by example only
where these match). Rows of version 1 read with nulls there. 3 adds the step-level curves
(``step_curves_json``: every N optimizer steps each loss term unweighted and weighted, the total, the learning rate,
the gradient norm, the sampled gradient cosine and a learned mapping, `kdgrid.core.training.step_curves`; with
``step_curve_every``, N, its small companion) and the diagnosis of the curves (``diagnosis_json``,
`kdgrid.diagnosis`). Rows of version 2 or older read with nulls there; `kdgrid.store.step_curves` reads their
per-epoch curve as the only points they have. The predictions are large (tens of kB for MNLI) and only statistics need
them: `READ_SCHEMA` (what readers read unless they name columns) leaves them out, and
`kdgrid.store.predictions.read_predictions` reads them for the rows asked.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3

SUPERSEDED = "superseded"
STATUSES = ("done", "failed", SUPERSEDED)
"""A row's status. ``superseded``: written by a process that had lost its trial's claim (another run took it over
after a stall, `kdgrid.store.claims`): kept for inspection, never counted as done or failed."""
COUNTED_STATUSES = ("done", "failed")

# Identity and bookkeeping: which trial, which attempt, which sweep/study wrote it.
_IDENTITY = [
    pa.field("schema_version", pa.int16()),
    pa.field("row_id", pa.string()),  # uuid4 hex of this attempt; readers drop duplicate row ids
    pa.field("trial_id", pa.string()),
    pa.field("sweep", pa.string()),
    pa.field("study", pa.string()),
    pa.field("status", pa.string()),
    pa.field("trial_json", pa.string()),  # the canonical JSON the id hashes: `Trial.from_dict` round trip
]

# Every Trial field, in `Trial`'s order. `beta` is a float or "auto": a float column plus a flag.
_CONFIG = [
    pa.field("task", pa.string()),
    pa.field("teacher", pa.string()),
    pa.field("student", pa.string()),
    pa.field("init", pa.string()),
    pa.field("init_from", pa.string()),
    pa.field("knowledge", pa.list_(pa.string())),
    pa.field("strategy", pa.string()),
    pa.field("beta", pa.float64()),  # null when beta_auto
    pa.field("beta_auto", pa.bool_()),
    pa.field("soft_weight", pa.float64()),
    pa.field("temperature", pa.float64()),
    pa.field("alpha", pa.float64()),
    pa.field("lr", pa.float64()),
    pa.field("batch_size", pa.int64()),
    pa.field("max_length", pa.int64()),
    pa.field("epochs", pa.int64()),
    pa.field("warmup_ratio", pa.float64()),
    pa.field("weight_decay", pa.float64()),
    pa.field("seed", pa.int64()),
    pa.field("projection", pa.string()),
    pa.field("relation_heads", pa.int64()),
    pa.field("max_train_samples", pa.int64()),
    pa.field("options_json", pa.string()),
]

# Derived facts about the configuration: the student's shape and the resolved layer pairs.
_DERIVED = [
    pa.field("student_layers", pa.int64()),
    pa.field("student_width", pa.int64()),
    pa.field("student_heads", pa.int64()),
    pa.field("student_ffn", pa.int64()),
    pa.field("student_params", pa.int64()),
    pa.field("student_flops", pa.int64()),
    pa.field("layer_pairs_json", pa.string()),  # [[student_layer, teacher_layer], ...]
]

# What the trial produced.
_OUTCOME = [
    pa.field("scores_json", pa.string()),  # {dev_set: {metric: value}} at the best epoch
    pa.field("last_scores_json", pa.string()),  # the same after the last epoch
    pa.field("best_epoch", pa.int64()),
    pa.field("curve_json", pa.string()),  # [{"epoch", "scores", "loss_terms"}, ...]
    pa.field("loss_terms_json", pa.string()),  # {term: mean over the last epoch}
    pa.field("weights_json", pa.string()),  # {term: weight}, auto weights as calibrated
    pa.field("extra_json", pa.string()),
    pa.field("teacher_agreement_json", pa.string()),  # {dev_set: agreement or Pearson r}; null: no teacher
    pa.field("degenerate_json", pa.string()),  # ["reason", ...] (`kdgrid.core.training.degenerate`); [] = healthy
    pa.field("prediction_fingerprints_json", pa.string()),  # {dev_set: fingerprint}; null: no predictions
    pa.field("step_curve_every", pa.int64()),  # steps between two points of step_curves_json; null: none
    pa.field("diagnosis_json", pa.string()),  # [{"flag", "evidence"}, ...] (`kdgrid.diagnosis`); [] = none
    pa.field("error_type", pa.string()),
    pa.field("error_message", pa.string()),
    pa.field("traceback", pa.string()),
]

# Where and when it ran.
_PROVENANCE = [
    pa.field("wall_time_s", pa.float64()),
    pa.field("device", pa.string()),
    pa.field("started_at", pa.string()),  # ISO-8601 UTC
    pa.field("ended_at", pa.string()),
    pa.field("written_at", pa.string()),
    pa.field("host", pa.string()),
    pa.field("pid", pa.int64()),
    pa.field("git_commit", pa.string()),
    pa.field("kdgrid_version", pa.string()),
    pa.field("package_versions_json", pa.string()),  # {"torch": "...", "transformers": "...", ...}
]

# Per-example outcome (version 2): read only when named (see `READ_SCHEMA`).
PREDICTIONS_COLUMN = "predictions"
_PREDICTIONS = [pa.field(PREDICTIONS_COLUMN, pa.binary())]  # null: a failed row, or a row of version 1
# The step-level curves (version 3): a few kB a row, read only when named, like the predictions.
STEP_CURVES_COLUMN = "step_curves_json"
_STEP_CURVES = [pa.field(STEP_CURVES_COLUMN, pa.string())]  # null: none recorded, or a row of version <= 2

SCHEMA = pa.schema(_IDENTITY + _CONFIG + _DERIVED + _OUTCOME + _PROVENANCE + _PREDICTIONS + _STEP_CURVES)

# Large columns, each with the small column that is null exactly when it is (so a reader that skipped the large
# one - the read cache - knows whether a row has it). Read only when a reader names them: a store of 26,000
# MNLI rows holds over a gigabyte of predictions, and tables, status and the read cache never need them.
LARGE_COLUMNS: dict[str, str] = {
    PREDICTIONS_COLUMN: "prediction_fingerprints_json",
    STEP_CURVES_COLUMN: "step_curve_every",
}
READ_SCHEMA = pa.schema([f for f in SCHEMA if f.name not in LARGE_COLUMNS])
# The columns `kdgrid.store.read.read_store` returns unless told otherwise (`SCHEMA`'s, less the large ones).
COLUMNS: tuple[str, ...] = tuple(READ_SCHEMA.names)

# Columns a reader can learn from a per-trial file's name alone, without opening it (see `kdgrid.store.layout`).
NAME_COLUMNS: frozenset[str] = frozenset({"trial_id", "status", "row_id"})
