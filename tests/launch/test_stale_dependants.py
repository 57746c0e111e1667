"""Provenance that survives a retrain: an assistant forgotten and trained again (into other weights, as training on a
GPU is not bit-identical) leaves its dependant's done row naming weights that no longer exist; `status`, `store
check`, `tables` and the report name the dependant, and `resume --stale-dependants` trains it again, with the
trials that learnt from it in turn.

Through the CLI with the chain test core (`tests.launch.chain_fakes`: the real worker, store, teacher resolution
and student keeping; fake training whose weights change when ``KDGRID_TEST_WEIGHTS_SALT`` does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdgrid.store.forget import forget
from kdgrid.store.stale_teachers import read_stale_dependants
from tests.commands.test_sweep_commands import invoke
from tests.launch.chain_fakes import SALT_VARIABLE
from tests.launch.test_assistant_chain import chain_sweep, rows_by_trial, trials_by_study

CHAIN = ["--no-preflight", "--set", "job_fn=tests.launch.chain_fakes:chain_job_to_store", "--set",
         "local_progress=false"]  # fmt: skip


def test_a_retrained_assistant_makes_its_dependants_stale_everywhere_and_resume_retrains_them_on_request(
    tiny_teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep, store = chain_sweep(tmp_path, tiny_teacher), tmp_path / "store"
    trials = trials_by_study(sweep)
    assistant, student, third = (trials[s].trial_id for s in ("assistant", "student", "third"))
    code, out = invoke("run", sweep, "--store", store, *CHAIN)
    assert code == 0, out
    assert read_stale_dependants(store) == {}
    code, out = invoke("status", sweep, "--store", store)
    assert code == 0 and "stale" not in out, out

    code, out = invoke("store", "forget", assistant, "--store", store)
    pupils = ", ".join(sorted([student, third]))  # the third learnt from the student, which learnt from it
    assert code == 0 and f"2 done trial(s) learnt from these trials' students, directly or down a chain ({pupils})" in (
        " ".join(out.split())
    ), out
    monkeypatch.setenv(SALT_VARIABLE, "second training")  # its next student has other weights
    code, out = invoke("resume", sweep, "--store", store, *CHAIN)
    assert code == 0, out
    (kept,) = [r for r in rows_by_trial(store)[assistant] if r["status"] == "done"]
    (taught,) = [r for r in rows_by_trial(store)[student] if r["status"] == "done"]
    now = json.loads(kept["extra_json"])["student_weights_sha256"]
    learnt_from = json.loads(taught["extra_json"])["teacher_weights_sha256"]
    assert now != learnt_from  # the dependant's row still names the first student's weights

    why = (f"its teacher, trial {assistant}'s student, was trained again: it learnt from weights sha256 "
           f"{learnt_from[:12]}, the student kept now is sha256 {now[:12]}")  # fmt: skip
    assert read_stale_dependants(store) == {student: why}  # the third learnt from the student, which is unchanged
    code, out = invoke("status", sweep, "--store", store)
    assert code == 0 and f"stale {student}: {why}" in out, out
    assert "`kdgrid resume chain --stale-dependants` trains them again" in out
    assert json.loads(invoke("status", sweep, "--store", store, "--json")[1])["stale_dependants"] == {student: why}
    code, out = invoke("store", "check", "--store", store)
    assert code == 1 and f"stale {student}: {why}" in out, out
    code, out = invoke("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, out
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Stale dependants: 1 trial(s) learnt from a teacher that no longer exists" in page
    assert f'<a href="trials/{student}.html">{student}</a>' in page

    code, out = invoke("resume", sweep, "--store", store, *CHAIN)  # without the option: nothing is retrained
    assert code == 0 and "to run now 0" in out and read_stale_dependants(store) == {student: why}
    assert "chain: 1 done trial(s) learnt from a teacher that no longer exists" in out, out
    code, out = invoke("resume", sweep, "--store", store, *CHAIN, "--stale-dependants")
    assert code == 0, out
    assert "forgot 2 row(s) of 1 stale dependant(s) and 1 trial(s) that learnt from them" in out, out
    assert read_stale_dependants(store) == {}  # the student learnt again, and the third from the new student
    rows = rows_by_trial(store)
    for teacher, pupil in ((assistant, student), (student, third)):
        (kept,) = [r for r in rows[teacher] if r["status"] == "done"]
        (taught,) = [r for r in rows[pupil] if r["status"] == "done"]
        assert (json.loads(taught["extra_json"])["teacher_weights_sha256"]
                == json.loads(kept["extra_json"])["student_weights_sha256"])  # fmt: skip
    code, out = invoke("store", "check", "--store", store)
    assert code == 0, out


def test_a_dependant_whose_assistant_was_forgotten_and_not_retrained_is_stale_with_the_reason(
    tiny_teacher: str, tmp_path: Path
) -> None:
    sweep, store = chain_sweep(tmp_path, tiny_teacher), tmp_path / "store"
    trials = trials_by_study(sweep)
    assert invoke("run", sweep, "--store", store, *CHAIN)[0] == 0
    forget(store, [trials["assistant"].trial_id])
    assert read_stale_dependants(store) == {
        trials["student"].trial_id: f"its teacher, trial {trials['assistant'].trial_id}'s student, is gone: "
        f"{trials['assistant'].trial_id} has no done row (forgotten or failed since)"
    }
    code, out = invoke("tables", "--sweep", "chain", "--store", store)
    assert code == 0 and "warning: 1 trial(s) in these tables learnt from a teacher that no longer exists" in out
    assert f"stale {trials['student'].trial_id}: its teacher" in out, out
