"""A small store for the report's tests, written with the store's own API: the demo study in miniature (done
trials with curves, weights, layer pairs and the teacher's share recorded), one failed trial whose error text is
HTML, and a recorded membership listing one trial that has no row yet (pending)."""

from __future__ import annotations

from pathlib import Path

from kdgrid.core.teacher.share import record_teacher_pass
from kdgrid.result import TrialResult
from kdgrid.store import write_result
from kdgrid.store.membership import record_membership
from kdgrid.trial import Trial

SWEEP = "demo"
STUDY = "demo"
HOSTILE = '<script>alert("x")</script> & <b>not bold</b>'
# Per job batch: (teacher seconds of the forward, students it fed). Two students share every batch.
TEACHER_PASSES = ((0.5, 2), (0.25, 2), (0.25, 2))


def demo_trial(knowledge: list[str], strategy: str, **fields) -> Trial:
    return Trial(task="polarity", teacher="minilm-l6", student="bert-tiny", knowledge=knowledge,
                 strategy=strategy, epochs=2, **fields)  # fmt: skip


def done_result(trial: Trial, score: float, wall: float) -> TrialResult:
    extra: dict = {"steps_per_epoch": 3}
    for seconds, students in TEACHER_PASSES:
        record_teacher_pass(extra, seconds, students)
    curve = [
        {
            "epoch": 1,
            "scores": {"validation": {"accuracy": score - 0.1}},
            "loss_terms": {"soft": 0.9, "cos@2-3": 0.4},
        },
        {
            "epoch": 2,
            "scores": {"validation": {"accuracy": score}},
            "loss_terms": {"soft": 0.5, "cos@2-3": 0.2},
        },
    ]
    return TrialResult(
        trial=trial, status="done", scores={"validation": {"accuracy": score}},
        last_scores={"validation": {"accuracy": score}}, best_epoch=2, curve=curve,
        loss_terms={"soft": 0.5, "cos@2-3": 0.2}, weights={"soft": 0.9, "cos@2-3": 0.0123},
        layer_pairs=[(2, 3)], student_params=4_400_000, wall_time_s=wall, device="cpu",
        started_at="2026-01-01T10:00:00+00:00", ended_at="2026-01-01T10:30:00+00:00", extra=extra,
    )  # fmt: skip


def failed_result(trial: Trial) -> TrialResult:
    return TrialResult(
        trial=trial, status="failed", error_type="DivergenceError", error_message=f"loss is nan {HOSTILE}",
        traceback=f"Traceback (most recent call last):\n  File \"x.py\", line 1\n{HOSTILE}\n", wall_time_s=36.0,
        started_at="2026-01-01T10:00:00+00:00", ended_at="2026-01-01T10:05:00+00:00",
    )  # fmt: skip


def make_store(store: Path) -> dict[str, str]:
    """Write the store; returns the trial ids by role (``done_first``, ``done_last``, ``failed``, ``pending``).

    Ledger by hand: the two done rows each record 3 teacher batches (1.0 s of teacher time, 0.5 s of share) and
    1.5 shared forwards; the failure row records nothing. So forwards run 3, per-trial forwards 6, device hours
    saved (1.0 - 0.5) * 2 / 3600, device hours spent (1800 + 1764 + 36) / 3600 = 1.0.
    """
    first = demo_trial(["cos"], "First")
    last = demo_trial(["cos"], "Last")
    failed = demo_trial(["gram"], "Last")
    pending = demo_trial(["mmd"], "Last")
    write_result(store, done_result(first, 0.75, 1800.0), sweep=SWEEP, study=STUDY)
    write_result(store, done_result(last, 0.80, 1764.0), sweep=SWEEP, study=STUDY)
    write_result(store, failed_result(failed), sweep=SWEEP, study=STUDY)
    ids = {"done_first": first.trial_id, "done_last": last.trial_id, "failed": failed.trial_id,
           "pending": pending.trial_id}  # fmt: skip
    record_membership(store, SWEEP, {trial_id: STUDY for trial_id in ids.values()})
    return ids
