"""The tidy format every table, figure and comparison meets in, and the adapter from the results store to it.

One row per number: ``table, task, dev_set, student, teacher, role, knowledge, strategy, init, temperature,
alpha, beta, soft_weight, block, metric, value`` plus the facts ``params_m, flops_g, latency_ms`` (+ ``seed``
before seeds are aggregated; ``std`` and ``n_seeds`` after). The transcribed paper numbers
(`kdgrid.analysis.paper_numbers`) use the same column names.

Conventions:
    role: ``student`` (a distilled student's score), ``teacher`` (the teacher's own score; ``student`` is ``""``)
        or ``baseline`` (a published system we do not train, e.g. ELECTRA-small in Table 7).
    block: a sub-study label where a table has several (Table 2: ``fixed_params`` / ``fixed_flops``), else ``""``.
    params_m, flops_g, latency_ms: the student's parameters (millions), forward FLOPs per sequence (10^9) and
        measured latency (ms) where known, else NaN.
    table: ``"1"`` .. ``"8"``, ``"demo"``, or the study name of any other sweep (a string, never an int).
    knowledge: registry names joined by ``+`` in sorted order (a pair is a set: ``cos+mmd``), ``""`` for none.
    strategy: canonical matching-strategy name, ``""`` when no knowledge is matched.
    beta: a string: ``"1"``, ``"0.5"``, ``"auto"`` (calibrated weights, Table 8), ``""`` when unknown.
    metric: the task's metrics as the core names them (accuracy, f1, mcc, pearson, spearman, ...). The paper
        reports accuracy everywhere except STS-B (pearson): `kdgrid.paper.reported_metric`.
    value: a fraction in [0, 1] or a correlation in [-1, 1], exactly as the store holds it.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kdgrid.analysis.schema import CONFIG_COLUMNS, FACT_COLUMNS, LABEL_COLUMNS
from kdgrid.errors import ConfigError
from kdgrid.paper import TABLES as TABLE_CHOICES
from kdgrid.store.membership import SweepMembership
from kdgrid.store.read import done_rows, latest_done_rows

# Per-seed facts of a store's rows, carried beside the number (`store_to_tidy` with ``per_seed``):
#   row_id: the store row the number comes from (its predictions are read by it; `kdgrid.analysis.cell_stats`);
#   trial_id: the trial that row is an attempt of;
#   setting: the trial's configuration apart from its seeds (canonical JSON, `trial_setting`): rows of one cell
#       must agree on it, or they are not seeds of one configuration (`aggregate_seeds` refuses);
#   degenerate: the row's reasons to distrust the number (majority class, constant predictions, ...), a tuple;
#   teacher_agreement: the student's top-1 agreement (correlation, regression) with its teacher on this dev set.
ROW_FACT_COLUMNS: tuple[str, ...] = ("row_id", "trial_id", "setting", "degenerate", "teacher_agreement")
# Fields that tell seeds of one configuration apart: the trial's seed and its data-order seed (a trial option;
# trials sharing a data order are still seeds of one cell).
SEED_FIELDS: tuple[str, ...] = ("seed", "data_seed")
SEED_OPTIONS: tuple[str, ...] = ("data_seed",)
# Fields of the trial JSON that are bookkeeping, not configuration.
_NOT_SETTING: tuple[str, ...] = ("v",)

# Score kinds the store keeps per trial: the best epoch's scores and the last epoch's.
SCORE_KINDS = ("best", "last")


def is_missing(value: Any) -> bool:
    """None, NaN or pandas' NA (a nullable column's empty cell); containers are never missing."""
    if value is None:
        return True
    if isinstance(value, (list, tuple, dict)) or (hasattr(value, "__len__") and not isinstance(value, str)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def table_name(value: Any) -> str:
    """Normalise a table label: ``5``, ``"5"``, ``"table5"``, ``"table5_single_match"`` -> ``"5"``; a study
    name that is not a paper table (``"demo"``, ``"my-study"``) is kept as it is."""
    if is_missing(value):
        return ""
    if isinstance(value, (int, float)) and float(value).is_integer():
        return str(int(value))
    text = str(value).strip()
    match = re.fullmatch(r"table[_\- ]?(\d+)(?:[_\-.].*)?|(\d+)", text, flags=re.IGNORECASE)
    return (match.group(1) or match.group(2)) if match else text


def legacy_table_of(study: Any, sweep: Any) -> str:
    """The table of a (study, sweep) pair by their names, for stores written before sweep files declared their
    table (rows and memberships without one): its study if that names a table (``table5``, ``demo``), else its
    sweep if that does (``table5_single_match``, or a file name ``sweeps/table5_single_match.yaml``), else the
    study (or sweep) name as it is. The only place a name decides a table."""
    names = [table_name(study), table_name(Path(_text(sweep)).stem) if _text(sweep) else ""]
    for name in names:
        if name in TABLE_CHOICES:
            return name
    return names[0] or names[1]


def declared_tables(memberships: Iterable[SweepMembership]) -> dict[str, str]:
    """Sweep name -> the table its file declares (``table:``), from the memberships recorded with one."""
    return {m.sweep: m.table for m in memberships if m.table is not None}


def table_of(study: Any, sweep: Any, declared: Mapping[str, str] | None = None) -> str:
    """The table a store row's (study, sweep) belongs to: the table its sweep declared (``declared``, from the
    store's memberships: `declared_tables`), else, for a store written before sweeps declared tables, the name
    rule `legacy_table_of`."""
    name = _text(sweep)
    table = (declared or {}).get(name) or (declared or {}).get(Path(name).stem if name else "")
    return table or legacy_table_of(study, sweep)


def membership_tables(memberships: Iterable[SweepMembership]) -> dict[str, set[str]]:
    """Table -> the trial ids that the recorded sweep memberships (`kdgrid.store.membership`) put in it, for the
    tables the analysis lays out (`TABLE_CHOICES`): the table the membership records (its sweep file's
    ``table:``), else, for a membership written before, its (study, sweep) by `legacy_table_of`.

    A store written before memberships were recorded has none: its trials then count only in the tables of
    the rows' own ``study`` and ``sweep`` columns (`store_to_tidy`), so a trial two sweeps share counts in the
    table of the sweep that ran it until the other sweep is run again (`kdgrid resume` records its membership
    and runs nothing that is done)."""
    tables: dict[str, set[str]] = {}
    for membership in memberships:
        for trial_id, study in membership.trials.items():
            table = membership.table or legacy_table_of(study, membership.sweep)
            if table in TABLE_CHOICES:
                tables.setdefault(table, set()).add(trial_id)
    return tables


def knowledge_label(value: Any) -> str:
    """A knowledge list as one label: names sorted and joined by ``+`` (``""`` for none).

    Accepts what a store or CSV may hold: a list/tuple/array of names, a JSON list, or a ``+`` / ``,`` joined
    string."""
    if is_missing(value):
        return ""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            names: Iterable[Any] = json.loads(text)
        else:
            names = re.split(r"[+,]", text)
    else:
        names = list(value)
    return "+".join(sorted(str(name).strip() for name in names if str(name).strip()))


def beta_label(value: Any) -> str:
    """A knowledge weight as a label: numbers in shortest form (``1.0`` -> ``"1"``), ``"auto"`` as is."""
    if is_missing(value):
        return ""
    try:
        return format(float(value), "g")
    except (TypeError, ValueError):
        return str(value).strip()


def _text(value: Any) -> str:
    return "" if is_missing(value) else str(value)


def _float(value: Any) -> float:
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _values(column: pd.Series) -> list[Any]:
    """``list(column)``; a string column (Arrow-backed) converts as a whole, ~20x faster than iterating it."""
    if isinstance(column.dtype, pd.StringDtype):
        return column.tolist()
    return list(column)


def _each(values: Iterable[Any], convert: Callable[[Any], Any]) -> list[Any]:
    """``[convert(v) for v in values]``, converting each distinct string once: a store's label columns repeat a
    few strings over thousands of rows. Only strings are remembered (1 and 1.0, or 0.0 and -0.0, are equal keys
    that some conversions tell apart)."""
    seen: dict[str, Any] = {}
    out = []
    for value in _values(values) if isinstance(values, pd.Series) else values:
        if type(value) is str:
            if value not in seen:
                seen[value] = convert(value)
            out.append(seen[value])
        else:
            out.append(convert(value))
    return out


def _floats(column: pd.Series) -> list[float] | np.ndarray:
    """``[_float(v) for v in column]``; a plain NumPy float or integer column converts as a whole."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "fiu":
        return column.to_numpy(dtype=np.float64)
    return [_float(v) for v in column]


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Bring a tidy-ish frame (the store adapter's or the paper CSV's) to the canonical column types: every
    config column present, labels as strings, numbers as floats, ``role`` ``student`` where not given. Columns it
    does not know are kept."""
    out = frame.copy()
    for column in (*CONFIG_COLUMNS, *FACT_COLUMNS):
        if column not in out.columns:
            out[column] = "" if column in LABEL_COLUMNS else math.nan
    out["table"] = _each(out["table"], table_name)
    out["knowledge"] = _each(out["knowledge"], knowledge_label)
    out["beta"] = _each(out["beta"], beta_label)
    for column in ("task", "dev_set", "student", "teacher", "role", "strategy", "init", "block", "metric"):
        out[column] = _each(out[column], _text)
    out["role"] = [role or "student" for role in out["role"]]
    for column in ("temperature", "alpha", "soft_weight", "value", *FACT_COLUMNS):
        if column in out.columns:
            out[column] = _floats(out[column])
    return out


def _extra(value: Any) -> dict[str, Any]:
    """The ``extra`` mapping of a store row (a dict, a JSON string, or nothing)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _trial_rows(
    store_df: pd.DataFrame,
    table_trials: Mapping[str, Iterable[str]] | None = None,
    declared: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The done rows of the store with the config columns of the tidy format: one row per (trial, table).

    A trial belongs to the table of every (study, sweep) that wrote a row of it (`table_of`) and to every table
    of ``table_trials`` listing its id (the recorded memberships, `membership_tables`): a trial shared by two sweeps
    runs once (the second sweep finds it done) but counts in both tables."""
    required = {"trial_id", "task", "student"}
    missing = required - set(store_df.columns)
    if missing:
        raise ConfigError(f"the store has no column(s) {sorted(missing)}: is it a kdgrid results store?")
    rows = done_rows(store_df)
    memberships: dict[str, set[str]] = {}
    blank = [""] * len(rows)
    study = _values(rows["study"]) if "study" in rows.columns else blank
    sweep = _values(rows["sweep"]) if "sweep" in rows.columns else blank
    tables_of: dict[tuple[Any, Any], str] = {}  # (study, sweep) -> table: a store has a few pairs
    for trial_id, s, w in zip(rows["trial_id"], study, sweep, strict=True):
        pair = (s, w) if type(s) is str and type(w) is str else None
        table = tables_of.get(pair) if pair else None
        if table is None:
            table = table_of(s, w, declared)
            if pair:
                tables_of[pair] = table
        memberships.setdefault(str(trial_id), set()).add(table)
    for table, ids in (table_trials or {}).items():
        for trial_id in ids:
            if str(trial_id) in memberships:
                memberships[str(trial_id)].add(table_name(table))
    # A trial run twice (a forced re-run) has two done rows: the latest counts (the store's one rule).
    rows = latest_done_rows(rows)
    blank = [""] * len(rows)
    rows_study = _values(rows["study"]) if "study" in rows.columns else blank
    trials = pd.DataFrame({"trial_id": [str(v) for v in _values(rows["trial_id"])]})
    trials["table"] = [sorted(memberships[t]) for t in trials["trial_id"]]
    for column in ("task", "student", "teacher", "init", "strategy", "knowledge", "beta"):
        trials[column] = _values(rows[column]) if column in rows.columns else blank
    if "beta_auto" in rows.columns:
        # The store keeps beta as a float column plus a flag for "auto" (calibrated weights).
        auto = [not is_missing(flag) and bool(flag) for flag in rows["beta_auto"]]
        trials["beta"] = ["auto" if a else b for a, b in zip(auto, trials["beta"], strict=True)]
    for column in ("temperature", "alpha", "soft_weight", "seed"):
        trials[column] = list(rows[column]) if column in rows.columns else [math.nan] * len(rows)
    trials["role"] = "student"
    # A sub-study of a table's sweep (Table 2's fixed_params / fixed_flops) is the block it is printed in.
    trials["block"] = [
        "" if table_name(s) in TABLE_CHOICES or _text(s) in ("", "main") else _text(s) for s in rows_study
    ]
    trials["params_m"] = [v / 1e6 for v in _column_or_nan(rows, "student_params")]
    trials["flops_g"] = [v / 1e9 for v in _column_or_nan(rows, "student_flops")]
    extra_column = next((c for c in ("extra_json", "extra") if c in rows.columns), None)
    extras = [_extra(v) for v in _values(rows[extra_column])] if extra_column else [{} for _ in blank]
    if "latency_ms" in rows.columns:
        trials["latency_ms"] = [_float(v) for v in rows["latency_ms"]]
    else:
        # Measured latency only (the core records it in ``extra``); never estimated from FLOPs.
        trials["latency_ms"] = [_float(extra.get("latency_ms")) for extra in extras]
    trials["row_id"] = _each(rows["row_id"], _text) if "row_id" in rows.columns else blank
    trials["setting"] = (
        [trial_setting(v) for v in _values(rows["trial_json"])] if "trial_json" in rows.columns else blank
    )
    trials["degenerate"] = [reasons_tuple(reasons) for reasons in _json_column(rows, "degenerate_json", [])]
    trials["agreement_by_dev_set"] = _json_column(rows, "teacher_agreement_json", {})
    trials["teacher_scores"] = [extra.get("teacher_scores") or {} for extra in extras]
    trials["teacher_params_m"] = [_float(extra.get("teacher_params")) / 1e6 for extra in extras]
    return trials.explode("table", ignore_index=True)


def trial_setting(trial_json: Any) -> str:
    """A trial's configuration apart from its seeds (`SEED_FIELDS`, `SEED_OPTIONS`), as canonical JSON: two rows
    with the same setting differ at most in their seeds. ``""`` when the row has no trial JSON."""
    if is_missing(trial_json) or not str(trial_json).strip():
        return ""
    config = json.loads(str(trial_json))
    for name in (*SEED_FIELDS, *_NOT_SETTING):
        config.pop(name, None)
    options = config.get("options")
    if isinstance(options, dict):
        config["options"] = {k: v for k, v in options.items() if k not in SEED_OPTIONS}
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _json_column(rows: pd.DataFrame, column: str, empty: Any) -> list[Any]:
    """A JSON text column decoded per row (``empty`` where the column or the value is missing)."""
    if column not in rows.columns:
        return [empty for _ in range(len(rows))]
    return [
        empty if is_missing(v) or not str(v).strip() else json.loads(str(v)) for v in _values(rows[column])
    ]


def _column_or_nan(rows: pd.DataFrame, column: str) -> list[float]:
    if column not in rows.columns:
        return [math.nan] * len(rows)
    return [_float(v) for v in rows[column]]


def _teacher_rows(trials: pd.DataFrame, seed_column: bool) -> pd.DataFrame:
    """The teachers' own dev scores, where the core recorded them (``extra["teacher_scores"]``, nested
    ``{dev_set: {metric: value}}``), as ``role = teacher`` rows: one per (table, task, teacher, dev set, metric)."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for trial in trials.itertuples(index=False):
        scores = trial.teacher_scores
        if not isinstance(scores, dict):
            continue
        for dev_set, metrics in scores.items():
            for metric, value in (metrics or {}).items():
                key = (trial.table, trial.task, trial.teacher, dev_set, metric)
                rows.setdefault(
                    key,
                    {
                        "table": trial.table,
                        "task": trial.task,
                        "teacher": trial.teacher,
                        "role": "teacher",
                        "dev_set": dev_set,
                        "metric": metric,
                        "value": _float(value),
                        "params_m": trial.teacher_params_m,
                        **({"seed": math.nan} if seed_column else {}),
                    },
                )
    return pd.DataFrame(list(rows.values()))


def store_to_tidy(
    store_df: pd.DataFrame,
    scores_df: pd.DataFrame,
    kind: str = "best",
    *,
    per_seed: bool = False,
    table_trials: Mapping[str, Iterable[str]] | None = None,
    declared: Mapping[str, str] | None = None,
    tables: Iterable[str] | None = None,
) -> pd.DataFrame:
    """The store's done trials as tidy numbers.

    Args:
        store_df: `kdgrid.store.read_store` output: one row per trial, every Trial field a column, plus
            ``trial_id``, ``status``, ``sweep``, ``study``, ``beta_auto``, ``student_params``, ``student_flops``,
            ``extra_json`` (the latest done row of each trial counts).
        scores_df: `kdgrid.store.scores_long` output: ``trial_id, dev_set, metric, value, kind``.
        kind: ``best`` (the best epoch's scores, what the paper reports) or ``last``.
        per_seed: keep one row per seed (with a ``seed`` column) instead of aggregating.
        table_trials: table name -> trial ids of its sweep(s) (`membership_tables` of the store's recorded
            memberships): a trial listed there counts in that table even when the row in the store was written
            by another study's sweep. Without it a trial counts only in the table of its rows' study/sweep.
        declared: sweep name -> the table its file declares (`declared_tables` of the memberships): a row of
            such a sweep counts in that table; rows of other sweeps by their names (`legacy_table_of`).
        tables: keep only the numbers of these tables (e.g. `TABLE_CHOICES`, what the tables and the report lay
            out), before seeds are aggregated: another sweep's trials that differ in more than their seed (any
            sweep's own table keeps them apart, `kdgrid.analysis.sweep_tables`) are then never averaged together.

    Returns:
        One row per (configuration, dev set, metric) with ``value`` the mean over seeds, ``std`` the sample
        standard deviation over seeds (NaN for a single seed) and ``n_seeds``; or, with ``per_seed``, one row
        per seed. Every metric the store holds is kept; `kdgrid.paper.reported_metric` says which one the
        tables print.
        Teachers' own scores, where recorded, come as ``role = teacher`` rows.
    """
    if kind not in SCORE_KINDS:
        raise ConfigError(f"unknown score kind {kind!r}; allowed: {', '.join(SCORE_KINDS)}")
    columns = [*CONFIG_COLUMNS, "seed", *FACT_COLUMNS, "value"]
    if store_df.empty or scores_df.empty:
        return empty_tidy(per_seed)
    trials = _trial_rows(store_df, table_trials, declared)
    scores = scores_df
    if "kind" in scores.columns:
        scores = scores[scores["kind"] == kind]
    scores = scores[["trial_id", "dev_set", "metric", "value"]].assign(
        trial_id=lambda s: s["trial_id"].astype(str)
    )
    merged = trials.drop(columns=["teacher_scores", "teacher_params_m"]).merge(
        scores, on="trial_id", how="inner"
    )
    dev_sets = set(scores["dev_set"].astype(str))
    merged["degenerate"] = [
        reasons_of_dev_set(reasons, dev_set, dev_sets)
        for reasons, dev_set in zip(merged["degenerate"], merged["dev_set"], strict=True)
    ]
    merged["teacher_agreement"] = [
        _float((agreement or {}).get(dev_set))
        for agreement, dev_set in zip(merged["agreement_by_dev_set"], merged["dev_set"], strict=True)
    ]
    columns += list(ROW_FACT_COLUMNS)
    teachers = _teacher_rows(trials, seed_column=True)
    frames = [normalise(merged)[columns]]
    if not teachers.empty:
        frames.append(normalise(_with_row_facts(teachers))[columns])
    tidy = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if tables is not None:
        tidy = tidy[tidy["table"].isin(set(tables))]
    if per_seed:
        return tidy.reset_index(drop=True)
    return _aggregate_normalised(tidy)  # normalised above: `aggregate_seeds` would normalise it again


def _with_row_facts(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the `ROW_FACT_COLUMNS` it lacks (no row, no setting, nothing degenerate, no agreement)."""
    out = frame.copy()
    defaults: dict[str, Any] = {
        "row_id": "",
        "trial_id": "",
        "setting": "",
        "degenerate": (),
        "teacher_agreement": math.nan,
    }
    for column, default in defaults.items():
        if column not in out.columns:
            out[column] = [default] * len(out)
    out["degenerate"] = [reasons_tuple(v) for v in out["degenerate"]]
    return out


def reasons_of_dev_set(reasons: Iterable[str], dev_set: str, dev_sets: Iterable[str]) -> tuple[str, ...]:
    """The degenerate reasons of a row that concern ``dev_set``: the core prefixes each with its dev set
    (``"validation_matched: constant predictions ..."``); a reason prefixed with another of ``dev_sets`` belongs to
    that one's cell, a reason without such a prefix to every cell of the row."""
    others = {str(name) for name in dev_sets} - {dev_set}
    return tuple(reason for reason in reasons if reason.split(":", 1)[0].strip() not in others)


def reasons_tuple(value: Any) -> tuple[str, ...]:
    """Degenerate reasons as a tuple of strings, from a list, a JSON list or a single reason (``()`` for none)."""
    if is_missing(value):
        return ()
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        return tuple(str(v) for v in json.loads(text)) if text.startswith("[") else (text,)
    return tuple(str(v) for v in value)


# Columns `aggregate_seeds` adds: the cell's store rows and seeds (in seed order), the union of their degenerate
# reasons, the mean teacher agreement over seeds, and the cell's trials (in seed order, each once).
AGGREGATE_COLUMNS: tuple[str, ...] = (
    "value",
    "std",
    "n_seeds",
    "row_ids",
    "seeds",
    "degenerate",
    "teacher_agreement",
    "trial_ids",
)


def empty_tidy(per_seed: bool = False) -> pd.DataFrame:
    """A tidy frame with no rows and every column."""
    columns = [*CONFIG_COLUMNS, *FACT_COLUMNS, "value"]
    columns += ["seed", *ROW_FACT_COLUMNS] if per_seed else list(AGGREGATE_COLUMNS[1:])
    numeric = {"value", "std", "n_seeds", "seed", "teacher_agreement", *FACT_COLUMNS, "temperature", "alpha"}
    return pd.DataFrame(
        {c: pd.Series(dtype=float if c in numeric | {"soft_weight"} else object) for c in columns}
    )


def _seed_key(seed: Any) -> tuple[int, float]:
    value = _float(seed)
    return (1, 0.0) if math.isnan(value) else (0, value)


def _check_one_setting(key: tuple[Any, ...], settings: list[str]) -> None:
    """Refuse a cell whose rows are not seeds of one configuration, naming the fields they differ in."""
    distinct = sorted(set(settings))
    if len(distinct) < 2:
        return
    configs = [json.loads(s) if s else {} for s in distinct]
    flat = [{**{k: v for k, v in c.items() if k != "options"}, **(c.get("options") or {})} for c in configs]
    fields = sorted({name for c in flat for name in c if len({json.dumps(d.get(name)) for d in flat}) > 1})
    values = {name: sorted({json.dumps(d.get(name)) for d in flat}) for name in fields}
    differing = "; ".join(f"{name} ({', '.join(values[name])})" for name in fields)
    place = ", ".join(
        f"{c}={v}" for c, v in zip(CONFIG_COLUMNS, key, strict=True) if _text(v) not in ("", "nan")
    )
    first = fields[0] if fields else "FIELD"
    raise ConfigError(
        f"the trials of one table cell ({place}) differ in {differing or 'their configuration'}, not only in "
        "their seed: a cell aggregates seeds only, never other settings. Keep one value, e.g. "
        f"`kdgrid tables ... --where {first}={json.loads(values[first][0]) if fields else 'VALUE'}`"
    )


def aggregate_seeds(tidy: pd.DataFrame) -> pd.DataFrame:
    """Mean and sample standard deviation over seeds of each configuration (``std`` NaN when one seed).

    Rows that agree on every config column are seeds of one configuration - provided they agree on their
    ``setting`` too (`trial_setting`: the whole trial but its seeds); rows that differ in anything else (lr,
    epochs, an option) are never averaged: `ConfigError` naming the fields and how to keep one value. Facts
    (params, FLOPs, latency) are averaged too (params and FLOPs are the same for every seed; latency is a
    measurement). Also kept per configuration: ``row_ids`` and ``seeds`` (tuples in seed order), ``degenerate``
    (the sorted union of the rows' reasons), ``teacher_agreement`` (mean over seeds) and ``trial_ids`` (in seed
    order, each once)."""
    if tidy.empty:
        return empty_tidy()
    return _aggregate_normalised(_with_row_facts(normalise(tidy)))


def _aggregate_normalised(tidy: pd.DataFrame) -> pd.DataFrame:
    """`aggregate_seeds` of a frame already normalised and carrying the `ROW_FACT_COLUMNS`."""
    if tidy.empty:
        return empty_tidy()
    if "seed" not in tidy.columns:
        tidy["seed"] = math.nan
    keys = list(CONFIG_COLUMNS)
    # NaN keys (temperature of a paper row) must not drop the row.
    grouped = tidy.groupby(keys, dropna=False, sort=False)
    out = grouped["value"].agg(value="mean", std="std", n_seeds="count").reset_index()
    for fact in FACT_COLUMNS:
        out[fact] = grouped[fact].mean().to_numpy()
    out.loc[out["n_seeds"] < 2, "std"] = math.nan
    settings = grouped["setting"].nunique(dropna=False).to_numpy()
    for position in np.flatnonzero(settings > 1):  # rare: only a table that mixes settings pays for this
        key = tuple(out.loc[position, keys])
        members = tidy[grouped.ngroup() == position]
        _check_one_setting(key, [_text(s) for s in members["setting"]])
    # Per configuration, its rows in seed order (NaN seeds last): one sort, then one pass per column.
    ordered = tidy.assign(
        _group=grouped.ngroup().to_numpy(),
        _seed=[_seed_key(v) for v in tidy["seed"]],
    ).sort_values(["_group", "_seed"], kind="stable")
    # Every group has rows, so the sorted frame splits into len(out) runs of equal ``_group``, in group order.
    starts = [0, *(np.flatnonzero(np.diff(ordered["_group"].to_numpy())) + 1), len(ordered)]
    spans = list(itertools.pairwise(starts))
    ids = [_text(v) for v in ordered["row_id"]]
    seed_values = [_float(v) for v in ordered["seed"]]
    reasons = list(ordered["degenerate"])
    out["row_ids"] = [tuple(ids[a:b]) for a, b in spans]
    out["seeds"] = [tuple(seed_values[a:b]) for a, b in spans]
    out["degenerate"] = [tuple(sorted({r for row in reasons[a:b] for r in row})) for a, b in spans]
    out["teacher_agreement"] = grouped["teacher_agreement"].mean().to_numpy()
    trial_ids = [_text(v) for v in ordered["trial_id"]]
    out["trial_ids"] = [tuple(dict.fromkeys(t for t in trial_ids[a:b] if t)) for a, b in spans]
    return out[[*CONFIG_COLUMNS, *FACT_COLUMNS, *AGGREGATE_COLUMNS]]
