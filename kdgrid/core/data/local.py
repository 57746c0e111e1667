"""Local tasks: CSV / TSV / JSON / JSON-lines / Parquet files described by a small spec.

A spec is a YAML or JSON file, or a dict::

    name: reviews
    files: {train: data/train.csv, validation: data/dev.csv}   # relative to the spec file
    text_columns: [text]              # one column, or two for sentence pairs
    label_column: label               # default "label"
    type: classification              # or regression
    num_labels: 2                     # classification; implied by `labels` when that is given
    labels: [negative, positive]      # optional: label values in class-id order
    metrics: [accuracy, f1]           # optional; default accuracy (+ f1 when binary) / pearson + spearman
    primary_metric: accuracy          # optional; default accuracy / pearson
    format: csv                       # optional; default from each file's extension

Every split other than ``train`` is a dev set, in the order written (``dev_sets`` may reorder them). The offline
tasks ``polarity`` and ``uncertainty`` are such specs whose files come from the offline corpus of that name
(`kdgrid.assets.corpus_files`, fetched by ``kdgrid assets fetch``).
"""

from __future__ import annotations

import csv
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kdgrid.assets import CORPORA, UNCERTAINTY, corpus_files
from kdgrid.core.data.spec import TRAIN_SPLIT, TaskSpec
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.metrics import CLASSIFICATION_METRICS, REGRESSION_METRICS

SPEC_KEYS: tuple[str, ...] = (
    "name",
    "files",
    "text_columns",
    "label_column",
    "type",
    "num_labels",
    "labels",
    "metrics",
    "primary_metric",
    "dev_sets",
    "format",
    "description",
)
REQUIRED_KEYS: tuple[str, ...] = ("name", "files", "text_columns", "type")
TASK_TYPES: tuple[str, ...] = ("classification", "regression")
FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
SPEC_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".json")
# Files that a spec names through an offline asset instead of paths (resolved only when the data is loaded).
ASSETS: tuple[str, ...] = tuple(CORPORA)

POLARITY_SPEC: dict[str, Any] = {
    "name": "polarity",
    "text_columns": ["text"],
    "label_column": "label",
    "type": "classification",
    "num_labels": 2,
    "metrics": ["accuracy"],
    "description": "Pang & Lee sentence polarity (offline SST-2 stand-in; 1 positive, 0 negative)",
}
UNCERTAINTY_SPEC: dict[str, Any] = {
    **POLARITY_SPEC,
    "name": "uncertainty",
    "description": UNCERTAINTY.description,
}


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _file_format(path: Path, declared: str | None, where: str) -> str:
    if declared is not None:
        if declared not in set(FORMATS.values()):
            raise _fail(where, f"format {declared!r} is not one of {sorted(set(FORMATS.values()))}")
        return declared
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise _fail(
            where,
            f"cannot tell the format of {path.name} from its extension; set `format:` to one of "
            f"{sorted(set(FORMATS.values()))}",
        )
    return FORMATS[suffix]


CLASS_ID = re.compile(r"-?[0-9]+")  # ASCII digits only: str.isdigit also accepts "²", which int() refuses
MAX_REGRESSION_LABEL = 1e6  # a score beyond it (1e308, inf) only makes the loss overflow: refused as input


def _label_key(value: Any) -> str:
    """Labels compare as text so ``1``, ``"1"`` and ``1.0`` read from different formats agree."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def task_from_spec(
    spec: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    where: str = "local task spec",
    asset: str | None = None,
) -> TaskSpec:
    """Validate a spec mapping and build its `TaskSpec` (``source="local"``).

    Args:
        spec: the mapping described in the module docstring.
        base_dir: relative file paths are resolved against it (default: the current directory).
        where: how errors name the spec (its file path).
        asset: instead of ``files``, take the files from this offline corpus (one of `ASSETS`).
    Raises:
        ConfigError: naming the key and the allowed values, or the missing file.
    """
    if not isinstance(spec, Mapping):
        raise _fail(where, f"a task spec must be a mapping, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; allowed: {', '.join(SPEC_KEYS)}")
    required = [k for k in REQUIRED_KEYS if k not in spec and not (k == "files" and asset)]
    if required:
        raise _fail(where, f"missing key(s) {required}")
    name = spec["name"]
    if not isinstance(name, str) or not name.strip():
        raise _fail(where, f"`name` must be a non-empty string, got {name!r}")
    where = f"{where} (task {name!r})"

    text_columns = spec["text_columns"]
    text_columns = [text_columns] if isinstance(text_columns, str) else text_columns
    if (
        not isinstance(text_columns, list | tuple)
        or len(text_columns) not in (1, 2)
        or not all(isinstance(c, str) and c for c in text_columns)
    ):
        raise _fail(
            where, f"`text_columns` must be one column name or a list of two, got {spec['text_columns']!r}"
        )
    label_column = spec.get("label_column", "label")
    if not isinstance(label_column, str) or not label_column:
        raise _fail(where, f"`label_column` must be a column name, got {label_column!r}")

    task_type = spec["type"]
    if task_type not in TASK_TYPES:
        raise _fail(where, f"`type` must be one of {', '.join(TASK_TYPES)}, got {task_type!r}")
    labels = spec.get("labels")
    num_labels = spec.get("num_labels")
    if task_type == "regression":
        if labels is not None:
            raise _fail(where, "`labels` applies to classification only")
        if num_labels not in (None, 1):
            raise _fail(where, f"a regression task has num_labels 1, got {num_labels!r}")
        num_labels = 1
    else:
        if labels is not None:
            if (
                not isinstance(labels, list | tuple)
                or len(labels) < 2
                or len({_label_key(v) for v in labels}) != len(labels)
            ):
                raise _fail(where, f"`labels` must list at least two distinct label values, got {labels!r}")
            if num_labels is not None and num_labels != len(labels):
                raise _fail(where, f"num_labels {num_labels} disagrees with the {len(labels)} `labels` given")
            num_labels = len(labels)
        if not isinstance(num_labels, int) or isinstance(num_labels, bool) or num_labels < 2:
            raise _fail(
                where, f"a classification task needs `num_labels` >= 2 (or `labels`), got {num_labels!r}"
            )

    default_metrics = (
        REGRESSION_METRICS if num_labels == 1 else ("accuracy", "f1") if num_labels == 2 else ("accuracy",)
    )
    metrics = spec.get("metrics", default_metrics)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    allowed = REGRESSION_METRICS if num_labels == 1 else CLASSIFICATION_METRICS
    bad = [m for m in metrics if m not in allowed]
    if bad or not metrics:
        raise _fail(
            where, f"metric(s) {bad or metrics} not allowed for {task_type}; allowed: {', '.join(allowed)}"
        )
    primary = spec.get("primary_metric", "pearson" if num_labels == 1 else "accuracy")
    if primary not in metrics:
        raise _fail(where, f"`primary_metric` {primary!r} is not one of the metrics {metrics}")

    params: dict[str, Any] = {}
    if labels is not None:
        params["labels"] = [_label_key(v) for v in labels]
    file_format = spec.get("format")
    if asset is not None:
        if asset not in ASSETS:
            raise _fail(where, f"unknown asset {asset!r}; known: {', '.join(ASSETS)}")
        params["asset"] = asset
        splits = [TRAIN_SPLIT, "validation"]
    else:
        files = spec["files"]
        if not isinstance(files, Mapping) or not files:
            raise _fail(where, f"`files` must map split names to paths, got {files!r}")
        if TRAIN_SPLIT not in files or len(files) < 2:
            raise _fail(
                where, f"`files` needs a 'train' split and at least one dev split, got {sorted(files)}"
            )
        resolved: dict[str, str] = {}
        for split, raw_path in files.items():
            if not isinstance(raw_path, str | Path):
                raise _fail(where, f"files.{split} must be a path, got {raw_path!r}")
            path = Path(raw_path).expanduser()
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            if not path.is_file():
                raise _fail(where, f"files.{split}: no such file {path}")
            _file_format(path, file_format, f"{where}, files.{split}")
            resolved[str(split)] = str(path.resolve())
        params["files"] = resolved
        splits = list(resolved)
    if file_format is not None:
        params["format"] = file_format

    dev_sets = spec.get("dev_sets", [s for s in splits if s != TRAIN_SPLIT])
    dev_sets = [dev_sets] if isinstance(dev_sets, str) else list(dev_sets)
    missing = [s for s in dev_sets if s not in splits or s == TRAIN_SPLIT]
    if missing or not dev_sets:
        raise _fail(
            where,
            f"`dev_sets` {missing or dev_sets} must name splits in `files` other than 'train' ({splits})",
        )
    return TaskSpec(
        name=name,
        text_keys=tuple(text_columns),
        label_key=label_column,
        num_labels=num_labels,
        metrics=tuple(metrics),
        primary_metric=primary,
        dev_sets=tuple(dev_sets),
        source="local",
        params=params,
        description=str(spec.get("description", "")),
    )


def is_spec_path(name: str) -> bool:
    """Whether a task name looks like a path to a spec file (rather than a registered name)."""
    return name.lower().endswith(SPEC_SUFFIXES) or "/" in name or Path(name).is_file()


def task_from_file(path: str | Path) -> TaskSpec:
    """Read a YAML / JSON spec file; relative data paths resolve against the spec's directory."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"task spec file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"task spec {path}: not a UTF-8 text file ({error.reason} at byte {error.start})"
        ) from None
    except OSError as error:
        raise ConfigError(f"task spec {path}: cannot be read ({error.strerror or error})") from None
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except Exception as error:  # json.JSONDecodeError, yaml.YAMLError: a parse error is the user's to fix
        reason = " ".join(str(error).split())
        raise ConfigError(f"task spec {path}: cannot parse: {reason}") from None
    return task_from_spec(raw, base_dir=path.parent.resolve(), where=f"task spec {path}")


POLARITY_TASK: TaskSpec = task_from_spec(POLARITY_SPEC, where="built-in polarity spec", asset="polarity")
UNCERTAINTY_TASK: TaskSpec = task_from_spec(
    UNCERTAINTY_SPEC, where="built-in uncertainty spec", asset="uncertainty"
)


def task_files(task: TaskSpec) -> dict[str, Path]:
    """Split name -> file of a local task (resolving an asset; raises AssetMissingError naming the fetch command)."""
    asset = task.param("asset")
    if asset is not None:
        found = corpus_files(asset)
        return {TRAIN_SPLIT: found.train, "validation": found.dev}
    return {split: Path(path) for split, path in task.param("files")}


def _read_frame(path: Path, file_format: str, where: str) -> Any:
    """The file as a DataFrame; a file that cannot be read or parsed as ``file_format`` is a `ConfigError`."""
    try:
        return _parse_frame(path, file_format)
    except (OSError, UnicodeDecodeError, ValueError) as error:  # pandas' parse errors are ValueErrors
        reason = " ".join(str(error).split())[:300]
        raise ConfigError(
            f"{where}: cannot be read as {file_format} ({type(error).__name__}: {reason})"
        ) from None


def _parse_frame(path: Path, file_format: str) -> Any:
    # pandas and datasets (about 1.5 s together) load only when a split is read: every task lookup imports this
    # module.
    import pandas as pd

    if file_format == "csv":
        return pd.read_csv(path, keep_default_na=False, dtype=str)
    if file_format == "tsv":
        # GLUE-style TSVs contain unbalanced quotes, so quoting is off.
        return pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False, dtype=str)
    if file_format == "parquet":
        return pd.read_parquet(path)
    with open(path, encoding="utf-8") as handle:
        first = handle.read(1024).lstrip()[:1]
    return pd.read_json(path, lines=file_format == "jsonl" or first != "[", dtype=False)


def _labels(task: TaskSpec, values: list[Any], where: str) -> list[float] | list[int]:
    if task.is_regression:
        try:
            scores = [float(v) for v in values]
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: regression labels must be numbers") from None
        if any(s != s for s in scores):
            raise ConfigError(f"{where}: regression labels contain NaN / empty values")
        too_large = [v for v, s in zip(values, scores, strict=True) if not abs(s) <= MAX_REGRESSION_LABEL]
        if too_large:
            raise ConfigError(
                f"{where}: regression label(s) {too_large[:5]} are invalid; allowed: finite numbers within "
                f"+-{MAX_REGRESSION_LABEL:g}"
            )
        return scores
    names = task.param("labels")
    if names is not None:
        index = {name: i for i, name in enumerate(names)}
        keys = [_label_key(v) for v in values]
        unknown = sorted({k for k in keys if k not in index})
        if unknown:
            raise ConfigError(f"{where}: label value(s) {unknown[:10]} are not in `labels` {list(names)}")
        return [index[k] for k in keys]
    ids: list[int] = []
    for value in values:
        key = _label_key(value)
        if not CLASS_ID.fullmatch(key) or not 0 <= int(key) < task.num_labels:
            raise ConfigError(
                f"{where}: label {value!r} is not a class id in 0..{task.num_labels - 1}; "
                "list the label values in class-id order under `labels:` to map them"
            )
        ids.append(int(key))
    return ids


def _read_split(task: TaskSpec, split: str, path: Path) -> dict[str, list[Any]]:
    """One split's columns: the text columns (str) and the label column (class ids or scores).

    Raises:
        ConfigError: the file is missing, unreadable, lacks a column, has no example (a header alone, blank
            lines), or has a label out of range; the message names the task and the file.
    """
    where = f"task {task.name!r}, split {split!r}, {path}"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file")
    frame = _read_frame(path, _file_format(path, task.param("format"), where), where)
    missing = [c for c in (*task.text_keys, task.label_key) if c not in frame.columns]
    if missing:
        raise ConfigError(f"{where}: missing column(s) {missing}; the file has {list(frame.columns)}")
    if len(frame) == 0:
        raise ConfigError(f"{where}: no examples (the file has a header only, or blank lines)")
    columns: dict[str, list[Any]] = {}
    for key in task.text_keys:
        columns[key] = ["" if v is None else str(v) for v in frame[key].tolist()]
    columns[task.label_key] = _labels(task, frame[task.label_key].tolist(), where)
    return columns


@functools.cache
def _file_problems(task: TaskSpec, stamps: tuple[tuple[str, int, int], ...]) -> tuple[str, ...]:
    """The problems of a task's files; ``stamps`` (path, size, mtime of each) keys the cache, so a file fixed
    since is read again."""
    problems = []
    files = task_files(task)
    for split in task.split_names:
        try:
            _read_split(task, split, files[split])
        except KdgridError as error:
            problems.append(str(error))
    return tuple(problems)


def local_data_problems(task: TaskSpec) -> list[str]:
    """Why a local task's data files cannot train and evaluate a trial (empty when they can): each split read
    as training reads it (readable, the columns present, at least one example, labels in range). Read once per
    task and process. Tasks of other sources, and the offline corpora (checked by their checksums when
    fetched), give no problems."""
    if task.source != "local" or task.param("files") is None:
        return []
    stamps = []
    for path in task_files(task).values():
        stat = path.stat() if path.is_file() else None
        stamps.append((str(path), stat.st_size if stat else -1, stat.st_mtime_ns if stat else -1))
    return list(_file_problems(task, tuple(stamps)))


def load_local_splits(task: TaskSpec) -> dict[str, Any]:
    """``{"train": Dataset, <dev set>: Dataset}`` with the text columns (str) and the label column
    (int class ids, or float scores for regression); `_read_split` says what is refused."""
    import datasets

    files = task_files(task)
    splits: dict[str, Any] = {}
    for split in task.split_names:
        columns = _read_split(task, split, files[split])
        features = datasets.Features(
            {
                **{key: datasets.Value("string") for key in task.text_keys},
                task.label_key: datasets.Value("float32" if task.is_regression else "int64"),
            }
        )
        splits[split] = datasets.Dataset.from_dict(columns, features=features)
    return splits
