"""plan / run / status / resume / store compact against a real store, with fake jobs (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app, main
from kdgrid.store import latest_state, read_store
from kdgrid.store.membership import SweepMembership, memberships_dir, read_memberships
from tests.launch.fakes import job_log_jobs, store_studies

FAKE = [
    "--set",
    "job_fn=tests.launch.fakes:job_to_store",
    "--set",
    "local_progress=false",
    "--no-preflight",
]


def sweep_file(tmp_path: Path, *extra: dict) -> Path:
    """7 trials in two studies (6 + 1), plus ``extra`` trials in the second; every start is logged, and every
    job (`jobs`). The two studies share a group: the rte trials of both run as one job."""
    options = {"test_log": str(tmp_path / "starts.log"), "test_job_log": str(tmp_path / "jobs.log")}
    for entry in extra:
        for key, value in options.items():
            entry.setdefault("options", {}).setdefault(key, value)
    spec = {
        "name": "cli-test",
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "options": options},
        "studies": {
            "grid": {"axes": {"task": ["rte", "mrpc"], "temperature": [1, 2, 4]}},
            "extra": {"include": [{"task": "rte", "temperature": 8}, *extra]},
        },
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def as_json(*args: str) -> dict:
    code, out = invoke(*args, "--json")
    assert code == 0, out
    return json.loads(out)


def starts(tmp_path: Path) -> list[str]:
    log = tmp_path / "starts.log"
    if not log.exists():
        return []
    # tests.launch.fakes logs "start <trial id> <pid> <time>" (and "end ...") per trial
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("start ")]


def jobs(tmp_path: Path) -> list[set[str]]:
    """The jobs that ran (each the set of its trial ids), as `tests.launch.fakes`'s fake core logs them."""
    return job_log_jobs(tmp_path / "jobs.log")


def test_plan_run_status_and_a_second_run_that_does_nothing(tmp_path: Path) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    plan = as_json("plan", sweep, "--store", store)
    # rte (grid 3 + extra 1) and mrpc (grid 3): two groups, so two jobs although the rte one spans two studies
    assert (plan["trials"], plan["jobs"], plan["done"], plan["failed"], plan["pending"]) == (7, 2, 0, 0, 7)
    assert plan["studies"] == {"grid": 6, "extra": 1} and plan["estimate"]["seconds"] is None

    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0, out
    assert len(starts(tmp_path)) == 7
    assert "2 job(s), one teacher pass per batch each; running per study: grid 6, extra 1" in out
    assert sorted(len(job) for job in jobs(tmp_path)) == [3, 4]
    status = as_json("status", sweep, "--store", store)
    assert (status["done"], status["failed"], status["pending"], status["failed_trials"]) == (7, 0, 0, [])
    assert as_json("plan", sweep, "--store", store)["estimate"]["timed_rows"] == 7

    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0 and "to run now 0" in out
    assert len(starts(tmp_path)) == 7  # run never repeats a done trial
    from kdgrid.grid import load_sweep

    # the run recorded which trials the sweep lists, once (the second run wrote no second file)
    expanded = load_sweep(sweep)
    assert read_memberships(store) == [SweepMembership("cli-test", expanded.study_of(), studies=("grid", "extra"))]
    assert len(list(memberships_dir(store).iterdir())) == 1
    frame = read_store(store)
    assert (
        len(frame) == 7 and set(frame["study"]) == {"grid", "extra"} and set(frame["sweep"]) == {"cli-test"}
    )


def test_two_studies_sharing_a_group_run_as_one_job_and_each_row_keeps_its_study(tmp_path: Path) -> None:
    from kdgrid.grid import load_sweep

    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    study_of = load_sweep(sweep).study_of()
    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0, out
    ran = jobs(tmp_path)
    assert len(ran) == 2  # one job (one teacher pass per batch) per group, not per (study, group): 3
    [mixed] = [job for job in ran if len({study_of[t] for t in job}) > 1]
    rte_trials = {p.trial.trial_id for p in load_sweep(sweep).trials if p.trial.task == "rte"}
    assert mixed == rte_trials and {study_of[t] for t in mixed} == {"grid", "extra"}
    assert store_studies(store) == study_of


def test_failed_trials_are_reported_and_resume_respects_max_attempts(tmp_path: Path) -> None:
    bad = {"task": "mrpc", "temperature": 8, "options": {"test_raise": "loss went NaN\nat step 3"}}
    sweep, store = sweep_file(tmp_path, bad), tmp_path / "store"
    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 1 and "failed" in out
    status = as_json("status", sweep, "--store", store)
    assert (status["done"], status["failed"], status["pending"]) == (7, 1, 0)
    [failed] = status["failed_trials"]
    assert failed["error"] == "RuntimeError: loss went NaN at step 3" and failed["attempts"] == 1
    code, out = invoke("status", sweep, "--store", store)
    assert f"failed {failed['trial_id']} [extra] attempts=1: RuntimeError: loss went NaN at step 3" in out

    assert invoke("run", sweep, "--store", store, *FAKE)[0] == 0  # run leaves failed trials to resume
    assert len(starts(tmp_path)) == 8
    code, _ = invoke("resume", sweep, "--store", store, "--max-attempts", "2", *FAKE)
    assert code == 1 and len(starts(tmp_path)) == 9 and starts(tmp_path)[-1] == failed["trial_id"]
    code, out = invoke("resume", sweep, "--store", store, "--max-attempts", "2", *FAKE)
    assert code == 0 and "reached --max-attempts 2" in out and len(starts(tmp_path)) == 9
    assert as_json("status", sweep, "--store", store)["failed_trials"][0]["attempts"] == 2


def test_a_killed_worker_then_resume_completes_exactly_the_missing_trials(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    victim = {"task": "rte", "temperature": 16, "options": {"test_kill_once": str(marker)}}
    sweep, store = sweep_file(tmp_path, victim), tmp_path / "store"
    workers = ["--set", "local_workers=1", "--set", "local_poll_s=0.05"]
    code, out = invoke("run", sweep, "--store", store, *FAKE, *workers, "--max-group-size", "3")
    assert marker.exists() and code == 1
    status = as_json("status", sweep, "--store", store)
    assert status["done"] + status["failed"] == 8 and status["pending"] == 0
    died = {f["trial_id"] for f in status["failed_trials"]}
    assert all("WorkerDied" in f["error"] and "SIGKILL" in f["error"] for f in status["failed_trials"])
    from kdgrid.grid import load_sweep

    study_of = load_sweep(sweep).study_of()
    # the failure rows the executor wrote for the dead job carry each trial's study
    assert store_studies(store) == study_of
    before = len(starts(tmp_path))

    code, out = invoke("resume", sweep, "--store", store, *FAKE, *workers)
    assert code == 0, out
    rerun = starts(tmp_path)[before:]
    assert sorted(rerun) == sorted(died)  # exactly the trials the kill cost, each once
    frame = read_store(store)
    done = frame[frame["status"] == "done"]
    assert len(done) == 8 and done["trial_id"].nunique() == 8
    assert set(latest_state(frame)["state"]) == {"done"}


def test_a_trial_two_sweeps_share_runs_once_and_counts_in_both_tables(tmp_path: Path) -> None:
    from kdgrid.analysis.tables import tables_in
    from kdgrid.analysis.tables_report import load_tidy

    fixed = {"task": "mrpc", "teacher": "bert-base", "student": "bert-mini", "alpha": 0.1}
    table4, table1 = tmp_path / "table4_t.yaml", tmp_path / "table1_i.yaml"
    table4.write_text(json.dumps({"name": "table4_t", "fixed": fixed, "axes": {"temperature": [1, 2]}}))
    table1.write_text(json.dumps({"name": "table1_i", "fixed": {**fixed, "temperature": 1}}))
    store = tmp_path / "store"
    assert invoke("run", table4, "--store", store, *FAKE)[0] == 0
    code, out = invoke("resume", table1, "--store", store, *FAKE)
    assert code == 0 and "to run now 0" in out  # the shared trial is done: the second sweep runs nothing
    frame = read_store(store)
    assert len(frame) == 2 and set(frame["sweep"]) == {"table4_t"}
    tidy = load_tidy(store)
    assert set(tables_in(tidy)) == {"1", "4"}
    assert len(tidy[tidy["table"] == "1"]) == 1 and len(tidy[tidy["table"] == "4"]) == 2


def user_error(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    """Run the CLI as a user does; it must exit 2 with one message and no traceback. Returns the message."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    return " ".join(err.split())


def test_bad_input_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text("fixed: {task: rte, teacher: bert-base, studnet: bert-tiny}\n")
    for command in ("plan", "status", "run", "resume"):
        message = user_error(capsys, command, typo, "--store", tmp_path / "s")
        assert (
            "typo.yaml: fixed.studnet: unknown trial field 'studnet'; allowed: task, teacher, student"
            in message
        )
    good = sweep_file(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "is not a directory" in user_error(capsys, "run", good, "--store", blocker / "s", *FAKE)
    assert "belong to another executor" in user_error(capsys, "run", good, "--store", tmp_path / "s", "--set",
                                                      "slurm_partition=x")  # fmt: skip
    assert "write KEY=VALUE" in user_error(capsys, "run", good, "--store", tmp_path / "s", "--set", "oops")
    assert not starts(tmp_path) and not (tmp_path / "s" / "rows").exists()
    assert read_memberships(tmp_path / "s") == []


def test_store_compact_command(tmp_path: Path) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    invoke("run", sweep, "--store", store, *FAKE, "--no-compact")
    code, out = invoke("store", "compact", "--store", store)
    assert code == 0 and "merged 7 file(s) holding 7 row(s) into 1 part(s)" in out
    assert as_json("status", sweep, "--store", store)["done"] == 7


# -- the memory budget per job ---------------------------------------------------------------------------------------
def budget_for_jobs_of(sweep: Path, trials: int) -> float:
    """A budget (GB) with room for jobs of ``trials`` trials of `sweep_file`, not one more: the planner's estimate
    of such a job plus half of what one more trial adds (all its trials have the same student and shapes)."""
    from kdgrid.grid import estimate_job_memory_gb, estimate_trial_memory_gb, load_sweep

    first = load_sweep(sweep).trials[0].trial
    return estimate_job_memory_gb([first] * trials) + 0.5 * estimate_trial_memory_gb(first)


def fake_machine(monkeypatch: pytest.MonkeyPatch, ram_gb: float) -> None:
    from kdgrid.launch import memory

    monkeypatch.setattr(memory, "ram_gb", lambda: ram_gb)
    monkeypatch.setattr(memory, "gpu_memory_gb", lambda: [])


def test_the_memory_budget_comes_from_the_machine_and_plan_status_and_run_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.launch.local import LocalExecutor

    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    budget = budget_for_jobs_of(sweep, 2)
    fake_machine(monkeypatch, ram_gb=budget / 0.9)  # room for 2 trials per job, not 3
    plan = as_json("plan", sweep, "--store", store)
    assert plan["memory_budget_gb"] == pytest.approx(budget)
    assert plan["memory_budget"].startswith("auto: ") and plan["memory_budget"].endswith(
        "GB of RAM / 1 job at a time"
    )
    assert plan["jobs"] == 4  # groups of 4 (rte, both studies) and 3 (mrpc) trials: 2 + 2, 2 + 1
    assert as_json("status", sweep, "--store", store)["jobs"] == 4
    code, out = invoke("plan", sweep, "--store", store)
    text = " ".join(out.split())
    assert code == 0 and "memory budget per job" in text and f"memory budget: {plan['memory_budget']}" in text

    sizes: list[int] = []
    original = LocalExecutor.run

    def recording_run(self: LocalExecutor, jobs: list, *args: object, **kwargs: object) -> None:
        sizes.extend(len(job) for job in jobs)
        original(self, jobs, *args, **kwargs)

    monkeypatch.setattr(LocalExecutor, "run", recording_run)
    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0, out
    assert f"memory budget per job: {plan['memory_budget']}" in out
    assert sorted(sizes) == [1, 2, 2, 2] and len(starts(tmp_path)) == 7 and len(jobs(tmp_path)) == 4


def test_an_explicit_memory_budget_wins_and_zero_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.launch import memory

    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    monkeypatch.setattr(memory, "ram_gb", lambda: pytest.fail("an explicit budget must not read the machine"))
    monkeypatch.setattr(
        memory, "gpu_memory_gb", lambda: pytest.fail("an explicit budget must not read the GPUs")
    )
    given = budget_for_jobs_of(sweep, 1)
    plan = as_json("plan", sweep, "--store", store, "--memory-budget-gb", str(given))
    assert plan["memory_budget_gb"] == pytest.approx(given) and plan["memory_budget"].startswith("given: ")
    assert plan["jobs"] == 7  # one trial per job
    off = as_json("plan", sweep, "--store", store, "--memory-budget-gb", "0")
    assert off["memory_budget_gb"] is None and "off" in off["memory_budget"] and off["jobs"] == 2


def test_slurm_plans_to_the_tasks_memory_or_to_no_budget_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    fake_machine(monkeypatch, ram_gb=1e-6)  # the login node's memory must not matter
    mem_gb = budget_for_jobs_of(sweep, 2) / 0.9
    plan = as_json("plan", sweep, "--store", store, "-e", "slurm", "--set", f"slurm_mem_gb={mem_gb}")
    assert plan["memory_budget_gb"] == pytest.approx(0.9 * mem_gb) and "slurm_mem_gb" in plan["memory_budget"]
    assert plan["jobs"] == 4
    unknown = as_json("plan", sweep, "--store", store, "-e", "slurm")
    assert unknown["memory_budget_gb"] is None and unknown["jobs"] == 2
    code, out = invoke("plan", sweep, "--store", store, "-e", "slurm")
    assert code == 0 and "slurm_mem_gb is not set" in " ".join(out.split())


@pytest.mark.parametrize("value", ["-1", "lots", "nan"])
def test_a_bad_memory_budget_is_refused_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    sweep = sweep_file(tmp_path)
    for command in ("plan", "run"):
        message = user_error(
            capsys, command, sweep, "--store", tmp_path / "s", *FAKE[:4], "--memory-budget-gb", value
        )
        assert (
            f"--memory-budget-gb: expected a number of GB >= 0 (0 = off) or 'auto', got '{value}'" in message
        )
    assert not starts(tmp_path)


def test_run_sweep_returns_what_ran_and_reports_failures_without_raising(tmp_path: Path) -> None:
    from kdgrid.sweep_run import FailedTrial, RunOptions, SweepCounts, run_sweep

    bad = {"task": "mrpc", "temperature": 8, "options": {"test_raise": "loss went NaN"}}
    sweep, store = sweep_file(tmp_path, bad), tmp_path / "store"
    fake = {"job_fn": "tests.launch.fakes:job_to_store", "local_progress": False}
    lines: list[str] = []
    outcome = run_sweep(sweep, store, RunOptions(executor_settings=fake, preflight=False), log=lines.append)
    assert (outcome.sweep, outcome.trials, outcome.jobs, len(outcome.ran)) == ("cli-test", 8, 2, 8)
    assert outcome.before == SweepCounts(0, 0, 8) and outcome.after == SweepCounts(7, 1, 0)
    [failed] = outcome.failed_now
    assert failed == FailedTrial(failed.trial_id, "extra", "RuntimeError: loss went NaN") and not outcome.ok
    assert outcome.done_now == 7 and lines[0] == "cli-test: 8 trials; done 0, failed 0, pending 8; to run now 8"
    assert lines[-1] == f"failed {failed.trial_id} [extra]: RuntimeError: loss went NaN"

    again = run_sweep(sweep, store, RunOptions(executor_settings=fake, preflight=False, max_attempts=1))
    assert again.ok and again.ran == () and again.jobs == 0 and again.after == again.before
