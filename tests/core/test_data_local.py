"""Local tasks: every file format, label mapping, and the spec's errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from kdgrid.core.data import get_task, load_splits, task_from_spec
from kdgrid.errors import ConfigError

TRAIN = pd.DataFrame({"q": ["a b", "c d", "e f"], "p": ["x", "y", "z"], "y": [0, 1, 1]})
DEV = pd.DataFrame({"q": ["g h", "i j"], "p": ["u", "v"], "y": [1, 0]})


def _write(frame: pd.DataFrame, path: Path) -> Path:
    kind = path.suffix
    if kind == ".csv":
        frame.to_csv(path, index=False)
    elif kind == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif kind == ".json":
        frame.to_json(path, orient="records")
    elif kind == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".json", ".jsonl", ".parquet"])
def test_each_format_loads_a_pair_task_from_a_yaml_spec(tmp_path: Path, suffix: str) -> None:
    _write(TRAIN, tmp_path / f"train{suffix}")
    _write(DEV, tmp_path / f"dev{suffix}")
    spec = {
        "name": "pairs",
        "files": {"train": f"train{suffix}", "dev": f"dev{suffix}"},  # relative to the spec file
        "text_columns": ["q", "p"],
        "label_column": "y",
        "type": "classification",
        "num_labels": 2,
    }
    spec_file = tmp_path / "pairs.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    task = get_task(str(spec_file))
    assert task.name == "pairs" and task.dev_sets == ("dev",) and task.metrics == ("accuracy", "f1")
    splits = load_splits(task)
    assert list(splits) == ["train", "dev"]
    assert splits["train"]["q"] == ["a b", "c d", "e f"] and splits["train"]["p"] == ["x", "y", "z"]
    assert splits["train"]["y"] == [0, 1, 1] and splits["dev"]["y"] == [1, 0]


def test_json_spec_file_regression_and_string_label_mapping(tmp_path: Path) -> None:
    pd.DataFrame({"text": ["good", "bad", "fine"], "score": [4.5, 0.5, 3]}).to_csv(
        tmp_path / "tr.csv", index=False
    )
    pd.DataFrame({"text": ["ok"], "score": [2.0]}).to_csv(tmp_path / "va.csv", index=False)
    (tmp_path / "reg.json").write_text(
        json.dumps(
            {
                "name": "scores",
                "files": {"train": "tr.csv", "validation": "va.csv"},
                "text_columns": "text",
                "label_column": "score",
                "type": "regression",
            }
        )
    )
    task = get_task(tmp_path / "reg.json")
    assert task.is_regression and task.metrics == ("pearson", "spearman") and task.primary_metric == "pearson"
    assert load_splits(task)["train"]["score"] == pytest.approx([4.5, 0.5, 3.0])

    pd.DataFrame({"text": ["a", "b", "c"], "sentiment": ["pos", "neg", "neutral"]}).to_csv(
        tmp_path / "s.csv", index=False
    )
    named = task_from_spec(
        {
            "name": "named",
            "files": {"train": "s.csv", "validation": "s.csv"},
            "text_columns": ["text"],
            "label_column": "sentiment",
            "type": "classification",
            "labels": ["neg", "neutral", "pos"],
        },
        base_dir=tmp_path,
    )
    assert named.num_labels == 3 and named.metrics == ("accuracy",)
    assert load_splits(named)["train"]["sentiment"] == [2, 0, 1]


def _spec(tmp_path: Path, **changes) -> dict:
    _write(TRAIN, tmp_path / "train.csv")
    _write(DEV, tmp_path / "dev.csv")
    spec = {
        "name": "t",
        "files": {"train": str(tmp_path / "train.csv"), "validation": str(tmp_path / "dev.csv")},
        "text_columns": ["q"],
        "label_column": "y",
        "type": "classification",
        "num_labels": 2,
    }
    spec.update(changes)
    return {k: v for k, v in spec.items() if v is not None}


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"colour": "red"}, r"unknown key\(s\) \['colour'\]; allowed: name, files"),
        ({"name": None}, r"missing key\(s\) \['name'\]"),
        ({"type": "ranking"}, "`type` must be one of classification, regression"),
        ({"num_labels": 1}, "num_labels` >= 2"),
        ({"text_columns": ["a", "b", "c"]}, "`text_columns` must be one column name or a list of two"),
        ({"files": {"validation": "dev.csv"}}, "needs a 'train' split"),
        (
            {"files": {"train": "/nonexistent/train.csv", "validation": "/nonexistent/dev.csv"}},
            "no such file",
        ),
        (
            {"metrics": ["pearson"]},
            r"not allowed for classification; allowed: accuracy, f1, matthews_corrcoef",
        ),
        ({"primary_metric": "f1", "metrics": ["accuracy"]}, "primary_metric"),
        ({"labels": ["a", "b", "c"]}, "disagrees"),
        ({"format": "xlsx"}, "format 'xlsx' is not one of"),
        ({"dev_sets": ["test"]}, "dev_sets"),
    ],
)
def test_spec_errors_name_the_key_and_allowed_values(tmp_path: Path, changes: dict, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        task_from_spec(_spec(tmp_path, **changes), base_dir=tmp_path)


def test_data_errors_name_the_file_and_column(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    with pytest.raises(ConfigError, match=r"missing column\(s\) \['text'\]; the file has \['q', 'p', 'y'\]"):
        load_splits(task_from_spec({**spec, "text_columns": ["text"]}, base_dir=tmp_path))
    _write(pd.DataFrame({"q": ["a", "b"], "y": [-1, 1]}), tmp_path / "train.csv")
    with pytest.raises(ConfigError, match=r"train.csv: label '-1' is not a class id in 0..1; .*`labels:`"):
        load_splits(task_from_spec(spec, base_dir=tmp_path))
    _write(pd.DataFrame({"q": ["a", "b"], "y": ["yes", "maybe"]}), tmp_path / "train.csv")
    with pytest.raises(ConfigError, match=r"label value\(s\) \['maybe'\] are not in `labels`"):
        load_splits(task_from_spec({**spec, "labels": ["no", "yes"]}, base_dir=tmp_path))


def test_bad_spec_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        get_task(str(tmp_path / "missing.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        get_task(str(broken))
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        get_task(str(listed))


def test_numeric_label_values_map_in_the_order_listed(tmp_path: Path) -> None:
    # Pang & Lee's original file uses 1 / -1; JSON may carry 1.0
    _write(pd.DataFrame({"q": ["a", "b", "c"], "y": [-1, 1, -1]}), tmp_path / "train.csv")
    _write(pd.DataFrame({"q": ["d", "e"], "y": [1.0, -1.0]}), tmp_path / "dev.json")
    task = task_from_spec(
        {
            "name": "signed",
            "files": {"train": "train.csv", "validation": "dev.json"},
            "text_columns": "q",
            "label_column": "y",
            "type": "classification",
            "labels": [-1, 1],
        },
        base_dir=tmp_path,
    )
    splits = load_splits(task)
    assert splits["train"]["y"] == [0, 1, 0] and splits["validation"]["y"] == [1, 0]
