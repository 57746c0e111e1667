"""Progress of a local run, where it can be read: a live bar on a terminal, plain lines in a log.

On a terminal (`Console.is_terminal`), a Rich bar of trials done / failed / remaining with an ETA, and a second
bar of the running job's shared batches; it is as wide as the terminal. Anywhere else (CI, SLURM, ``| tee``,
``make demo > demo.log``) a live bar prints nothing until it ends, so kdgrid writes plain lines instead, one
per event, flushed at once:

- one line per phase of each job, as the core names them (`kdgrid.core.job.phases`: loading the teacher, loading
  data, checking the teacher, setting up the students, calibrating ``beta: auto``, training, evaluating);
- one line per epoch of each job: which job, its students, its task and teacher, the step reached, the time the
  job has run, its ETA, and the epoch's weighted mean loss and primary dev score of its student (of several: the
  range, lowest to highest);
- one line per job that ends, with the run's trial counts;
- a heartbeat every `heartbeat_s` seconds (``KDGRID_PROGRESS_HEARTBEAT_S``, default 60): the run's trial counts,
  elapsed time, ETA (from the trials finished so far) and the running job's step, so a log shows a run is alive
  even while a teacher loads or an epoch lasts an hour.

A job's ETA (`EpochLines.eta`): once `MIN_TIMED_STEPS` training steps are timed (the first step, with its
warm-up, and anything between two steps that is not a training step are left out), the remaining steps at the
measured seconds per step plus the remaining evaluations (one per epoch) at the measured seconds of one, or
`EVAL_GUESS` of an epoch's training time before the first is measured; before that, the plan's estimate
(`kdgrid.grid.prior_cost`) less the time the job has run; ``?`` when neither is known or the plan's estimate is
spent. A job function that names no phase (a fake in tests, a plugin) keeps the plain rate: the time since the
job started over the steps it ran. The heartbeat's run ETA is the running job's ETA plus the jobs not started yet:
where the plan priced every job (`planned_seconds`), their planned seconds times the ratio measured so far of
true to planned seconds (the finished jobs' and the running job's projected total), so that a sweep whose jobs
differ in students, task or length is timed by what each job will cost; else the trials outside the running job
at the seconds per trial measured so far (of finished trials, else of the running job's projected end).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kdgrid.core.job import phases
from kdgrid.env_numbers import positive_from_env
from kdgrid.grid.prior_cost import prior_cost
from kdgrid.markup import plain
from kdgrid.trial import Trial

HEARTBEAT_ENV = "KDGRID_PROGRESS_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 60.0
"""Seconds between two heartbeat lines of a run whose output is not a terminal (``KDGRID_PROGRESS_HEARTBEAT_S``)."""
PREFIX = "kdgrid: "
MIN_TIMED_STEPS = 3  # training steps timed before the measured rate replaces the plan's estimate
EVAL_GUESS = 0.1  # an evaluation's seconds, as a fraction of an epoch's training, until one is measured


def heartbeat_s() -> float:
    """Seconds between two heartbeat lines: `DEFAULT_HEARTBEAT_S`, or ``KDGRID_PROGRESS_HEARTBEAT_S``.

    Raises:
        ConfigError: a value that is not a number of seconds > 0.
    """
    return positive_from_env(HEARTBEAT_ENV, DEFAULT_HEARTBEAT_S)


def duration(seconds: float | None) -> str:
    """A duration for people (progress lines, ``status``, ``plan``): ``42s``, ``3m05s``, ``2h07m``; ``?`` when
    unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{(whole % 3600) // 60:02d}m"


def job_label(job: Sequence[Trial]) -> str:
    """What a job is, in a few words: its students, task, teacher and data-order seed (the group it shares)."""
    first = job[0]
    students = len(job)
    return (
        f"{students} student{'s' if students != 1 else ''}, {first.task}, teacher {first.teacher}, "
        f"seed {first.option('data_seed', first.seed)}"
    )


class EpochLines:
    """A job's ``on_step(done, total)`` turned into one line at the end of each of its epochs (``index`` of
    ``jobs`` in the line where the caller knows them; a Ray or SLURM job process does not).

    ``done`` counts the job's shared batches over all its epochs and ``total`` is epochs x batches per epoch
    (`kdgrid.core.training.train.run_job`), so epoch e ends at ``done == e * total / epochs``. Also remembers the last
    step seen, for the heartbeat.
    """

    def __init__(
        self,
        job: Sequence[Trial],
        *,
        index: int | None,
        jobs: int | None,
        emit: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        planned_s: float | None = None,
    ) -> None:
        self.epochs = max(1, job[0].epochs)
        self.trials = len(job)
        self.planned_s = planned_s
        self.phase_name: str | None = None  # the last phase the core named (None: a job function without phases)
        self.phase_label = ""  # the phase in words (``evaluating epoch 2``)
        self.train_s = 0.0  # seconds of timed training steps
        self.timed_steps = 0
        self.eval_s = 0.0
        self.evals = 0  # evaluations measured
        self.evaluating_since: float | None = None
        self.last_step_at: float | None = None
        number = f" {index}/{jobs}" if index is not None and jobs is not None else ""
        self.where = f"job{number} ({job_label(job)})"
        self.emit = emit
        self.clock = clock
        self.started = clock()
        self.first_step: int | None = None
        self.step = 0
        self.total = 0

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.first_step is None:
            self.first_step = done - 1  # a resumed job starts past its first batches
        if self.phase_name == phases.TRAINING and self.last_step_at is not None:
            self.train_s += now - self.last_step_at
            self.timed_steps += 1
        self.last_step_at = now if self.phase_name == phases.TRAINING else None
        self.step, self.total = done, total
        per_epoch = total // self.epochs if total % self.epochs == 0 else 0
        if self.phase_name is not None or not per_epoch or done % per_epoch:
            return  # with phases, the epoch's line comes once it is evaluated (`phase`)
        elapsed = now - self.started
        ran = done - self.first_step
        eta = elapsed / ran * (total - done) if ran > 0 else None
        self.emit(
            f"{PREFIX}{self.where}: epoch {done // per_epoch}/{self.epochs} done, step {done:,}/{total:,}, "
            f"{duration(elapsed)} elapsed, ETA {duration(eta)}"
        )

    def phase(self, name: str, **facts: Any) -> None:
        """The core's phase (`kdgrid.core.job.phases`): one line for each, and the epoch's line when it ended."""
        now = self.clock()
        if self.evaluating_since is not None:
            self.eval_s += now - self.evaluating_since
            self.evals += 1
            self.evaluating_since = None
        if name == phases.EPOCH_ENDED:
            self.phase_name = phases.EPOCH_ENDED
            self.emit(self.epoch_line(facts))
            return
        self.phase_name = name
        self.last_step_at = None  # the time to the next step is not a training step's
        if name == phases.EVALUATING:
            self.evaluating_since = now
            name = f"evaluating epoch {facts.get('epoch', '?')}"
        elif name == phases.TRAINING and self.total:
            name = f"training from step {self.step + 1:,}/{self.total:,}"
        self.phase_label = name
        self.emit(f"{PREFIX}{self.where}: {name}, {duration(now - self.started)} elapsed, ETA {duration(self.eta())}")

    def eta(self) -> float | None:
        """Seconds left in this job (see the module); None when unknown."""
        if self.timed_steps >= MIN_TIMED_STEPS and self.total:
            per_step = self.train_s / self.timed_steps
            per_epoch = self.total / self.epochs
            per_eval = self.eval_s / self.evals if self.evals else EVAL_GUESS * per_epoch * per_step
            evals_left = max(0, self.epochs - self.evals)
            return (self.total - self.step) * per_step + evals_left * per_eval
        if self.planned_s is not None:
            left = self.planned_s - (self.clock() - self.started)
            return left if left > 0 else None
        return None

    def epoch_line(self, facts: Mapping[str, Any]) -> str:
        """The line of an epoch that ended: step, elapsed, ETA, the students' loss and dev score (or ranges)."""
        elapsed = self.clock() - self.started
        epoch = facts.get("epoch", "?")
        losses = [v for v in facts.get("losses", []) if v == v]
        scores = [v for v in facts.get("scores", []) if v == v]
        what = []
        if losses:
            what.append(f"loss {_span(losses)}")
        if scores:
            what.append(f"dev {facts.get('metric', 'score')} {_span(scores)}")
        students = len(facts.get("losses", []))
        of = f" ({students} students)" if students > 1 else ""
        tail = f"; {', '.join(what)}{of}" if what else ""
        return (
            f"{PREFIX}{self.where}: epoch {epoch}/{self.epochs} done, step {self.step:,}/{self.total:,}, "
            f"{duration(elapsed)} elapsed, ETA {duration(self.eta())}{tail}"
        )

    def trials_done_by_steps(self) -> float:
        """The job's trials times the fraction of its steps done: its students all finish together, at its last
        step, so the run's ETA counts them by the job's steps, not by the trials finished."""
        return self.trials * self.step / self.total if self.total else 0.0

    def position(self) -> str:
        """What the job is doing: ``step s/S`` while training, the phase's name otherwise (``starting`` before
        anything is known)."""
        if self.phase_name not in (None, phases.TRAINING, phases.EPOCH_ENDED):
            return self.phase_label
        return f"step {self.step:,}/{self.total:,}" if self.total else "starting"


def _span(values: Sequence[float]) -> str:
    """One value to 4 significant digits, or the range ``low..high`` of several."""
    low, high = min(values), max(values)
    return f"{low:.4g}" if len(values) == 1 or low == high else f"{low:.4g}..{high:.4g}"


def planned_seconds(job: Sequence[Trial]) -> float | None:
    """The plan's estimate of a job's seconds (`kdgrid.grid.prior_cost`); None where it cannot price it."""
    try:
        cost = prior_cost([list(job)])
    except Exception:  # an estimate is a convenience: a job it cannot price still runs
        return None
    return cost.seconds if cost.seconds and not cost.unpriced_trials else None


def print_line(line: str) -> None:
    """Print ``line`` to stdout and flush it (a job process's output is a log)."""
    print(line, flush=True)


def counts(trial_states: Mapping[str, str], total: int) -> tuple[int, int, int]:
    """(done, failed, remaining) of a run of ``total`` trials from its rows' states."""
    states = list(trial_states.values())
    done, failed = states.count("done"), states.count("failed")
    return done, failed, total - done - failed


class PlainProgress:
    """The plain-line progress of a run (see the module docstring); the same interface as `LiveProgress`."""

    def __init__(
        self,
        total: int,
        *,
        title: str,
        jobs: int,
        stream: IO[str] | None = None,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        planned: Sequence[float | None] | None = None,
    ) -> None:
        """``planned``: each job's planned seconds, in the order of their indices (`planned_seconds`; None where
        the plan cannot price one); without it the run's ETA counts trials."""
        self.total = total
        self.title = title
        self.jobs = jobs
        self.planned: list[float | None] = list(planned) if planned is not None else [None] * jobs
        self.ended_jobs: set[int] = set()
        self.ended_s = 0.0  # seconds the ended jobs ran
        self.current_index: int | None = None
        self.stream = stream
        self.interval_s = heartbeat_s() if interval_s is None else interval_s
        self.clock = clock
        self.started = clock()
        self.states: Mapping[str, str] = {}
        self.current: EpochLines | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kdgrid-progress-heartbeat", daemon=True)

    def emit(self, line: str) -> None:
        """Write one line and flush it (a log shows it at once)."""
        stream = self.stream or sys.stdout  # resolved now: a test or a redirect may have replaced stdout
        with self._lock:
            stream.write(line + "\n")
            stream.flush()

    def __enter__(self) -> PlainProgress:
        self.emit(f"{PREFIX}{self.title}: {self.total:,} trials in {self.jobs:,} job(s)")
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.emit(self.heartbeat_line())

    def heartbeat_line(self) -> str:
        """The run's counts, elapsed time, ETA from the trials finished so far plus the running job's share of its
        steps, and the running job's step."""
        done, failed, remaining = counts(self.states, self.total)
        elapsed = self.clock() - self.started
        finished = done + failed
        job = self.current
        progress = finished + (job.trials_done_by_steps() if job is not None else 0.0)
        eta = elapsed / progress * (self.total - progress) if progress > 0 else None
        job_eta = job.eta() if job is not None and job.phase_name is not None else None
        if job is not None and job_eta is not None:  # a job naming its phases: its own ETA, then the rest
            job_elapsed = self.clock() - job.started
            later = self.planned_later(job_elapsed + job_eta)
            if later is not None:
                eta = job_eta + later
            else:
                outside = self.total - finished - job.trials
                per_trial = (elapsed - job_elapsed) / finished if finished else (job_elapsed + job_eta) / job.trials
                eta = job_eta + max(0, outside) * per_trial
        at = f"; {job.where.split(' (')[0]} at {job.position()}" if job is not None else ""
        return (
            f"{PREFIX}{self.title}: {finished:,}/{self.total:,} trials finished (done {done:,}, failed "
            f"{failed:,}), {remaining:,} remaining; {duration(elapsed)} elapsed, ETA {duration(eta)}{at}"
        )

    def planned_later(self, running_total_s: float) -> float | None:
        """Seconds the jobs not started yet will take: their planned seconds times the measured over planned
        seconds of the jobs ended and the running one (``running_total_s``: its projected total); None unless
        the plan priced all of them."""
        index = self.current_index
        if index is None or not 1 <= index <= len(self.planned):
            return None
        measured = [i for i in (*self.ended_jobs, index) if 1 <= i <= len(self.planned)]
        later = [i for i in range(1, len(self.planned) + 1) if i not in self.ended_jobs and i != index]
        plans = [self.planned[i - 1] for i in (*measured, *later)]
        if any(plan is None or plan <= 0 for plan in plans):
            return None
        planned_measured = sum(self.planned[i - 1] or 0.0 for i in measured)
        ratio = (self.ended_s + running_total_s) / planned_measured
        return ratio * sum(self.planned[i - 1] or 0.0 for i in later)

    def start_job(self, index: int, job: Sequence[Trial]) -> EpochLines:
        """The ``on_step`` of job ``index`` (1-based), which prints its phase and epoch lines."""
        known = self.planned[index - 1] if 1 <= index <= len(self.planned) else None
        self.current = EpochLines(
            job,
            index=index,
            jobs=self.jobs,
            emit=self.emit,
            clock=self.clock,
            planned_s=known if known is not None else planned_seconds(job),
        )
        self.current_index = index
        return self.current

    def job_ended(self, index: int, job: Sequence[Trial], trial_states: Mapping[str, str]) -> None:
        """One line for a job that ended, with the run's counts."""
        self.states = dict(trial_states)
        if self.current is not None and self.current_index == index:
            self.ended_s += self.clock() - self.current.started
            self.ended_jobs.add(index)
        self.current, self.current_index = None, None  # its trials are counted as finished now
        ids = {trial.trial_id for trial in job}
        mine = {trial_id: state for trial_id, state in trial_states.items() if trial_id in ids}
        done, failed, _ = counts(mine, len(ids))
        all_done, all_failed, remaining = counts(trial_states, self.total)
        self.emit(
            f"{PREFIX}job {index}/{self.jobs} ended: {done} done, {failed} failed; run: {all_done:,} done, "
            f"{all_failed:,} failed, {remaining:,} remaining, {duration(self.clock() - self.started)} elapsed"
        )

    def show(self, trial_states: Mapping[str, str]) -> None:
        """Remember the counts of ``trial_states`` (trial id -> done / failed) for the next heartbeat."""
        self.states = dict(trial_states)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        done, failed, remaining = counts(self.states, self.total)
        self.emit(
            f"{PREFIX}{self.title}: {done:,} done, {failed:,} failed, {remaining:,} without a row after "
            f"{duration(self.clock() - self.started)}"
        )


class LiveProgress:
    """A Rich bar of trials (done / failed / remaining, elapsed, ETA) and of the running job's batches, for a
    terminal."""

    def __init__(self, total: int, *, title: str, console: Console | None = None) -> None:
        self.total = total
        self.title = title
        self.console = console
        self._progress: Any = None
        self._task: Any = None
        self._steps: Any = None

    def __enter__(self) -> LiveProgress:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self._progress.start()
        # escaped: a sweep or study name is shown as it is written, never read as markup
        self._task = self._progress.add_task(plain(self.title), total=self.total, info=self._info({}))
        return self

    def _info(self, trial_states: Mapping[str, str]) -> str:
        done, failed, remaining = counts(trial_states, self.total)
        return f"[green]done {done}[/] [red]failed {failed}[/] remaining {remaining}"

    def start_job(self, index: int, job: Sequence[Trial]) -> Callable[[int, int], None]:
        """The ``on_step`` of a job: the second bar follows its shared batches."""

        def on_step(done: int, total: int) -> None:
            if self._steps is None:
                self._steps = self._progress.add_task("  batches of this job", total=total, info="")
            self._progress.update(self._steps, completed=done, total=total)

        def phase(name: str, **facts: Any) -> None:  # the core's phase (`kdgrid.core.job.phases`) beside the bar
            if self._steps is None:
                self._steps = self._progress.add_task("  batches of this job", total=None, info="")
            if name == phases.EVALUATING:
                name = f"evaluating epoch {facts.get('epoch', '?')}"
            self._progress.update(self._steps, info=plain(f"[{name}]") if name != phases.EPOCH_ENDED else "")

        on_step.phase = phase  # type: ignore[attr-defined]
        return on_step

    def job_ended(self, index: int, job: Sequence[Trial], trial_states: Mapping[str, str]) -> None:
        self.show(trial_states)

    def show(self, trial_states: Mapping[str, str]) -> None:
        """Show the counts of ``trial_states`` (trial id -> done / failed, from this run's rows)."""
        done, failed, _ = counts(trial_states, self.total)
        self._progress.update(self._task, completed=done + failed, info=self._info(trial_states))

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


class NoProgress:
    """Progress turned off (``local_progress=false``): nothing is shown."""

    def __enter__(self) -> NoProgress:
        return self

    def start_job(self, index: int, job: Sequence[Trial]) -> None:
        return None

    def job_ended(self, index: int, job: Sequence[Trial], trial_states: Mapping[str, str]) -> None:
        pass

    def show(self, trial_states: Mapping[str, str]) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


RunProgress = PlainProgress | LiveProgress | NoProgress


def run_progress(
    total: int,
    *,
    title: str,
    jobs: int,
    enabled: bool,
    stream: IO[str] | None = None,
    job_trials: Sequence[Sequence[Trial]] | None = None,
) -> RunProgress:
    """The progress of a run of ``total`` trials in ``jobs`` jobs: none when not ``enabled`` (or nothing to
    run), a live bar when ``stream`` (default stdout) is a terminal, else plain lines, whose run ETA weighs the
    jobs not started by the plan's estimate of each (``job_trials``: the jobs' trials, in order)."""
    if not enabled or not jobs:
        return NoProgress()
    stream = stream or sys.stdout
    console = Console(file=stream)
    if console.is_terminal:
        return LiveProgress(total, title=title, console=console)
    planned = [planned_seconds(trials) for trials in job_trials] if job_trials is not None else None
    return PlainProgress(total, title=title, jobs=jobs, stream=stream, planned=planned)
