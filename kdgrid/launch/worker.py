"""What every executor runs for one job by default: the core's `run_job`, each result written to the store as
it finishes.

`run_job_to_store` is a module-level function (picklable by reference), so a local process pool, a Ray actor and
a SLURM array task all call the same code. If `run_job` itself crashes (the teacher cannot be loaded, a bug),
every trial of the job without a row from this call gets a failure row carrying the error, so ``kdgrid status``
shows why and ``kdgrid resume`` retries them. A job may mix studies: each row records its trial's study.

Before training, the job claims its trials in the store (`kdgrid.store.claims`): it trains only the trials it
claimed and that have no done row yet, leaves the others to their holders (one line on stderr says how many), keeps
its claims alive while it runs (recording the step and epoch its job reached beside them, for ``kdgrid status``)
and releases each as soon as its row is written. So two runs of one sweep, or a
resume while an earlier submission still runs, share the work and no trial is trained twice.

Fenced writes: immediately before it writes a trial's row the worker re-validates its claim
(`kdgrid.store.claims.HeldClaims.validate`: same token and generation in the claim file, heartbeat within the stale
limit). A claim lost meanwhile (this process stalled past the stale limit and another run took the trial over)
makes the row ``superseded``: kept in the store with the reason, never counted. The same check is the core's
``fence`` (`kdgrid.result.Fence`), asked before every other file of a trial is written or removed:
its epoch checkpoints (so a stalled holder never replaces the checkpoint of the run that took its trial over,
nor leaves one behind after that run finished and removed its own), its kept student (``_students/<id>/``) and
ReAugKD's knowledge base and student; learned mappings and temperatures travel in the row. When every trial the job still
trains has lost its claim (the heartbeat thread finds them taken over), the job stops at its next step
(`ClaimsLost` raised from ``on_step``) and writes nothing more: the new holders train them.

The core is a parameter (``run_job``): a test passes a fake core and still gets the real worker writing real rows.

Job functions: a job function has `run_job_to_store`'s signature,
``(trials, store_dir, *, sweep, studies, checkpoint_dir[, on_step]) -> None``, and writes one row per trial into
the store. Every executor takes one as its ``job_fn`` argument (a callable, or ``"module:function"`` on the
command line, `resolve_job_fn`); the default is `run_job_to_store` (`DEFAULT_JOB_FN`). Tests pass their own
(``tests/launch/fakes.py``). Executors that run jobs in other processes (worker processes, Ray actors, SLURM
tasks) need it importable by reference. A job, its failure rows and its pending trials are `kdgrid.launch.job`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kdgrid import store as store_rows  # its readers (pandas, pyarrow) are imported when first called
from kdgrid.errors import ConfigError
from kdgrid.launch.assistant_worker import ASSISTANT_FAILED, JobChain
from kdgrid.launch.job import JobFn, accepts_keyword, accepts_on_step, row_studies, write_failure_rows
from kdgrid.plugins import load_plugins
from kdgrid.result import TrialResult
from kdgrid.store.claims import Claim, HeldClaims, claim_trials
from kdgrid.store.write import StoreWriteError, write_result
from kdgrid.trial import Trial


class ClaimsLost(Exception):
    """Raised from ``on_step`` when every trial the job still trains lost its claim: the job stops there."""


# The core's contract: `kdgrid.core.training.train.run_job(trials, *, checkpoint_dir, on_result, on_step, ...)`.
RunJob = Callable[..., list[TrialResult]]


def core_run_job(trials: list[Trial], **kwargs: Any) -> list[TrialResult]:
    """`kdgrid.core.training.train.run_job`."""
    # Local: the core imports torch and transformers (seconds); an executor or a job function that never trains
    # (the submitting host, a test fake) does not pay for them.
    from kdgrid.core.training.train import run_job

    return run_job(trials, **kwargs)


def run_job_to_store(
    trials: list[Trial],
    store_dir: Path | str,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | str | None = None,
    on_step: Callable[[int, int], None] | None = None,
    run_job: RunJob = core_run_job,
) -> None:
    """Run one job (trials sharing one teacher pass) and write one row per trial into the store.

    Each row records ``sweep`` and its trial's study, ``studies[trial_id]`` (``""`` for a trial it does not
    name, see `kdgrid.launch.job.row_studies`): the trials of one job may come from several studies.

    Rows are written as each trial finishes (``on_result``), so a job killed half-way keeps what it finished.
    A result ``run_job`` returns without having reported it is written afterwards; a crash of ``run_job`` writes
    failure rows for the trials that have none yet. Nothing is raised for a failed trial: the row says it.
    ``on_step(done, total)`` receives the job's batch progress (see `kdgrid.core.training.train.run_job`); ``run_job``
    is the core (default: `kdgrid.core.training.train.run_job`).
    """
    load_plugins()  # a job's process knows the plugins before it trains (a no-op where they are loaded already)
    store = Path(store_dir)
    held, taken = claim_trials(store, [trial.trial_id for trial in trials])
    with held:
        mine = _still_to_train(store, trials, held, taken)
        if mine:
            _run_claimed(mine, store, held, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir,
                         on_step=on_step, run_job=run_job)  # fmt: skip


def _still_to_train(
    store: Path, trials: list[Trial], held: HeldClaims, taken: Mapping[str, Claim]
) -> list[Trial]:
    """The trials this process claimed and that have no done row (a concurrent run may have finished one between
    its planning and this claim: its row was written before its claim was released); says what it leaves."""
    done = store_rows.done_trial_ids(store) if held.claims else set()
    for trial_id in [t for t in held if t in done]:
        held.release(trial_id)
    mine = [trial for trial in trials if trial.trial_id in held]
    left = [trial for trial in trials if trial.trial_id not in held and trial.trial_id not in done]
    if left:
        holders = "; ".join(sorted({claim.holder() for claim in taken.values()})[:3]) or "released meanwhile"
        print(f"kdgrid: {len(left)} trial(s) of this job are claimed by another run ({holders}): left to it",
              file=sys.stderr, flush=True)  # fmt: skip
    return mine


def _run_claimed(
    trials: list[Trial],
    store: Path,
    held: HeldClaims,
    *,
    sweep: str,
    studies: Mapping[str, str] | None,
    checkpoint_dir: Path | str | None,
    on_step: Callable[[int, int], None] | None,
    run_job: RunJob,
) -> None:
    """`run_job_to_store`'s body for the trials this process holds claims of; each claim is released once its
    trial's row is written."""
    study_of = row_studies(trials, studies)
    written: set[str] = set()
    # a teacher assistant's part: its assistant checked, its student kept (fenced as the row is)
    chain = JobChain(store, trials, fence=held.validate)
    blocked = chain.problem()
    if blocked is not None:
        _write_failures(store, trials, held, sweep=sweep, studies=study_of, error_type=ASSISTANT_FAILED,
                        message=blocked)  # fmt: skip
        return

    def write(result: TrialResult) -> None:
        trial_id = result.trial.trial_id
        chain.annotate(result)
        lost = held.validate(trial_id)  # the fence: right before the row is written
        study = study_of.get(trial_id, "")
        write_result(store, result, sweep=sweep, study=study, superseded=lost)
        written.add(trial_id)
        held.release(trial_id)
        if lost is not None:
            print(f"kdgrid: trial {trial_id}: row recorded superseded, not {result.status} ({lost})",
                  file=sys.stderr, flush=True)  # fmt: skip

    def unwritten() -> list[Trial]:
        return [
            trial for trial in trials if trial.trial_id not in written and trial.trial_id not in held.lost
        ]

    def step(done: int, total: int) -> None:
        if on_step is not None:
            on_step(done, total)
        if held.lost and not [t for t in unwritten() if t.trial_id in held]:
            raise ClaimsLost(", ".join(sorted(held.lost)))

    checkpoints = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if checkpoints is not None:
        checkpoints.mkdir(parents=True, exist_ok=True)
    try:
        progress = (
            {"on_step": _noting_progress(held, trials[0].epochs, step)} if accepts_on_step(run_job) else {}
        )
        if chain.keep and accepts_keyword(run_job, "on_model"):
            progress["on_model"] = chain.on_model
        if accepts_keyword(run_job, "fence"):
            progress["fence"] = held.validate  # every file of a trial, not only its row
        results = run_job(list(trials), checkpoint_dir=checkpoints, on_result=write, **progress)
    except ClaimsLost as lost:
        print(f"kdgrid: every trial this job still trained lost its claim to another run ({lost}): stopped",
              file=sys.stderr, flush=True)  # fmt: skip
        return
    except StoreWriteError:
        raise  # the store cannot take rows: stop the job (a failure row could not be written either)
    except Exception as error:  # the whole job failed: record it on every trial still without a row
        _write_failures(store, unwritten(), held, sweep=sweep, studies=study_of, error=error)
        return
    for result in results or []:
        if result.trial.trial_id not in written:
            write(result)
    # a core that forgot a trial must not make it look pending forever
    _write_failures(store, unwritten(), held, sweep=sweep, studies=study_of, error_type="MissingResult",
                    message="run_job returned no result for this trial")  # fmt: skip


def _write_failures(
    store: Path,
    trials: list[Trial],
    held: HeldClaims,
    *,
    sweep: str,
    studies: Mapping[str, str],
    **error: Any,
) -> None:
    """Failure rows for ``trials`` whose claim still holds (validated as a row is); a trial whose claim was lost
    meanwhile gets none: its new holder trains it."""
    for trial in trials:
        if held.validate(trial.trial_id) is None:
            write_failure_rows(store, [trial], sweep=sweep, studies=studies, **error)


def _noting_progress(
    held: HeldClaims, epochs: int, on_step: Callable[[int, int], None] | None
) -> Callable[[int, int], None]:
    """The core's ``on_step``: the step noted in the claims (shown by ``kdgrid status``), then ``on_step``."""

    def noted(done: int, total: int) -> None:
        held.note_progress(done, total, epochs)
        if on_step is not None:
            on_step(done, total)

    return noted


DEFAULT_JOB_FN: JobFn = run_job_to_store


def import_job_fn(path: str) -> JobFn:
    """The function named ``module:function``."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"job function {path!r}: write it as 'module:function'")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"job function {path!r} cannot be imported: {error}") from None


def resolve_job_fn(job_fn: JobFn | str | None) -> JobFn:
    """A callable as it is, a ``module:function`` path imported, None: `DEFAULT_JOB_FN`."""
    if job_fn is None:
        return DEFAULT_JOB_FN
    if isinstance(job_fn, str):
        return import_job_fn(job_fn)
    return job_fn
