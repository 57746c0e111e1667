"""Progress that says what a job is doing: the core's phases as lines, an ETA from the measured step and
evaluation times (the plan's estimate before), epoch lines with the students' loss and dev score, and the phases
a real job goes through."""

from __future__ import annotations

import dataclasses
import io

import pytest

from kdgrid.core.job import phases
from kdgrid.launch.progress import EpochLines, PlainProgress
from kdgrid.trial import Trial
from tests.launch.fakes import make_trial


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def job(epochs: int = 3, students: int = 2) -> list[Trial]:
    return [dataclasses.replace(make_trial(0, k=i), epochs=epochs) for i in range(students)]


def simulate(lines: list[str], clock: FakeClock, *, planned_s: float | None = None) -> list[tuple[float, float]]:
    """A job of 3 epochs x 10 steps of 2 s, 60 s of loading, 5 s per evaluation; returns (true seconds left,
    ETA) after every step."""
    on_step = EpochLines(job(), index=1, jobs=1, emit=lines.append, clock=clock, planned_s=planned_s)
    end = clock.now + 60 + 3 * (10 * 2 + 5)
    pairs = []
    for name, seconds in ((phases.LOADING_TEACHER, 40), (phases.LOADING_DATA, 15), (phases.GATING, 5)):
        on_step.phase(name)
        clock.now += seconds
    for epoch in range(3):
        on_step.phase(phases.TRAINING)
        for step in range(epoch * 10 + 1, epoch * 10 + 11):
            clock.now += 2
            on_step(step, 30)
            pairs.append((end - clock.now, on_step.eta()))
        on_step.phase(phases.EVALUATING, epoch=epoch + 1)
        clock.now += 5
        on_step.phase(phases.EPOCH_ENDED, epoch=epoch + 1, losses=[0.5, 0.25], scores=[0.7, 0.8125],
                      metric="accuracy", dev_set="validation")  # fmt: skip
    return pairs


def test_each_phase_is_a_line_and_the_epoch_line_has_loss_and_dev_score_ranges() -> None:
    lines: list[str] = []
    simulate(lines, FakeClock())
    where = "kdgrid: job 1/1 (2 students, synthetic-single-binary, teacher minilm-l6, seed 0)"
    assert lines[0] == f"{where}: loading the teacher, 0s elapsed, ETA ?"
    assert lines[1].startswith(f"{where}: loading data, 40s elapsed")
    assert lines[2].startswith(f"{where}: checking the teacher (gate), 55s elapsed")
    assert lines[3].startswith(f"{where}: training, 1m00s elapsed")
    assert lines[6].startswith(f"{where}: training from step 11/30")
    assert lines[4].startswith(f"{where}: evaluating epoch 1, 1m20s elapsed")
    assert lines[5] == (
        f"{where}: epoch 1/3 done, step 10/30, 1m25s elapsed, ETA 50s; loss 0.25..0.5, dev accuracy "
        "0.7..0.8125 (2 students)"
    )  # 20 steps x 2 s + 2 evaluations x 5 s left


def test_the_eta_is_within_half_of_the_truth_from_the_tenth_step_and_counts_evaluation() -> None:
    pairs = simulate([], FakeClock())
    for true_left, eta in pairs[9:]:
        assert eta is not None and abs(eta - true_left) <= 0.5 * true_left + 1e-9
    assert pairs[-1] == (5, 5)  # the last evaluation is still to come: not "ETA 0s"
    assert pairs[0][1] is None and pairs[2][1] is None  # no plan, fewer than 3 steps timed: unknown


def test_before_the_steps_are_timed_the_plans_estimate_stands_in() -> None:
    clock, lines = FakeClock(), []
    on_step = EpochLines(job(), index=1, jobs=1, emit=lines.append, clock=clock, planned_s=200.0)
    on_step.phase(phases.LOADING_TEACHER)
    clock.now += 50
    assert on_step.eta() == 150.0 and on_step.position() == "loading the teacher"
    clock.now += 200
    assert on_step.eta() is None  # the plan's estimate is spent: unknown, not 0


def train_five_steps(on_step: EpochLines, clock: FakeClock) -> None:
    """Five training steps of 2 s each of a one-epoch, 20-step job: its own ETA is then 15 x 2 s plus one
    evaluation guessed at 10% of the epoch's 40 s, 34 s."""
    on_step.phase(phases.TRAINING)
    for step in range(1, 6):
        clock.now += 2
        on_step(step, 20)


def test_the_heartbeat_says_the_phase_and_uses_the_jobs_eta() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(2, title="demo", jobs=1, stream=out, interval_s=3600, clock=clock)
    on_step = progress.start_job(1, job(epochs=1))
    on_step.phase(phases.CALIBRATING)
    clock.now += 30
    assert progress.heartbeat_line().endswith("job 1/1 at calibrating beta: auto")
    train_five_steps(on_step, clock)
    # 15 steps x 2 s + one evaluation guessed at 10% of the epoch's 40 s
    assert "ETA 34s; job 1/1 at step 5/20" in progress.heartbeat_line()


def test_the_run_eta_weighs_the_jobs_not_started_by_their_planned_cost() -> None:
    """Jobs of unequal cost (planned 100, 300 and 200 s): the first ran in 50 s, the second is at step 5/20 after
    10 s, 34 s to go. Measured over planned so far: (50 + 44) / (100 + 300); the third job's 200 planned seconds
    at that ratio: 47 s; the run's ETA 34 + 47 = 81 s (counting trials alike would price the third job as the
    first, 50 s)."""
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(
        12, title="s", jobs=3, stream=out, interval_s=3600, clock=clock, planned=[100.0, 300.0, 200.0]
    )
    progress.start_job(1, job(epochs=1, students=4))
    clock.now += 50
    progress.job_ended(1, [], {f"a{i}": "done" for i in range(4)})
    on_step = progress.start_job(2, job(epochs=1, students=4))
    assert on_step.planned_s == 300.0  # the plan given, not priced again
    train_five_steps(on_step, clock)
    assert on_step.eta() == 34.0
    expected = 34 + (50 + 10 + 34) / (100 + 300) * 200
    assert round(expected) == 81 and "ETA 1m21s; job 2/3 at step 5/20" in progress.heartbeat_line()


def test_the_run_eta_counts_trials_when_a_job_is_not_priced() -> None:
    """One job the plan could not price (a task of unknown size): the run's ETA falls back to seconds per trial,
    here the running job's projected 44 s over its 4 trials, for the 4 trials of the job not started."""
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(8, title="s", jobs=2, stream=out, interval_s=3600, clock=clock, planned=[100.0, None])
    on_step = progress.start_job(1, job(epochs=1, students=4))
    train_five_steps(on_step, clock)
    assert "ETA 1m18s; job 1/2 at step 5/20" in progress.heartbeat_line()  # 34 + 4 x 44 / 4 = 78 s


def test_a_real_job_names_its_phases_in_order_and_its_epoch_losses(teacher: str) -> None:
    from kdgrid.core.training.train import run_job
    from tests.tiny_trials import tiny_trial

    heard: list[tuple[str, dict]] = []
    trial = tiny_trial(teacher, knowledge=("hidden_mse",), strategy="Last", beta="auto")
    with phases.listening(lambda name, **facts: heard.append((name, facts))):
        (result,) = run_job([trial], device="cpu")
    assert result.status == "done", result.error_message
    names = [name for name, _ in heard]
    assert names == [phases.LOADING_TEACHER, phases.LOADING_DATA, phases.GATING, phases.SETTING_UP,
                     phases.CALIBRATING, phases.TRAINING, phases.EVALUATING, phases.EPOCH_ENDED,
                     phases.TRAINING, phases.EVALUATING, phases.EPOCH_ENDED]  # fmt: skip
    last = heard[-1][1]
    expected = sum(result.weights[k] * v for k, v in result.curve[-1]["loss_terms"].items())
    assert last["epoch"] == 2 and last["losses"] == [pytest.approx(expected)]
    assert last["scores"] == [result.curve[-1]["scores"]["validation"]["accuracy"]]
    phases.phase(phases.TRAINING)  # nobody listens any more: nothing happens
