"""The step hooks' module docstring is their one list: every hook a method can override is named there."""

from __future__ import annotations

import inspect

from kdgrid.core import step_hooks
from kdgrid.core.step_hooks import StepHooks


def test_every_hook_is_documented_in_the_modules_table_or_the_objectives_list() -> None:
    hooks = [name for name, _ in inspect.getmembers(StepHooks, inspect.isfunction) if not name.startswith("_")]
    assert {"own_values", "teacher_capture", "student_features", "prepare_model"} <= set(hooks)
    doc = step_hooks.__doc__ or ""
    assert [name for name in hooks if f"`{name}`" not in doc] == []
