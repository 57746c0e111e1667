"""The paper's eight GLUE tasks, loaded from the Hugging Face Hub (``nyu-mll/glue``) with `datasets`.

Metrics: the primary one is what the paper reports (`kdgrid.paper.reported_metric`: accuracy everywhere but
STS-B, Pearson; its section 4, "for the convenience of comparison"), plus GLUE's standard ones (MCC for CoLA,
F1 for MRPC and QQP, Pearson and Spearman for STS-B).
Without network and without a cached copy, loading fails with one `GlueUnavailableError` saying what to do.
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.data.spec import TaskSpec
from kdgrid.errors import KdgridError
from kdgrid.paper import reported_metric

GLUE_DATASET = "nyu-mll/glue"


class GlueUnavailableError(KdgridError):
    """A GLUE task could not be loaded (no network and no cached copy, or the Hub refused)."""


def _glue(
    name: str,
    text_keys: tuple[str, ...],
    num_labels: int,
    metrics: tuple[str, ...],
    description: str,
    dev_sets: tuple[str, ...] = ("validation",),
) -> TaskSpec:
    return TaskSpec(
        name=name,
        text_keys=text_keys,
        label_key="label",
        num_labels=num_labels,
        metrics=metrics,
        primary_metric=reported_metric(name),
        dev_sets=dev_sets,
        source="glue",
        params={"dataset": GLUE_DATASET, "config": name},
        description=description,
    )


GLUE_TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        _glue("cola", ("sentence",), 2, ("accuracy", "matthews_corrcoef"), "linguistic acceptability"),
        _glue("mrpc", ("sentence1", "sentence2"), 2, ("accuracy", "f1"), "paraphrase (news)"),
        _glue("stsb", ("sentence1", "sentence2"), 1, ("pearson", "spearman"), "semantic similarity, 0-5"),
        _glue("rte", ("sentence1", "sentence2"), 2, ("accuracy",), "textual entailment"),
        _glue("qqp", ("question1", "question2"), 2, ("accuracy", "f1"), "duplicate questions"),
        _glue(
            "mnli",
            ("premise", "hypothesis"),
            3,
            ("accuracy",),
            "natural language inference (0 entailment, 1 neutral, 2 contradiction)",
            dev_sets=("validation_matched", "validation_mismatched"),
        ),
        _glue("sst2", ("sentence",), 2, ("accuracy",), "sentiment (movie reviews)"),
        _glue("qnli", ("question", "sentence"), 2, ("accuracy",), "question-answer entailment"),
    )
}


def _load_dataset(*args: Any, **kwargs: Any) -> Any:
    """`datasets.load_dataset`, imported late (about 1 s, only when GLUE data is loaded; a module-level seam
    tests replace)."""
    import datasets

    return datasets.load_dataset(*args, **kwargs)


def load_glue_splits(task: TaskSpec) -> dict[str, Any]:
    """``{"train": Dataset, <dev set>: Dataset, ...}`` with only the task's text columns and label column.

    The GLUE test splits (labels -1) are never loaded.
    """
    config = task.param("config", task.name)
    dataset_name = task.param("dataset", GLUE_DATASET)
    try:
        loaded = _load_dataset(dataset_name, config)
    except KdgridError:
        raise
    except Exception as error:
        # Anything from the Hub client (ConnectionError in offline mode, HTTP errors, a missing cache) ends here:
        # the user needs one line saying what to do, not a traceback from inside huggingface_hub.
        raise GlueUnavailableError(
            f"cannot load GLUE task {task.name!r} from the Hugging Face Hub ({dataset_name}, config {config!r}; "
            f"offline?): {type(error).__name__}: {str(error)[:300]}. Use a local task spec (CSV/TSV/JSON/Parquet "
            "files), or cache it with `kdgrid prefetch SWEEP` while online (HF_DATASETS_OFFLINE=1 then reads the "
            "cached copy)."
        ) from error
    splits: dict[str, Any] = {}
    for split in task.split_names:
        if split not in loaded:
            raise GlueUnavailableError(
                f"GLUE task {task.name!r}: the loaded dataset has no split {split!r} (it has {sorted(loaded)})"
            )
        dataset = loaded[split]
        columns = [*task.text_keys, task.label_key]
        missing = [c for c in columns if c not in dataset.column_names]
        if missing:
            raise GlueUnavailableError(
                f"GLUE task {task.name!r}, split {split!r}: missing column(s) {missing}; "
                f"it has {dataset.column_names}"
            )
        splits[split] = dataset.select_columns(columns)
    return splits
