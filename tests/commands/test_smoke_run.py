"""`kdgrid run SWEEP --smoke`: a few trials of every group, a few steps each, through the real core into a
throwaway store; one line per group, exit status 1 when a group fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.sweep_run import (
    SMOKE_DEV_EXAMPLES,
    SMOKE_STEPS,
    RunOptions,
    smoke_selection,
    smoke_sweep,
    smoke_trial,
)
from kdgrid.trial import Trial

TASK = "synthetic-single-binary-n96-d32"


def test_smoke_selection_tries_every_student_init_knowledge_and_strategy_of_each_group_once() -> None:
    trials = [
        Trial(task="mrpc", teacher="bert-base", student=student, knowledge=(k,), strategy=s)
        for student in ("bert-tiny", "bert-mini")
        for k in ("cos", "gram", "mmd")
        for s in ("First", "Last")
    ] + [Trial(task="rte", teacher="bert-base", student="bert-tiny", knowledge=("cos",), strategy="First")]
    chosen = smoke_selection(trials)
    mrpc, rte = chosen.values()
    assert rte == [trials[-1]]
    # greedy in sweep order: (tiny, cos, First), (tiny, cos, Last), (tiny, gram, First), (tiny, mmd, First), (mini, ...)
    assert mrpc == [trials[0], trials[1], trials[2], trials[4], trials[6]]
    assert {t.student for t in mrpc} == {"bert-tiny", "bert-mini"}
    assert {k for t in mrpc for k in t.knowledge} == {"cos", "gram", "mmd"}
    assert {t.strategy for t in mrpc} == {"First", "Last"}
    cut = smoke_trial(trials[0])
    assert (cut.max_train_samples, cut.epochs, cut.batch_size) == (SMOKE_STEPS * 32, 1, 32)
    assert cut.option("max_dev_samples") == SMOKE_DEV_EXAMPLES  # scored on a few dozen dev examples
    assert smoke_trial(Trial(task="rte", teacher="t", student="s", max_train_samples=10)).max_train_samples == 10


def test_a_smoke_run_reports_the_failing_group_and_leaves_nothing_behind(tmp_path: Path, teacher: str) -> None:
    broken = tmp_path / "broken-teacher"  # a config, no weights: resolves (pre-flight passes), fails to load
    shutil.copytree(teacher, broken)
    for weights in (*broken.glob("*.safetensors"), *broken.glob("*.bin")):
        weights.unlink()
    sweep = tmp_path / "smoky.yaml"
    sweep.write_text(json.dumps({
        "name": "smoky",
        "fixed": {"task": TASK, "student": "w32-l2-h2-f64", "init": "random", "batch_size": 8, "max_length": 24,
                  "options": NOT_MEANT_TO_BE_ACCURATE},
        "axes": {"teacher": [teacher, str(broken)], "knowledge": [[], ["cos"]], "strategy": ["Last-1"]},
    }))  # fmt: skip
    result = CliRunner().invoke(
        app, ["run", str(sweep), "--smoke", "--set", "local_progress=false"], catch_exceptions=False
    )
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    ok = [line for line in lines if line.startswith("ok ")]
    failed = [line for line in lines if line.startswith("FAILED ")]
    assert len(ok) == 1 and teacher in ok[0] and "(2 trial(s))" in ok[0]
    assert len(failed) == 1 and str(broken) in failed[0] and "2 failed" in failed[0]
    assert "smoke run FAILED: 1 of 2 group(s) ok" in result.output
    store = Path(lines[0].rsplit(" into ", 1)[1])
    assert store.name.startswith("kdgrid-smoke-smoky-") and not store.exists()


def test_keep_keeps_the_smoke_store(tmp_path: Path, teacher: str) -> None:
    sweep = tmp_path / "fine.yaml"
    sweep.write_text(json.dumps({"name": "fine", "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64",
                                 "init": "random", "batch_size": 8, "max_length": 24,
                                           "options": NOT_MEANT_TO_BE_ACCURATE}}))  # fmt: skip
    outcome = smoke_sweep(sweep, RunOptions(executor_settings={"local_progress": False}), keep=True)
    try:
        assert outcome.ok and len(outcome.groups) == 1 and outcome.groups[0].trials == 1
        assert outcome.store is not None and any((outcome.store / "rows").iterdir())
    finally:
        if outcome.store is not None:
            shutil.rmtree(outcome.store)


def test_a_chain_smokes_as_a_chain_each_trial_learning_from_its_sources_smoke_version(
    tmp_path: Path, teacher: str
) -> None:
    """Teacher assistants and MOHAWK's stages: the dependants' sources are tried too (even where the group's
    selection would leave them out), and each dependant names its source's smoke version, so it finds its row."""
    sweep = tmp_path / "chained.yaml"
    sweep.write_text(json.dumps({
        "name": "chained",
        "seeds": 2,  # both seeds of a source share a group, whose selection tries the first only
        "fixed": {"task": TASK, "teacher": teacher, "init": "random", "batch_size": 8, "max_length": 24,
                  "options": NOT_MEANT_TO_BE_ACCURATE},
        "studies": {
            "assistant": {"fixed": {"student": "w32-l2-h2-f64"}},
            "via": {"fixed": {"student": "w32-l1-h2-f64", "teacher": "study:assistant"}},
            "orient": {"fixed": {"student": "ssm-l3-h64-a4-f128", "soft_weight": 0, "alpha": 0,
                                 "options": {"mohawk_stage": 1}}},
            "distil": {"fixed": {"student": "ssm-l3-h64-a4-f128", "init_from": "study:orient",
                                 "options": {"mohawk_stage": 3}}},
        },
    }))  # fmt: skip
    from kdgrid.grid import load_sweep
    from kdgrid.sweep_run import smoke_trials

    trials = [p.trial for p in load_sweep(sweep).trials]
    cut = smoke_trials(trials)
    by_student = {(t.student, t.option("mohawk_stage")): t for t in trials if t.seed == 1}
    orient, distil = by_student[("ssm-l3-h64-a4-n16-f128", 1)], by_student[("ssm-l3-h64-a4-n16-f128", 3)]
    assert cut[distil.trial_id].init_from == f"trial:{cut[orient.trial_id].trial_id}"
    assistant, via = by_student[("w32-l2-h2-f64", None)], by_student[("w32-l1-h2-f64", None)]
    assert cut[via.trial_id].teacher == f"trial:{cut[assistant.trial_id].trial_id}"
    outcome = smoke_sweep(sweep, RunOptions(executor_settings={"local_progress": False}))
    assert outcome.ok, [g.line() for g in outcome.groups]
    # each dependant seed is its own group and tried; each brings its source seed, which selection alone left out
    assert sum(len(picked) for picked in smoke_selection(trials).values()) == 6
    assert sum(group.trials for group in outcome.groups) == 8
