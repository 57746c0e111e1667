"""A job's part in a chain of trials (teacher assistants, `kdgrid.grid.stages`), wherever it runs.

Before a job whose teacher is another trial's student trains, `JobChain.problem` asks the store about that
assistant: it must be done, with its kept student's hash recorded in its done row; a failed or missing assistant
fails every trial of the job with one message naming it (status failed, so ``kdgrid resume`` runs them again once
the assistant is done). Otherwise the saved student is declared to the core with that hash
(`kdgrid.core.model.trained_teacher.declare_trained`), which checks the file against it before loading it, and each row
of the job records the assistant's id and hash (`annotate`). A trial that starts from another trial's student
(``init_from: trial:<id>``, a stage of MOHAWK) is checked the same way: its source must be done with a kept
student, whose hash its row records (``init_trial_id``, ``init_weights_sha256``).

A trial that some trial learns from (`kdgrid.store.trained_students.is_wanted`) keeps its trained student:
`on_model` saves it into the store and its done row records the weights' SHA-256.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.core.model.trained_teacher import TEACHER_SHA256, TEACHER_TRIAL, WEIGHTS_SHA256, declare_trained
from kdgrid.result import Fence, TrialResult
from kdgrid.store.trained_students import assistant_record, is_wanted, student_dir
from kdgrid.trial import Trial, assistant_id, init_source_id

ASSISTANT_FAILED = "AssistantFailed"  # the error type of a dependant whose assistant (or init source) cannot serve
INIT_TRIAL = "init_trial_id"  # a row's ``extra``: the trial whose student this one started from
INIT_SHA256 = "init_weights_sha256"  # a row's ``extra``: the hash of the weights it started from


@dataclass(frozen=True)
class Problem:
    """Why a kept student cannot serve (`JobChain._kept`)."""

    message: str


class JobChain:
    """One job's assistant (if its teacher is a trial's student) and the students it must keep."""

    def __init__(self, store: Path, trials: list[Trial], *, fence: Fence | None = None) -> None:
        self.store = Path(store)
        self.fence = fence  # asked right before a kept student is written: never one of a trial this job lost
        self.assistant = assistant_id(trials[0].teacher) if trials else None  # one teacher per job
        self.init_sources = sorted({s for t in trials if (s := init_source_id(t.init_from)) is not None})
        self.init_sha256: dict[str, str] = {}
        self.keep = {t.trial_id for t in trials if is_wanted(self.store, t.trial_id)}
        self.saved: dict[str, str] = {}
        self.save_errors: dict[str, str] = {}
        self.teacher_sha256: str | None = None

    def problem(self) -> str | None:
        """Why the job's assistant cannot teach, or a trial's init source cannot serve (None when they can, or
        the job has none); when they can, their kept students are declared to the core."""
        if self.assistant is not None:
            found = self._kept(self.assistant, "assistant trial")
            if isinstance(found, Problem):
                return found.message
            self.teacher_sha256 = found
        for source in self.init_sources:
            found = self._kept(source, "init_from trial")
            if isinstance(found, Problem):
                return found.message
            self.init_sha256[source] = found
        return None

    def _kept(self, trial_id: str, what: str) -> str | Problem:
        """The hash of trial ``trial_id``'s kept student, declared to the core; or why there is none."""
        record = assistant_record(self.store, trial_id)
        name = f"{what} {trial_id}"
        if record.state == "failed":
            return Problem(f"{name} failed ({record.error[:300]}); `kdgrid resume` runs it, then this trial, again")
        if record.state != "done":
            return Problem(f"{name} has not finished (no done row in the store): it must run before this trial")
        if record.weights_sha256 is None:
            return Problem(f"{name} is done but kept no trained student (it ran where no trial learnt from it); "
                           f"`kdgrid store forget {trial_id}` and run the sweep again")  # fmt: skip
        declare_trained(trial_id, student_dir(self.store, trial_id), record.weights_sha256)
        return record.weights_sha256

    def on_model(self, trial: Trial, model: Any) -> None:
        """Keep ``trial``'s trained student when a trial learns from it (the core calls this before the row)."""
        if trial.trial_id not in self.keep:
            return
        # Local: saving imports torch and transformers; a job that keeps nothing never pays for them.
        from kdgrid.core.model.shapes import resolve_teacher
        from kdgrid.core.training.student_export import save_student

        lost = self.fence(trial.trial_id) if self.fence is not None else None
        if lost is not None:
            print(f"kdgrid: trial {trial.trial_id}: its trained student is not kept ({lost})",
                  file=sys.stderr, flush=True)  # fmt: skip
            return
        try:
            teacher = resolve_teacher(trial.teacher, trial.task)
            self.saved[trial.trial_id] = save_student(
                model, trial.trial_id, teacher, student_dir(self.store, trial.trial_id)
            )
        except Exception as error:  # the trial itself is done; its dependants fail, naming this (no hash kept)
            self.save_errors[trial.trial_id] = f"{type(error).__name__}: {error}"
            print(f"kdgrid: trial {trial.trial_id}: its trained student could not be kept ({error})",
                  file=sys.stderr, flush=True)  # fmt: skip

    def annotate(self, result: TrialResult) -> None:
        """Record in ``result``'s row which assistant taught it and the hash of the student it kept."""
        if self.assistant is not None and self.teacher_sha256 is not None:
            result.extra[TEACHER_TRIAL] = self.assistant
            result.extra[TEACHER_SHA256] = self.teacher_sha256
        source = init_source_id(result.trial.init_from)
        if source is not None and source in self.init_sha256:
            result.extra[INIT_TRIAL] = source
            result.extra[INIT_SHA256] = self.init_sha256[source]
        saved = self.saved.get(result.trial.trial_id)
        if saved is not None and result.status == "done":
            result.extra[WEIGHTS_SHA256] = saved
        if result.trial.trial_id in self.save_errors:
            result.extra["student_save_error"] = self.save_errors[result.trial.trial_id]
