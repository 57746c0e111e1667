"""The task registry: the paper's GLUE tasks, the offline polarity and uncertainty tasks, synthetic names and clear
errors."""

from __future__ import annotations

import pytest

from kdgrid.core.data import PAPER_TASKS, TASKS, TaskSpec, get_task, load_splits, register_task
from kdgrid.errors import AssetMissingError, ConfigError


def test_the_eight_glue_tasks_of_the_paper_with_their_shapes_and_metrics() -> None:
    assert set(PAPER_TASKS) == {"cola", "mrpc", "stsb", "rte", "qqp", "mnli", "sst2", "qnli"}
    expected = {
        "cola": (("sentence",), 2, ("accuracy", "matthews_corrcoef"), "accuracy"),
        "mrpc": (("sentence1", "sentence2"), 2, ("accuracy", "f1"), "accuracy"),
        "stsb": (("sentence1", "sentence2"), 1, ("pearson", "spearman"), "pearson"),
        "rte": (("sentence1", "sentence2"), 2, ("accuracy",), "accuracy"),
        "qqp": (("question1", "question2"), 2, ("accuracy", "f1"), "accuracy"),
        "mnli": (("premise", "hypothesis"), 3, ("accuracy",), "accuracy"),
        "sst2": (("sentence",), 2, ("accuracy",), "accuracy"),
        "qnli": (("question", "sentence"), 2, ("accuracy",), "accuracy"),
    }
    for name, (text_keys, num_labels, metrics, primary) in expected.items():
        task = get_task(name)
        assert (task.text_keys, task.num_labels, task.metrics, task.primary_metric) == (
            text_keys,
            num_labels,
            metrics,
            primary,
        ), name
        assert task.source == "glue" and task.label_key == "label"
    assert get_task("mnli").dev_sets == ("validation_matched", "validation_mismatched")
    assert all(get_task(n).dev_sets == ("validation",) for n in PAPER_TASKS if n != "mnli")
    assert get_task("stsb").is_regression and not get_task("rte").is_regression


def test_names_are_case_insensitive_and_unknown_names_list_the_known_ones() -> None:
    assert get_task("SST2") is TASKS["sst2"]
    with pytest.raises(ConfigError) as error:
        get_task("sst-3")
    message = str(error.value)
    assert "'sst-3'" in message and "polarity" in message and "mnli" in message and "synthetic-" in message


def test_synthetic_names_with_sizes_and_seed() -> None:
    task = get_task("synthetic-pair-3class-n100-d20-s7")
    assert (task.param("train_size"), task.param("dev_size"), task.param("seed")) == (100, 20, 7)
    assert task.num_labels == 3 and task.text_keys == ("sentence1", "sentence2")
    for name in (
        "synthetic-single-binary",
        "synthetic-pair-binary",
        "synthetic-pair-3class",
        "synthetic-pair-regression",
    ):
        assert name in TASKS
    with pytest.raises(ConfigError):
        get_task("synthetic-triple-binary")


def test_polarity_is_a_local_task_with_3000_train_and_1000_dev_rows() -> None:
    task = get_task("polarity")
    assert task.source == "local" and task.text_keys == ("text",) and task.num_labels == 2
    splits = load_splits("polarity")
    assert {name: len(split) for name, split in splits.items()} == {"train": 3000, "validation": 1000}
    for split in splits.values():
        assert set(split["label"]) == {0, 1}
        assert all(isinstance(text, str) and text for text in split["text"][:50])
    assert sum(splits["validation"]["label"]) == 500  # the recorded split is stratified


def test_missing_polarity_asset_names_the_fetch_command(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    with pytest.raises(AssetMissingError, match="kdgrid assets fetch"):
        load_splits("polarity")


def test_uncertainty_is_a_local_task_on_the_deduplicated_conll2010_split() -> None:
    task = get_task("Uncertainty")
    assert (task.name, task.source, task.text_keys) == ("uncertainty", "local", ("text",))
    assert (task.num_labels, task.metrics, task.primary_metric) == (2, ("accuracy",), "accuracy")
    assert task.dev_sets == ("validation",)
    assert task.param("asset") == "uncertainty" and not task.is_regression
    assert "CoNLL-2010" in task.description and "1 certain, 0 uncertain" in task.description
    splits = load_splits("uncertainty")
    assert {name: len(split) for name, split in splits.items()} == {"train": 1957, "validation": 1000}
    assert sum(splits["validation"]["label"]) == 500 and sum(splits["train"]["label"]) == 962
    assert not set(splits["train"]["text"]) & set(splits["validation"]["text"])
    hedged = "Earths and clays may have provided prehistoric peoples with some of their first medicines."
    rows = {t: y for split in splits.values() for t, y in zip(split["text"], split["label"], strict=True)}
    assert rows[hedged] == 0 and rows["Prelingual deafness"] == 1


def test_missing_uncertainty_asset_names_the_fetch_command(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    with pytest.raises(AssetMissingError, match=r"uncertainty corpus .*kdgrid assets fetch"):
        load_splits("uncertainty")


def test_spec_validation_rejects_inconsistent_specs() -> None:
    base = dict(
        name="x",
        text_keys=("a",),
        label_key="label",
        num_labels=2,
        metrics=("accuracy",),
        primary_metric="accuracy",
        dev_sets=("validation",),
        source="local",
    )
    TaskSpec(**base)
    for change, pattern in [
        ({"text_keys": ("a", "b", "c")}, "1 or 2"),
        ({"metrics": ("bleu",)}, "unknown metric"),
        ({"metrics": ("pearson",), "primary_metric": "pearson"}, "do not apply"),
        ({"primary_metric": "f1"}, "primary_metric"),
        ({"dev_sets": ("train",)}, "dev_sets"),
        ({"source": "ftp"}, "source"),
        ({"num_labels": 0}, "num_labels"),
    ]:
        with pytest.raises(ConfigError, match=pattern):
            TaskSpec(**{**base, **change})


def test_register_task_refuses_to_shadow_a_different_task() -> None:
    spec = TaskSpec(
        name="my-test-task",
        text_keys=("a",),
        label_key="label",
        num_labels=2,
        metrics=("accuracy",),
        primary_metric="accuracy",
        dev_sets=("validation",),
        source="local",
    )
    try:
        assert register_task(spec) is spec and get_task("my-test-task") is spec
        with pytest.raises(ConfigError, match="already registered"):
            register_task(TaskSpec(**{**spec.__dict__, "num_labels": 3}))
    finally:
        TASKS.pop("my-test-task", None)


def test_polarity_majority_baseline_is_one_half() -> None:
    from kdgrid.metrics import majority_baseline

    splits = load_splits("polarity")
    assert majority_baseline(
        get_task("polarity"), splits["train"]["label"], splits["validation"]["label"]
    ) == {"accuracy": 0.5}


def test_importing_the_task_registry_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kdgrid.core.data as d; d.get_task('mnli'); "
        "heavy = [m for m in ('torch', 'datasets', 'transformers', 'ray', 'submitit', 'sklearn') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
