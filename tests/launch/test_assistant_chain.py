"""Chains of trials (teacher assistants) through every executor: dependency order, the assistant's student kept and
checked by the hash its row records, a failed assistant failing its dependants by name, resume along the chain.

The core is `tests.launch.chain_fakes` (the real worker and store; the chain's teacher resolution and student
saving for real); `tests/core/test_assistant_training.py` runs the real core.
"""

from __future__ import annotations

import collections
import hashlib
import json
import textwrap
from pathlib import Path

import pytest

from kdgrid.grid import load_sweep, plan_jobs
from kdgrid.launch.stage_run import run_in_stages
from kdgrid.store import read_store
from kdgrid.store.forget import forget
from kdgrid.store.membership import read_memberships
from kdgrid.store.trained_students import student_dir
from kdgrid.sweep_run import RunOptions, run_sweep
from kdgrid.trial import Trial
from tests.launch.chain_fakes import chain_job_to_store, fake_weights
from tests.launch.fakes import log_events
from tests.sweep_studies import trials_of

FAKE = {"job_fn": "tests.launch.chain_fakes:chain_job_to_store", "local_progress": False}


def chain_sweep(tmp_path: Path, teacher: str, assistant_options: str = "") -> Path:
    """assistant -> student -> third (three stages), and a direct trial beside the first stage."""
    log = tmp_path / "log.txt"
    path = tmp_path / "chain.yaml"
    path.write_text(textwrap.dedent(f"""
        name: chain
        fixed:
          task: synthetic-single-binary-n64-d32
          teacher: {teacher}
          init: random
          options: {{teacher_gate: false, test_log: {log}}}
        studies:
          assistant:
            fixed: {{student: w32-l2-h2-f64}}
            overrides: [{{set: {{options: {{{assistant_options}}}}}}}]  # merged into the sweep's options
          direct: {{fixed: {{student: w32-l1-h2-f64}}}}
          student: {{fixed: {{student: w32-l1-h2-f64, teacher: "study:assistant"}}}}
          third: {{fixed: {{student: w32-l1-h2-f64, lr: 0.001, teacher: "study:student"}}}}
        """))  # fmt: skip
    return path


def trials_by_study(path: Path) -> dict[str, Trial]:
    sweep = load_sweep(path)
    return {study: trials_of(sweep, study)[0] for study in sweep.studies}


def rows_by_trial(store: Path) -> dict[str, list[dict]]:
    rows = collections.defaultdict(list)
    for row in read_store(store).to_dict("records"):
        rows[row["trial_id"]].append(row)
    return rows


def spans(log: Path) -> dict[str, list[tuple[float, float]]]:
    """Each trial's runs: (start, end) times from the job log."""
    starts: dict[str, list[float]] = collections.defaultdict(list)
    result: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for event, trial_id, _pid, when in log_events(log):
        if event == "start":
            starts[trial_id].append(when)
        else:
            result[trial_id].append((starts[trial_id][-1], when))
    return result


def assert_chain_done_in_order(tmp_path: Path, trials: dict[str, Trial], store: Path) -> None:
    runs = spans(tmp_path / "log.txt")
    assistant, student, third = trials["assistant"], trials["student"], trials["third"]
    assert runs[assistant.trial_id][-1][1] <= runs[student.trial_id][-1][0]
    assert runs[student.trial_id][-1][1] <= runs[third.trial_id][-1][0]
    rows = rows_by_trial(store)
    for teacher, pupil in ((assistant, student), (student, third)):
        expected = hashlib.sha256(fake_weights(teacher)).hexdigest()  # the bytes the fake student saved
        (kept,) = [r for r in rows[teacher.trial_id] if r["status"] == "done"]
        (taught,) = [r for r in rows[pupil.trial_id] if r["status"] == "done"]
        assert json.loads(kept["extra_json"])["student_weights_sha256"] == expected
        extra = json.loads(taught["extra_json"])
        assert extra["teacher_trial_id"] == teacher.trial_id and extra["teacher_weights_sha256"] == expected
        assert extra["fake_teacher_source"] == str(student_dir(store, teacher.trial_id))
    assert not student_dir(store, trials["direct"].trial_id).exists()  # no trial learns from it: not kept
    assert not student_dir(store, third.trial_id).exists()


def test_a_chain_runs_in_dependency_order_through_the_local_executor(tiny_teacher: str, tmp_path: Path) -> None:
    sweep = chain_sweep(tmp_path, tiny_teacher)
    lines: list[str] = []
    outcome = run_sweep(sweep, tmp_path / "store", RunOptions(executor_settings=FAKE, preflight=False), log=lines.append)
    assert outcome.ok and outcome.done_now == 4
    assert any(line.startswith("3 stages: teacher assistants train before the trials they teach") for line in lines)
    assert_chain_done_in_order(tmp_path, trials_by_study(sweep), tmp_path / "store")
    # the store records the studies in the file's order, for tables laid out by study
    (membership,) = read_memberships(tmp_path / "store")
    assert membership.studies == ("assistant", "direct", "student", "third")


def test_a_failed_assistant_fails_its_dependants_by_name_and_resume_reruns_only_the_chain(
    tiny_teacher: str, tmp_path: Path
) -> None:
    once = tmp_path / "failed-once"
    sweep = chain_sweep(tmp_path, tiny_teacher, f"test_raise_once: {once}")
    trials = trials_by_study(sweep)
    store = tmp_path / "store"
    first = run_sweep(sweep, store, RunOptions(executor_settings=FAKE, preflight=False))
    failed = {f.trial_id: f.error for f in first.failed_now}
    assert set(failed) == {trials[s].trial_id for s in ("assistant", "student", "third")}
    assistant, student = trials["assistant"].trial_id, trials["student"].trial_id
    assert f"assistant trial {assistant} failed (RuntimeError: failing once on purpose" in failed[student]
    assert f"assistant trial {student} failed (AssistantFailed: assistant trial {assistant} failed" in failed[
        trials["third"].trial_id
    ]
    rows = rows_by_trial(store)
    assert [r["error_type"] for r in rows[student]] == ["AssistantFailed"]

    again = run_sweep(sweep, store, RunOptions(executor_settings=FAKE, preflight=False, max_attempts=3))
    assert again.ok and again.done_now == 3 and len(again.ran) == 3  # the direct trial is not run again
    starts = collections.Counter(trial_id for event, trial_id, _, _ in log_events(tmp_path / "log.txt")
                                 if event == "start")  # fmt: skip
    assert starts == {trials["direct"].trial_id: 1, assistant: 2, student: 1, trials["third"].trial_id: 1}
    assert_chain_done_in_order(tmp_path, trials, store)


def test_a_kept_student_that_is_not_the_one_its_row_recorded_is_refused(tiny_teacher: str, tmp_path: Path) -> None:
    sweep = chain_sweep(tmp_path, tiny_teacher)
    trials = trials_by_study(sweep)
    store = tmp_path / "store"
    assert run_sweep(sweep, store, RunOptions(executor_settings=FAKE, preflight=False)).ok
    weights = student_dir(store, trials["assistant"].trial_id) / "model.safetensors"
    weights.write_bytes(b"other weights")
    forget(store, [trials["student"].trial_id])
    outcome = run_sweep(sweep, store, RunOptions(executor_settings=FAKE, preflight=False))
    (failed,) = outcome.failed_now
    assert failed.trial_id == trials["student"].trial_id
    assert f"assistant trial {trials['assistant'].trial_id}: its saved weights" in failed.error
    assert hashlib.sha256(b"other weights").hexdigest()[:16] in failed.error


def two_chains(tmp_path: Path, teacher: str) -> tuple[list[list[Trial]], dict[str, str], dict[str, Trial]]:
    """Two assistants (one failing) each teaching one student: the jobs, their studies, the trials by role."""
    log = tmp_path / "log.txt"
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent(f"""
        name: two
        fixed: {{task: synthetic-single-binary-n64-d32, teacher: {teacher}, init: random,
                options: {{teacher_gate: false, test_log: {log}, test_seconds: 1}}}}
        studies:
          assistant:
            fixed: {{student: w32-l2-h2-f64}}
            include: [{{options: {{test_raise: on purpose}}}}, {{lr: 0.001}}]  # options merged into the sweep's
          student: {{fixed: {{student: w32-l1-h2-f64, teacher: "study:assistant"}}}}
        """))  # fmt: skip
    sweep = load_sweep(path)
    trials = [p.trial for p in sweep.trials]
    bad = next(t for t in trials if t.option("test_raise"))
    good = next(t for t in trials_of(sweep, "assistant") if not t.option("test_raise"))
    roles = {
        "bad": bad,
        "good": good,
        "bad_pupil": next(t for t in trials if t.teacher == f"trial:{bad.trial_id}"),
        "good_pupil": next(t for t in trials if t.teacher == f"trial:{good.trial_id}"),
    }
    return plan_jobs(trials), sweep.study_of(), roles


def assert_two_chains(tmp_path: Path, store: Path, roles: dict[str, Trial]) -> None:
    rows = rows_by_trial(store)
    state = {trial_id: [r["status"] for r in rs] for trial_id, rs in rows.items()}
    assert state == {roles["bad"].trial_id: ["failed"], roles["bad_pupil"].trial_id: ["failed"],
                     roles["good"].trial_id: ["done"], roles["good_pupil"].trial_id: ["done"]}  # fmt: skip
    (refused,) = rows[roles["bad_pupil"].trial_id]
    assert refused["error_type"] == "AssistantFailed"
    assert refused["error_message"].startswith(f"assistant trial {roles['bad'].trial_id} failed (RuntimeError: on purpose")
    runs = spans(tmp_path / "log.txt")
    assert runs[roles["good"].trial_id][0][1] <= runs[roles["good_pupil"].trial_id][0][0]
    assert roles["bad_pupil"].trial_id not in runs  # refused before its core ran


@pytest.mark.slow
def test_a_chain_runs_in_dependency_order_through_ray(ray_runtime: None, tiny_teacher: str, tmp_path: Path) -> None:
    from kdgrid.launch.ray import RayExecutor

    jobs, studies, roles = two_chains(tmp_path, tiny_teacher)
    store = tmp_path / "store"
    store.mkdir()
    run_in_stages(RayExecutor(job_fn=chain_job_to_store), jobs, store, sweep="two", studies=studies)
    assert_two_chains(tmp_path, store, roles)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_chain_runs_in_dependency_order_through_slurm(
    slurm_cluster: object, tiny_teacher: str, tmp_path: Path
) -> None:
    from kdgrid.launch.slurm import SlurmExecutor

    jobs, studies, roles = two_chains(tmp_path, tiny_teacher)
    store = tmp_path / "store"
    store.mkdir()
    executor = SlurmExecutor("local", job_fn=chain_job_to_store, poll_interval_s=1.0)  # type: ignore[arg-type]
    submitted: list[list[str]] = []
    submit = executor.submit

    def recording_submit(*args: object, **kwargs: object) -> object:
        submitted.append(list(kwargs.get("after", ())))  # type: ignore[arg-type]
        return submit(*args, **kwargs)  # type: ignore[arg-type]

    executor.submit = recording_submit  # type: ignore[method-assign]
    run_in_stages(executor, jobs, store, sweep="two", studies=studies)
    assert submitted[0] == [] and len(submitted) == 2 and len(submitted[1]) == 1
    # the second stage's array was submitted at once, waiting on the first's through SLURM, not on this process
    scripts = list((store / "_slurm").rglob("*_submission.sh"))
    assert any(f"--dependency=afterok:{submitted[1][0]}" in s.read_text() for s in scripts), scripts
    assert_two_chains(tmp_path, store, roles)
