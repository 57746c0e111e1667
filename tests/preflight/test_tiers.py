"""The pre-flight's tiers: one static rule set (found shapes or given ones give the same answer), the local tier's
store check, and the gate tier reading cached verdicts only when jobs run elsewhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kdgrid.core.model.shapes import student_shape
from kdgrid.core.trial_rules import MINILM_SHAPE, combination_problems, teacher_shape, trial_problems
from kdgrid.errors import ConfigError
from kdgrid.preflight.local import create_store
from kdgrid.trial import Trial


def test_the_static_rules_are_one_function_with_or_without_the_shapes() -> None:
    # bert-tiny has 2 layers, the MiniLM teacher 6: Dilatation is fine, a relation_heads of 3 divides neither 128
    # nor 384 evenly (128 % 3 = 2).
    trial = Trial("polarity", "minilm-l6", "bert-tiny", knowledge=("key_relation",), strategy="Dilatation",
                  relation_heads=3)  # fmt: skip
    found = combination_problems(trial)
    given = combination_problems(trial, (student_shape("bert-tiny"), MINILM_SHAPE))
    assert found == given == [
        "relation_heads=3 must divide the student's width 128 and the teacher's 384"
    ]
    assert trial_problems(trial) == trial_problems(trial, (student_shape("bert-tiny"), MINILM_SHAPE)) == found
    assert teacher_shape("minilm-l6", "polarity") == MINILM_SHAPE


def test_a_teacher_that_cannot_be_resolved_is_one_more_static_problem() -> None:
    trial = Trial("polarity", "no-such-teacher-alias", "bert-tiny", knowledge=("cos",))
    problems = combination_problems(trial)
    assert problems[0].startswith("knowledge ['cos'] needs a `strategy`")  # the rules that need no teacher
    assert len(problems) == 2 and "no-such-teacher-alias" in problems[1]


def test_the_local_tier_creates_the_store_last_or_refuses_it(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(ConfigError, match=r"cannot be created"):
        create_store(blocked / "store")
    create_store(tmp_path / "deep" / "store")
    assert (tmp_path / "deep" / "store").is_dir()


def test_the_local_tier_imports_no_torch() -> None:
    """`kdgrid plan` imports the local tier: it must not cost the torch import."""
    code = "import sys, kdgrid.preflight.local; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
