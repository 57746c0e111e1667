"""Task names -> `TaskSpec`, and `load_splits`, which reads a task's data whatever its source.

Known names: the paper's eight GLUE tasks, ``polarity`` and ``uncertainty`` (the offline local tasks) and the
generated ``synthetic-*`` tasks. `get_task` also accepts a path to a local task spec file (YAML / JSON) and any
``synthetic-{shape}-{kind}[-n..][-d..][-s..]`` name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kdgrid.core.data.glue import GLUE_TASKS, load_glue_splits
from kdgrid.core.data.local import (
    POLARITY_TASK,
    UNCERTAINTY_TASK,
    is_spec_path,
    load_local_splits,
    task_from_file,
)
from kdgrid.core.data.spec import TaskSpec
from kdgrid.core.data.synthetic import default_synthetic_tasks, load_synthetic_splits, parse_synthetic_name
from kdgrid.errors import ConfigError
from kdgrid.suggest import did_you_mean

TASKS: dict[str, TaskSpec] = {
    **GLUE_TASKS,
    POLARITY_TASK.name: POLARITY_TASK,
    UNCERTAINTY_TASK.name: UNCERTAINTY_TASK,
    **default_synthetic_tasks(),
}
PAPER_TASKS: tuple[str, ...] = tuple(GLUE_TASKS)


def register_task(task: TaskSpec, *, replace: bool = False) -> TaskSpec:
    """Make ``task`` known by its name in this process (e.g. a local task built from a dict spec)."""
    existing = TASKS.get(task.name)
    if existing is not None and existing != task and not replace:
        raise ConfigError(f"a different task named {task.name!r} is already registered")
    TASKS[task.name] = task
    return task


def get_task(name: str | Path | TaskSpec) -> TaskSpec:
    """The spec of a task name, a ``synthetic-...`` name, or a local task spec file.

    Raises:
        ConfigError: the name is none of these; the message lists the known names.
    """
    if isinstance(name, TaskSpec):
        return name
    text = str(name)
    key = text.strip().lower()
    if key in TASKS:
        return TASKS[key]
    if text in TASKS:
        return TASKS[text]
    synthetic = parse_synthetic_name(key)
    if synthetic is not None:
        return synthetic
    if isinstance(name, Path) or is_spec_path(text):
        return task_from_file(text)
    raise ConfigError(
        f"unknown task {text!r}; known tasks: {', '.join(sorted(TASKS))}; "
        "or synthetic-{single|pair}-{binary|3class|regression}[-n<train>][-d<dev>][-s<seed>], "
        f"or the path of a local task spec (.yaml/.json){did_you_mean(text, TASKS)}"
    )


def load_splits(task: str | Path | TaskSpec) -> dict[str, Any]:
    """``{"train": datasets.Dataset, <dev set>: datasets.Dataset, ...}`` with the task's text and label columns.

    GLUE comes from the Hub (or its local cache), local tasks from their files, synthetic ones are generated.

    Raises:
        ConfigError: a split without a single example (a trial must never train on nothing and be recorded).
    """
    spec = get_task(task)
    if spec.source == "glue":
        splits = load_glue_splits(spec)
    elif spec.source == "local":
        splits = load_local_splits(spec)
    else:
        splits = load_synthetic_splits(spec)
    empty = [name for name, split in splits.items() if len(split) == 0]
    if empty:
        raise ConfigError(
            f"task {spec.name!r}: split(s) {empty} have no examples; nothing to train or evaluate on"
        )
    return splits
