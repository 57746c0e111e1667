"""Every bundled sweep's trial ids, pinned: a refactor that changes one id (a field renamed, a default moved, a
canonical spelling changed) fails here, naming the sweep and the ids gained and lost.

The golden file holds each sweep's sorted trial ids. A sweep file that is added or changed on purpose regenerates
it with ``python -m tests.grid.test_bundled_trial_ids`` (and the diff shows exactly which ids moved).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kdgrid.bundled_sweeps import bundled_sweep_files
from kdgrid.grid.expand import load_sweep

GOLDEN = Path(__file__).parent / "golden" / "bundled_sweep_trial_ids.json"


def current_trial_ids() -> dict[str, list[str]]:
    """Sweep name (file stem) -> its sorted trial ids, for every bundled sweep."""
    return {
        path.stem: sorted(planned.trial.trial_id for planned in load_sweep(path).trials)
        for path in bundled_sweep_files()
    }


@pytest.fixture(scope="module")
def current() -> dict[str, list[str]]:
    return current_trial_ids()


@pytest.fixture(scope="module")
def golden() -> dict[str, list[str]]:
    return json.loads(GOLDEN.read_text())


def test_the_golden_file_names_every_bundled_sweep(current: dict, golden: dict) -> None:
    assert sorted(current) == sorted(golden)
    assert {"demo", "table5_single_match", "table6_double_match", "controls"} <= set(golden)


@pytest.mark.parametrize("sweep", [path.stem for path in bundled_sweep_files()])
def test_a_bundled_sweeps_trial_ids_are_unchanged(sweep: str, current: dict, golden: dict) -> None:
    assert sweep in golden, f"{sweep} is not in {GOLDEN.name}: regenerate it (see the module docstring)"
    now, pinned = set(current[sweep]), set(golden[sweep])
    assert len(current[sweep]) == len(now), f"{sweep}: a trial id is listed twice"
    assert now == pinned, (
        f"{sweep}: {len(now - pinned)} id(s) new, {len(pinned - now)} id(s) gone; "
        f"new {sorted(now - pinned)[:5]}, gone {sorted(pinned - now)[:5]}"
    )


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(current_trial_ids(), indent=1) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
