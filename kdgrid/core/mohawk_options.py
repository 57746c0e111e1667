"""MOHAWK's one option, ``mohawk_stage`` (1, 2 or 3: which stage of MOHAWK a trial of an SSM student is), declared
for `kdgrid.core.options` to register. Torch-free. Beside `kdgrid.core.methods.mohawk`, not inside it: the options
module imports this one, and that package's torch parts import modules that import the options. What the stages
do and the rules a stage's trial must follow: `kdgrid.core.methods.mohawk.spec` and docs/ssm.md.
"""

from __future__ import annotations

from typing import Any

MOHAWK_STAGE = "mohawk_stage"
STAGES = (1, 2, 3)


def stage_problem(value: Any) -> str | None:
    """Why ``mohawk_stage`` = ``value`` is not allowed (None when it is)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in STAGES:
        return None
    return f"option {MOHAWK_STAGE}={value!r} is invalid; allowed: 1, 2, 3 (docs/ssm.md)"


OPTION_DECLARATIONS: tuple[dict[str, Any], ...] = (
    {
        "name": MOHAWK_STAGE,
        "kind": "int",
        "default": None,
        "meaning": "MOHAWK's stage of an SSM student: 1 matrix orientation, 2 hidden-state alignment, 3 weight "
        "transfer and end-to-end distillation (docs/ssm.md)",
        "check": stage_problem,
    },
)
