"""Tasks and their data: specs and the registry, loading (GLUE / local files / generated), cached tokenization
and length-grouped batching.

Light names (`TaskSpec`, `TASKS`, `get_task`, ...) import at once; the tokenization and batching names load torch
and pyarrow on first use, so listing or validating tasks stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from kdgrid.core.data.local import task_from_file, task_from_spec
from kdgrid.core.data.registry import PAPER_TASKS, TASKS, get_task, load_splits, register_task
from kdgrid.core.data.spec import TaskSpec
from kdgrid.core.data.synthetic import generate_examples, synthetic_task

_LAZY = {
    "TokenizedSplit": "kdgrid.core.data.tokenization",
    "TokenizedTask": "kdgrid.core.data.tokenization",
    "tokenize_task": "kdgrid.core.data.tokenization",
    "clear_memory_cache": "kdgrid.core.data.tokenization",
    "Batch": "kdgrid.core.data.batching",
    "TrainBatches": "kdgrid.core.data.batching",
    "EvalBatches": "kdgrid.core.data.batching",
    "train_batches": "kdgrid.core.data.batching",
    "eval_batches": "kdgrid.core.data.batching",
    "steps_per_epoch": "kdgrid.core.data.batching",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PAPER_TASKS",
    "TASKS",
    "TaskSpec",
    "generate_examples",
    "get_task",
    "load_splits",
    "register_task",
    "synthetic_task",
    "task_from_file",
    "task_from_spec",
    *_LAZY,
]
