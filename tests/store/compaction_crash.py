"""A compaction that crashes after writing and verifying its parts, before deleting its inputs: the state a
reader must cope with (every such row both loose and in a part)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

# The module, not the function `kdgrid.store.compact` that the package re-exports under the same name.
COMPACT_MODULE = importlib.import_module("kdgrid.store.compact")


class CompactionCrashed(Exception):
    """Raised where a compaction would delete its inputs."""


def compact_crashing_before_delete(store: Path, **options: Any) -> None:
    """Run `compact` on ``store`` up to the deletion of its inputs, then crash; fails if it never got there."""

    def crash(*args: object, **kwargs: object) -> None:
        raise CompactionCrashed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(COMPACT_MODULE, "delete_inputs", crash)
        with pytest.raises(CompactionCrashed):
            COMPACT_MODULE.compact(store, **options)
