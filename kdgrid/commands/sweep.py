"""`kdgrid plan | run | status | resume | sweeps`: sweeps against the results store.

The commands parse options and print; what they do lives below the CLI: `kdgrid.sweep_run.run_sweep` runs a
sweep (``run``: the trials without any row; ``resume``: also the failed ones, up to ``--max-attempts`` failed
rows each; neither ever runs a done trial). ``run`` and ``resume`` build one `kdgrid.sweep_run.RunOptions` from
their options (`_run_options`) and share one body (`_run_or_resume`), and ``plan`` / ``status`` plan jobs with the same helpers
(`kdgrid.sweep_plan.executor_and_budget`, `plan_sweep_jobs`, which import no torch) and take the same
``--executor / --set / --profile`` as ``run``, so that they show the jobs ``run`` will start. ``sweeps`` lists the
sweeps shipped with kdgrid.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kdgrid.errors import ConfigError
from kdgrid.grid.limits import DEFAULT_MAX_TRIALS, check_max_trials
from kdgrid.markup import plain, printable

if TYPE_CHECKING:
    from kdgrid.core.pretrained.needed import NeededCheckpoint
    from kdgrid.grid import Sweep
    from kdgrid.grid.state import SweepState
    from kdgrid.launch.memory import MemoryBudget
    from kdgrid.sweep_run import RunOptions
    from kdgrid.trial import Trial

FLAG = ""  # the help of a flag shows no type (Typer would print <bool>)
SweepArg = Annotated[
    Path,
    typer.Argument(
        help="A sweep file (sweeps/*.yaml), or the name of a sweep shipped with kdgrid (`kdgrid sweeps` lists "
        "them).",
        show_default=False,
        metavar="SWEEP",
    ),
]
StoreOpt = Annotated[
    Path, typer.Option("--store", help="The results store (a directory of Parquet files).", metavar="DIR")
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON object (keys: trials, jobs, axes, job_split, memory_budget_gb, done, failed, ...).",
        metavar=FLAG,
    ),
]
MaxTrialsOpt = Annotated[
    int,
    typer.Option(
        "--max-trials",
        help="The most trials (grid points) the sweep may expand to; a larger sweep is refused.",
    ),
]
ExecutorOpt = Annotated[
    str, typer.Option("--executor", "-e", help="Where jobs run: local, ray or slurm.", metavar="NAME")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="An executor setting KEY=VALUE (repeatable), e.g. local_workers=2, ray_gpus_per_job=0.25, "
        "slurm_partition=gpu; VALUE is read as YAML.",
        metavar="KEY=VALUE",
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        metavar="NAME|PATH",
        help="SLURM: a named profile (shipped in kdgrid/launch/slurm_profiles, or in $KDGRID_SLURM_PROFILES) or a YAML path.",
    ),
]
GroupOpt = Annotated[
    int,
    typer.Option("--max-group-size", help="At most this many trials per job (0 = no limit).", metavar="N"),
]
MemoryOpt = Annotated[
    str,
    typer.Option(
        "--memory-budget-gb",
        help="GB that one job's students may need together (estimated); a bigger group is split into several "
        "jobs. 'auto': what one job may use where the executor runs it, times 0.9: local: the smallest GPU's "
        "memory (without a GPU the RAM, capped by the cgroup limit) / local_workers; slurm: slurm_mem_gb per "
        "task (RAM: a GPU's memory is unknown before submission unless slurm_gpu_mem_gb is set; no budget "
        "without slurm_mem_gb); ray: ray_gpus_per_job of a GPU, else RAM / concurrent jobs. 0 = no budget.",
        metavar="GB|auto",
    ),
]
PreflightOpt = Annotated[
    bool,
    typer.Option(
        "--preflight/--no-preflight",
        metavar=FLAG,
        help="Check every trial against this machine (teachers, init checkpoints, and that what it needs from the "
        "Hugging Face Hub is cached) before submitting.",
    ),
]
OnlineOpt = Annotated[
    bool,
    typer.Option(
        "--online",
        metavar=FLAG,
        help="Let every job fetch its models and datasets from the Hugging Face Hub itself. Without it, a sweep "
        "that needs the Hub runs only once `kdgrid prefetch SWEEP` has cached everything, and its workers run "
        "offline (HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1).",
    ),
]
CompactOpt = Annotated[
    bool,
    typer.Option(
        "--compact/--no-compact", help="Merge the store's small files when the run ends.", metavar=FLAG
    ),
]
PRETRAIN_PANEL = "Pre-training checkpoints (--make-checkpoints)"
MakeCheckpointsOpt = Annotated[
    bool,
    typer.Option(
        "--make-checkpoints",
        metavar=FLAG,
        help="First make the pre-training checkpoints (init_recipe) that the trials to run need and that are "
        "missing, one job each through the executor (local: one after another over its GPUs; ray: one task "
        "each; slurm: one job each), then run the trials. If one cannot be made, no trial runs (exit status 1); "
        "running again resumes it. Without it, a missing checkpoint is refused.",
        rich_help_panel=PRETRAIN_PANEL,
    ),
]
PretrainMicroBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--pretrain-micro-batch",
        metavar="N",
        help="Sequences per forward pass of each pre-training process (default: the largest up to 32 that "
        "divides its share of the recipe's global batch).",
        rich_help_panel=PRETRAIN_PANEL,
    ),
]
PretrainCheckpointEveryOpt = Annotated[
    int | None,
    typer.Option(
        "--pretrain-checkpoint-every",
        metavar="STEPS",
        help="A step checkpoint of each pre-training job every this many steps (what a killed job loses at most; "
        "default: kdgrid pretrain's, 1000).",
        rich_help_panel=PRETRAIN_PANEL,
    ),
]
PretrainNodesOpt = Annotated[
    int,
    typer.Option(
        "--pretrain-nodes",
        metavar="N",
        help="slurm: nodes of each pre-training job (one task per GPU of the profile on each).",
        rich_help_panel=PRETRAIN_PANEL,
    ),
]

DEFAULT_STORE = Path("results")
DEFAULT_MAX_GROUP_SIZE = 0  # no limit: the memory budget splits big groups
DEFAULT_MEMORY_BUDGET = "auto"

# kdgrid.sweep_run (and with it torch, pandas and pyarrow) is imported inside the commands: `kdgrid --help`
# takes 0.13 s with the imports above and about 3 s with kdgrid.sweep_run (measured on 2 shared CPU cores).
# `plan` and `status` import only kdgrid.sweep_plan (no torch or transformers; benchmarks/cli_latency.py).


def _print_json(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(payload, indent=1, sort_keys=True, default=str))


def _executor_settings(settings: list[str] | None, profile: str | None, executor: str) -> dict[str, Any]:
    """``--set KEY=VALUE`` (VALUE read as YAML) and ``--profile`` as the executor's settings.

    Raises:
        ConfigError: a ``--set`` without ``=``, or ``--profile`` for an executor other than slurm.
    """
    parsed: dict[str, Any] = {}
    for item in settings or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: write KEY=VALUE (e.g. local_workers=2)")
        try:
            parsed[key.strip()] = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError as error:
            reason = " ".join(str(getattr(error, "problem", None) or error).split())
            raise ConfigError(f"--set {item!r}: the value is not a YAML value ({reason})") from None
    if profile is not None:
        if executor != "slurm":
            raise ConfigError(f"--profile is a SLURM setting; the executor is {executor!r}")
        parsed["profile"] = profile
    return parsed


def _summary(sweep: Sweep, state: SweepState, max_group_size: int, budget: MemoryBudget) -> dict[str, Any]:
    """What ``plan`` and ``status`` show of a sweep (the keys of their ``--json`` object)."""
    from kdgrid.grid.prior_cost import prior_cost
    from kdgrid.grid.stages import job_stages, stage_summary
    from kdgrid.grid.state import estimate_cost
    from kdgrid.sweep_plan import count_by_study, job_split, plan_sweep_jobs, sweep_axes

    plans: dict[frozenset[str], list[list[Trial]]] = {}

    def planned(trials: list[Trial]) -> list[list[Trial]]:
        # The plan depends on the set of trials only (`plan_jobs` sorts them), and before a run all three sets
        # below are one: planned once each, not three times (a measured part of `kdgrid plan`'s time).
        key = frozenset(trial.trial_id for trial in trials)
        if key not in plans:
            plans[key] = plan_sweep_jobs(trials, max_group_size, budget.gb)
        return plans[key]

    all_trials = [p.trial for p in sweep.trials]
    jobs = planned(all_trials)
    pending_jobs = planned(state.pending)
    estimate = estimate_cost(state.pending + state.failed, state.timings)
    prior = prior_cost(planned(state.pending + state.failed))
    return {
        "sweep": sweep.name,
        "file": str(sweep.path),
        "trials": len(sweep.trials),
        "grid_points": sweep.grid_points,
        "repeated": sweep.repeated,
        "seeds": sweep.seeds,
        "studies": count_by_study(sweep, all_trials),
        "jobs": len(jobs),
        "memory_budget_gb": budget.gb,
        "memory_budget": budget.basis,
        "pending_jobs": len(pending_jobs),
        "done": len(state.done),
        "failed": len(state.failed),
        "pending": len(state.pending),
        "running": len(state.running),
        "estimate": estimate.to_dict(),
        "prior_estimate": prior.to_dict(),
        "axes": sweep_axes(all_trials),
        "presets": sweep.presets,
        "job_split": job_split(all_trials, jobs, max_group_size, budget.gb),
        "stages": stage_summary(job_stages(jobs), sweep.study_of()),  # teacher assistants before their students
    }


def _failed_trials(state: SweepState, study_of: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "trial_id": t.trial_id,
            "study": study_of.get(t.trial_id),
            "attempts": state.failures.get(t.trial_id, 0),
            "error": state.errors.get(t.trial_id, ""),
        }
        for t in state.failed
    ]


def _degenerate(state: SweepState, store: Path, study_of: dict[str, str]) -> list[dict[str, Any]]:
    """The done trials that look degenerate, as ``status`` shows them: id, study, reasons."""
    from kdgrid.grid.state import degenerate_trials

    return [
        {"trial_id": trial_id, "study": study_of.get(trial_id), "reasons": reasons}
        for trial_id, reasons in degenerate_trials(state, store).items()
    ]


def _projector_overfit(state: SweepState, store: Path, study_of: dict[str, str]) -> list[dict[str, Any]]:
    """The done trials flagged for projector overfitting, as ``status`` shows them: id, study, verdict."""
    from kdgrid.grid.state import projector_overfit_trials

    return [
        {"trial_id": trial_id, "study": study_of.get(trial_id), "verdict": verdict}
        for trial_id, verdict in projector_overfit_trials(state, store).items()
    ]


def _stale_dependants(store: Path, study_of: dict[str, str]) -> dict[str, str]:
    """The sweep's done trials whose teacher (another trial's student) no longer exists, and why."""
    from kdgrid.store.stale_teachers import read_stale_dependants

    return {trial_id: why for trial_id, why in read_stale_dependants(store).items() if trial_id in study_of}


def _print_stale(stale: dict[str, str], sweep: str) -> None:
    """One line counting the stale dependants and how to train them again, then the first few with why."""
    if not stale:
        return
    from kdgrid.store.stale_teachers import describe  # pandas: imported only when there is something to say
    typer.echo(
        f"stale: {len(stale):,} done trial(s) learnt from a teacher that no longer exists; "
        f"`kdgrid resume {sweep} --stale-dependants` trains them again"
    )
    for line in describe(stale):
        typer.echo(line)


def _diagnosed(state: SweepState, store: Path, study_of: dict[str, str]) -> list[dict[str, Any]]:
    """The done trials the diagnosis flags (`kdgrid.diagnosis`), as ``status`` shows them: id, study, flags."""
    from kdgrid.grid.state import diagnosed_trials

    return [
        {"trial_id": trial_id, "study": study_of.get(trial_id), "flags": flags}
        for trial_id, flags in diagnosed_trials(state, store).items()
    ]


def _print_diagnosis(diagnosed: list[dict[str, Any]], done: int, overfit: list[dict[str, Any]]) -> None:
    """One line counting the flagged done trials by flag, then the first few with each flag's evidence (a
    projector verdict already printed by `_print_projector_overfit` is not repeated)."""
    from kdgrid.diagnosis import flag_names
    from kdgrid.grid.state import SHOWN_DEGENERATE

    printed = {(item["trial_id"], item["verdict"]) for item in overfit}
    lines = [
        f"flagged {item['trial_id']} [{item['study']}] {flag['flag']}: {flag['evidence']}"
        for item in diagnosed
        for flag in item["flags"]
        if (item["trial_id"], flag["evidence"]) not in printed
    ]
    if not lines:
        return
    counts: dict[str, int] = {}
    for item in diagnosed:
        for name in flag_names(item["flags"]):
            counts[name] = counts.get(name, 0) + 1
    by_flag = ", ".join(f"{name} {count:,}" for name, count in counts.items())
    typer.echo(f"diagnosis: {len(diagnosed):,} of {done:,} done trials flagged ({by_flag}; docs/diagnosis.md)")
    for line in lines[:SHOWN_DEGENERATE]:
        typer.echo(line)
    if len(lines) > SHOWN_DEGENERATE:
        typer.echo(f"... and {len(lines) - SHOWN_DEGENERATE:,} more (--json lists them all)")


def _print_projector_overfit(flagged: list[dict[str, Any]], done: int) -> None:
    """One line counting the trials flagged for projector overfitting, then the first few with the verdict."""
    from kdgrid.grid.state import SHOWN_DEGENERATE

    if not flagged:
        return
    typer.echo(f"projector overfitting: {len(flagged):,} of {done:,} done trials")
    for item in flagged[:SHOWN_DEGENERATE]:
        typer.echo(f"projector overfitting {item['trial_id']} [{item['study']}]: {item['verdict']}")
    if len(flagged) > SHOWN_DEGENERATE:
        typer.echo(f"... and {len(flagged) - SHOWN_DEGENERATE:,} more (--json lists them all)")


def _print_degenerate(degenerate: list[dict[str, Any]], done: int) -> None:
    """One line counting the degenerate done trials, then the first few with their reasons."""
    from kdgrid.grid.state import SHOWN_DEGENERATE

    if not degenerate:
        return
    typer.echo(
        f"degenerate: {len(degenerate):,} of {done:,} done trials (constant, majority-class or MCC <= 0)"
    )
    for item in degenerate[:SHOWN_DEGENERATE]:
        typer.echo(f"degenerate {item['trial_id']} [{item['study']}]: {'; '.join(item['reasons'])}")
    if len(degenerate) > SHOWN_DEGENERATE:
        typer.echo(f"... and {len(degenerate) - SHOWN_DEGENERATE:,} more (--json lists them all)")


SHOWN_RUNNING_PER_JOB = 8  # trials named under each running job; --json lists them all


def _print_running(running: list[dict[str, Any]]) -> None:
    """The running trials by job: one line per job (holder, trials, epoch and step reached, time, heartbeat),
    then its trials' labels, grouped when several trials share one."""
    from kdgrid.grid.state import running_jobs
    from kdgrid.launch.progress import duration

    if not running:
        return
    jobs = running_jobs(running)
    typer.echo(f"running: {len(running):,} trial(s) in {len(jobs):,} job(s)")
    for job in jobs:
        progress = job["progress"]
        where = (
            "before its first batch"
            if progress is None
            else f"epoch {progress['epoch']}/{progress['epochs']}, step {progress['step']:,}/{progress['steps']:,}"
        )
        typer.echo(
            f"  {job['job_id']} on {job['host']} pid {job['pid']}: {len(job['trials'])} trial(s), {where}, "
            f"running {duration(job['age_s'])}, heartbeat {duration(job['heartbeat_age_s'])} ago"
        )
        labels: dict[tuple[str, str], list[str]] = {}
        for item in job["trials"]:
            labels.setdefault((item["study"] or "", item["label"]), []).append(item["trial_id"])
        shown = sorted(labels.items())
        for (study, label), ids in shown[:SHOWN_RUNNING_PER_JOB]:
            where = f" [{study}]" if study else ""
            ids_text = ids[0] if len(ids) == 1 else f"{len(ids)} trials ({ids[0]}, ...)"
            typer.echo(f"    {label}{where}: {ids_text}")
        if len(shown) > SHOWN_RUNNING_PER_JOB:
            typer.echo(f"    ... and {len(shown) - SHOWN_RUNNING_PER_JOB:,} more (--json lists them all)")


SHOWN_AXIS_VALUES = 12  # values listed per axis; --json has them all


def _print_axes_and_jobs(summary: dict[str, Any], console: Console) -> None:
    """The axes (settings that vary, with their values), then why the trials run as the jobs they do."""
    for name, values in summary["axes"].items():
        shown = ", ".join(values[:SHOWN_AXIS_VALUES])
        more = f", ... ({len(values) - SHOWN_AXIS_VALUES} more)" if len(values) > SHOWN_AXIS_VALUES else ""
        console.print(
            f"axis {name} ({len(values)}): {shown}{more}", markup=False, highlight=False, soft_wrap=True
        )
    for study, preset in summary.get("presets", {}).items():
        values = ", ".join(f"{key}={value}" for key, value in preset["set"].items())
        console.print(
            f"preset {preset['preset']} in study {study} set: {values}", markup=False, highlight=False, soft_wrap=True
        )
    split = summary["job_split"]
    differing = ", ".join(f"{name} ({n})" for name, n in split["group_fields_differing"].items())
    line = f"jobs: {split['groups']:,} group(s) of trials sharing one teacher pass"
    line += f", apart because they differ in {differing}" if differing else ""
    if split["split_groups"]:
        line += (
            f"; {split['split_groups']:,} group(s) split into {split['jobs_of_split_groups']:,} jobs by "
            f"{split['split_by']}"
        )
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_summary(summary: dict[str, Any], title: str) -> None:
    table = Table(title=Text(printable(title)), show_header=True)  # Text: a name or path is never markup
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("trials", f"{summary['trials']:,}"),
        ("grid points (repeated merged)", f"{summary['grid_points']:,} ({summary['repeated']:,})"),
        ("jobs (shared teacher pass)", f"{summary['jobs']:,}"),
        *(
            [("student seeds per cell (one data order)", f"{summary['seeds']:,}")]
            if summary.get("seeds")
            else []
        ),
        (
            "memory budget per job",
            "none" if summary["memory_budget_gb"] is None else f"{summary['memory_budget_gb']:.1f} GB",
        ),
        ("done", f"{summary['done']:,}"),
        ("failed", f"{summary['failed']:,}"),
        ("pending", f"{summary['pending']:,}"),
        ("running (claimed by a live process)", f"{summary['running']:,}"),
        ("jobs to run for pending", f"{summary['pending_jobs']:,}"),
    ]
    from kdgrid.launch.progress import duration

    estimate, prior = summary["estimate"], summary["prior_estimate"]
    rows.append(
        (
            "estimated cost of pending + failed",
            f"{duration(prior['seconds'])} a priori"
            if estimate["seconds"] is None
            else f"{estimate['hours']:.2f} h",
        )
    )
    for name, value in rows:
        table.add_row(name, value)
    console = Console()
    console.print(table)
    if len(summary["studies"]) > 1:
        studies = ", ".join(f"{k} {v:,}" for k, v in summary["studies"].items())
        console.print("studies: " + studies, markup=False, highlight=False)
    _print_axes_and_jobs(summary, console)
    if len(summary["stages"]) > 1:  # a chain of trials: each stage runs after the ones before
        for line in summary["stages"]:
            console.print(line, markup=False, highlight=False)
    console.print(f"[dim]memory budget: {plain(summary['memory_budget'])}[/]", highlight=False)
    if estimate["seconds"] is not None:
        console.print(f"[dim]estimate: {plain(estimate['basis'])}[/]")
    else:
        unpriced = f"; {prior['unpriced_trials']:,} trial(s) not priced" if prior["unpriced_trials"] else ""
        console.print(
            f"a-priori estimate: {prior['flops']:.3g} FLOPs at {prior['speed_basis']}{unpriced} "
            "(docs/finding-your-way.md)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@dataclass(frozen=True)
class PlanOptions:
    """How ``plan`` and ``status`` plan a sweep's jobs, as ``run`` will (the planning half of
    `kdgrid.sweep_run.RunOptions`): one value, built once from the command line (`_plan_options`, which refuses
    bad values) and passed down whole.

    Attributes:
        executor, executor_settings: the executor the jobs are planned for and its settings (``--set``,
            ``--profile``, parsed).
        memory_budget_gb: ``"auto"``, 0 or a number of GB (`kdgrid.sweep_plan.memory_budget`).
        max_group_size: at most this many trials per job (0 = no limit).
        max_trials: the most grid points the sweep may have.
        as_json: print one JSON object instead of tables.
    """

    executor: str = "local"
    executor_settings: Mapping[str, Any] = field(default_factory=dict)
    memory_budget_gb: float | str = DEFAULT_MEMORY_BUDGET
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE
    max_trials: int = DEFAULT_MAX_TRIALS
    as_json: bool = False


@dataclass(frozen=True)
class _View:
    """What one of ``plan`` / ``status`` shows: its ``title`` (formatted with ``sweep``, the sweep's name, and
    ``store``); with ``failures`` each failed, running, degenerate and over-fitting trial; with ``checkpoints``
    the pre-training checkpoints the trials need (hand-made ``init_from`` folders must exist)."""

    title: str
    failures: bool
    checkpoints: bool


PLAN_VIEW = _View("plan of {sweep} against {store}", failures=False, checkpoints=True)
STATUS_VIEW = _View("status of {sweep} in {store}", failures=True, checkpoints=False)


def _plan_options(
    executor: str,
    settings: list[str] | None,
    profile: str | None,
    max_group_size: int,
    memory_budget_gb: str,
    max_trials: int,
    *,
    as_json: bool = False,
) -> PlanOptions:
    """The planning options of ``plan``, ``status``, ``run`` and ``resume`` as one value; ``--set``,
    ``--profile`` and ``--max-trials`` refused here when bad."""
    check_max_trials(max_trials)
    return PlanOptions(
        executor=executor,
        executor_settings=_executor_settings(settings, profile, executor),
        memory_budget_gb=memory_budget_gb,
        max_group_size=max_group_size,
        max_trials=max_trials,
        as_json=as_json,
    )


def _show(sweep_path: Path, store: Path, options: PlanOptions, view: _View) -> None:
    """The body of ``plan`` and ``status``: the sweep's summary against the store, as ``view`` says."""
    from kdgrid.core.pretrained.needed import listing, needed_checkpoints
    from kdgrid.grid.state import running_trials, sweep_state
    from kdgrid.preflight.local import check_init_checkpoints
    from kdgrid.sweep_plan import executor_and_budget, load_named_sweep

    spec = load_named_sweep(sweep_path, max_trials=options.max_trials)
    pretrained: list[NeededCheckpoint] = []
    if view.checkpoints:  # hand-made init_from folders must exist; recipe checkpoints are listed instead
        check_init_checkpoints((planned.trial for planned in spec.trials), recipes=False)
        pretrained = needed_checkpoints(planned.trial for planned in spec.trials)
    _, budget = executor_and_budget(options.executor, options.executor_settings, options.memory_budget_gb)
    state = sweep_state(spec, store)
    summary = _summary(spec, state, options.max_group_size, budget)
    with_failures = view.failures
    failed = _failed_trials(state, spec.study_of()) if with_failures else []
    running = running_trials(state, spec.study_of()) if with_failures else []
    degenerate = _degenerate(state, store, spec.study_of()) if with_failures else []
    overfit = _projector_overfit(state, store, spec.study_of()) if with_failures else []
    # stale dependants are done trials: a sweep without any needs no read of the store's rows
    stale = _stale_dependants(store, spec.study_of()) if with_failures and state.done else {}
    diagnosed = _diagnosed(state, store, spec.study_of()) if with_failures else []
    if options.as_json:
        extra: dict[str, Any] = (
            {
                "failed_trials": failed,
                "running_trials": running,
                "degenerate_trials": degenerate,
                "projector_overfit_trials": overfit,
                "stale_dependants": stale,
                "diagnosed_trials": diagnosed,
            }
            if with_failures
            else {}
        )
        if view.checkpoints:
            extra["pretrain_checkpoints"] = [needed.as_dict() for needed in pretrained]
        _print_json({**summary, **extra})
        return
    _print_summary(summary, view.title.format(sweep=spec.name, store=store))
    for line in listing(pretrained):
        typer.echo(line)
    if with_failures:
        _print_degenerate(degenerate, len(state.done))
        _print_projector_overfit(overfit, len(state.done))
        _print_stale(stale, spec.name)
        _print_diagnosis(diagnosed, len(state.done), overfit)
    _print_running(running)
    for item in failed:
        typer.echo(
            f"failed {item['trial_id']} [{item['study']}] attempts={item['attempts']}: {item['error']}"
        )


def plan(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    executor: ExecutorOpt = "local",
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
    max_trials: MaxTrialsOpt = DEFAULT_MAX_TRIALS,
) -> None:
    """Expand and validate a sweep: its trials, how they group into jobs sharing one teacher pass (planned for
    --executor as `kdgrid run` will), the memory budget per job and where it came from, how many trials are
    already done / failed / pending in the store, and a cost estimate from the store's own timings. It also lists
    the axes (the settings that vary, with their values) and why the trials run as the jobs they do.

    Example: kdgrid plan table5_single_match --store results"""
    options = _plan_options(
        executor, settings, profile, max_group_size, memory_budget_gb, max_trials, as_json=as_json
    )
    _show(sweep, store, options, PLAN_VIEW)


def status(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    executor: ExecutorOpt = "local",
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
    max_trials: MaxTrialsOpt = DEFAULT_MAX_TRIALS,
) -> None:
    """Counts of a sweep's trials by state, and each failed trial with its error on one line (jobs counted as
    `kdgrid plan` counts them). During a run, the running trials by job: their settings and the epoch and step
    their job reached.

    Example: kdgrid status demo --store results"""
    options = _plan_options(
        executor, settings, profile, max_group_size, memory_budget_gb, max_trials, as_json=as_json
    )
    _show(sweep, store, options, STATUS_VIEW)


def _run_options(
    executor: str,
    settings: list[str] | None,
    profile: str | None,
    max_group_size: int,
    memory_budget_gb: str,
    preflight: bool,
    online: bool,
    compact_after: bool,
    *,
    max_attempts: int | None,
    make_checkpoints: bool,
    pretrain_micro_batch: int | None,
    pretrain_checkpoint_every: int | None,
    pretrain_nodes: int,
    max_trials: int,
) -> RunOptions:
    """The command line of ``run`` / ``resume`` as one `kdgrid.sweep_run.RunOptions`, built here once and passed
    down whole. Bad values (``--set``, ``--profile``, ``--pretrain-*``, ``--max-trials``) are refused here, before
    anything runs. The ``--pretrain-*`` options not given keep the fields' defaults
    (`kdgrid.pretrain.checkpoint_grid.CheckpointJobSettings`)."""
    from kdgrid.pretrain.checkpoint_grid import CheckpointJobSettings
    from kdgrid.sweep_run import RunOptions

    given = {"micro_batch": pretrain_micro_batch, "checkpoint_every": pretrain_checkpoint_every,
             "nodes": pretrain_nodes}  # fmt: skip
    checkpoint_settings = CheckpointJobSettings(**{k: v for k, v in given.items() if v is not None})
    planning = _plan_options(executor, settings, profile, max_group_size, memory_budget_gb, max_trials)
    return RunOptions(
        executor=planning.executor,
        executor_settings=planning.executor_settings,
        memory_budget_gb=planning.memory_budget_gb,
        max_group_size=planning.max_group_size,
        max_attempts=max_attempts,
        preflight=preflight,
        online=online,
        compact_after=compact_after,
        make_checkpoints=make_checkpoints,
        checkpoint_settings=checkpoint_settings,
        max_trials=planning.max_trials,
    )


def _run_or_resume(
    sweep: Path,
    store: Path,
    options: RunOptions,
    *,
    smoke: bool = False,
    keep: bool = False,
    report: Path | None = None,
) -> None:
    """The one body of ``run`` and ``resume`` (``options.max_attempts`` None for ``run``): with ``smoke``,
    `smoke_sweep` (one line per group; exits 1 if a group failed); else `run_sweep`, printing its progress, and
    with ``report`` keeping an HTML report of the store there while it runs; exits 1 when a trial of this run
    failed, or a checkpoint it had to make (``options.make_checkpoints``) could not be made."""
    from kdgrid.sweep_run import run_sweep, smoke_sweep

    if smoke:
        if not smoke_sweep(sweep, options, keep=keep, log=typer.echo).ok:
            raise typer.Exit(1)
        return
    keep_report: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if report is not None:
        from kdgrid.report.build import ReportWriter  # pandas and matplotlib: only when a report is asked for
        from kdgrid.report.watch import FIGURES_EVERY_S, PAGE_REFRESH_S, watching

        # An unusable report folder is refused now, before the run starts.
        writer = ReportWriter(
            store, report, refresh_s=PAGE_REFRESH_S, figures_every_s=FIGURES_EVERY_S, option="--report"
        )
        keep_report = watching(writer, log=typer.echo, every_update=False)
    with keep_report:
        outcome = run_sweep(sweep, store, options, log=typer.echo)
    if not outcome.ok:
        raise typer.Exit(1)


def run(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    executor: ExecutorOpt = "local",
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
    preflight: PreflightOpt = True,
    online: OnlineOpt = False,
    compact_after: CompactOpt = True,
    smoke: Annotated[
        bool,
        typer.Option(
            "--smoke",
            metavar=FLAG,
            help="Do not run the sweep: run a few trials of every group (each student, init, knowledge and "
            "strategy of the group once) for a few steps into a throwaway store, and report per group what "
            "failed (exit status 1 if any). Refused with --store (it is never touched).",
        ),
    ] = False,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep", help="With --smoke: keep the throwaway store (its path is printed).", metavar=FLAG
        ),
    ] = False,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            metavar="DIR",
            help="Keep an HTML report of the store in this folder while the run goes on (as `kdgrid report "
            "--watch`); open <folder>/index.html.",
        ),
    ] = None,
    make_checkpoints: MakeCheckpointsOpt = False,
    pretrain_micro_batch: PretrainMicroBatchOpt = None,
    pretrain_checkpoint_every: PretrainCheckpointEveryOpt = None,
    pretrain_nodes: PretrainNodesOpt = 1,
    max_trials: MaxTrialsOpt = DEFAULT_MAX_TRIALS,
) -> None:
    """Run every trial of a sweep that has no row in the store yet (never a done trial; failed trials are left
    to `kdgrid resume`). Exits 1 if a trial of this run failed, or a checkpoint --make-checkpoints had to make.

    Example: kdgrid run demo --store results --set local_workers=2"""
    if keep and not smoke:
        raise ConfigError("--keep goes with --smoke (it keeps the smoke run's throwaway store)")
    if smoke and make_checkpoints:
        raise ConfigError(
            "--make-checkpoints goes with a real run, not --smoke (a smoke run tries trials for a few steps; "
            "making checkpoints may take hours): run `kdgrid run SWEEP --make-checkpoints` first"
        )
    if smoke and store != DEFAULT_STORE:
        raise ConfigError(
            f"--smoke runs in a throwaway store and never touches --store {store}: leave --store out "
            "(add --keep to keep the throwaway store)"
        )
    options = _run_options(
        executor, settings, profile, max_group_size, memory_budget_gb, preflight, online, compact_after,
        max_attempts=None, make_checkpoints=make_checkpoints, pretrain_micro_batch=pretrain_micro_batch,
        pretrain_checkpoint_every=pretrain_checkpoint_every, pretrain_nodes=pretrain_nodes, max_trials=max_trials,
    )  # fmt: skip
    _run_or_resume(sweep, store, options, smoke=smoke, keep=keep, report=report)


def resume(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    executor: ExecutorOpt = "local",
    max_attempts: Annotated[
        int, typer.Option(help="Give up on a trial after this many failed attempts.", metavar="N")
    ] = 3,
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
    preflight: PreflightOpt = True,
    online: OnlineOpt = False,
    compact_after: CompactOpt = True,
    make_checkpoints: MakeCheckpointsOpt = False,
    pretrain_micro_batch: PretrainMicroBatchOpt = None,
    pretrain_checkpoint_every: PretrainCheckpointEveryOpt = None,
    pretrain_nodes: PretrainNodesOpt = 1,
    max_trials: MaxTrialsOpt = DEFAULT_MAX_TRIALS,
    stale_dependants: Annotated[
        bool,
        typer.Option(
            "--stale-dependants",
            help="Also train again the done trials whose teacher (another trial's student) was trained again or "
            "is gone since they learnt from it: their rows are forgotten first (kept in <store>/_forgotten/).",
        ),
    ] = False,
) -> None:
    """Run what is missing plus what failed (up to --max-attempts failed rows per trial), nothing else.
    A preempted trial continues from its last epoch checkpoint (under <store>/_checkpoints).

    Example: kdgrid resume table5_single_match --store results --max-attempts 2"""
    if stale_dependants:
        _forget_stale_dependants(sweep, store, max_trials)
    else:
        _mention_stale_dependants(sweep, store, max_trials)
    options = _run_options(
        executor, settings, profile, max_group_size, memory_budget_gb, preflight, online, compact_after,
        max_attempts=max_attempts, make_checkpoints=make_checkpoints, pretrain_micro_batch=pretrain_micro_batch,
        pretrain_checkpoint_every=pretrain_checkpoint_every, pretrain_nodes=pretrain_nodes, max_trials=max_trials,
    )  # fmt: skip
    _run_or_resume(sweep, store, options)


def _mention_stale_dependants(sweep: Path, store: Path, max_trials: int) -> None:
    """``resume`` without ``--stale-dependants``: one line when the sweep has stale dependants (never retrained
    unasked: their rows are valid records of what was run)."""
    from kdgrid.sweep_plan import load_named_sweep

    spec = load_named_sweep(sweep, max_trials=max_trials)
    stale = _stale_dependants(store, spec.study_of())
    if stale:
        typer.echo(f"{spec.name}: {len(stale)} done trial(s) learnt from a teacher that no longer exists (`kdgrid "
                   f"status` names them); `--stale-dependants` trains them again")  # fmt: skip


def _forget_stale_dependants(sweep: Path, store: Path, max_trials: int) -> None:
    """``resume --stale-dependants``: forget the rows of the sweep's stale dependants (`kdgrid.store.forget`,
    undoable), so that the resume trains them again from their teacher as it is now."""
    from kdgrid.store.forget import forget
    from kdgrid.store.stale_teachers import read_rows, with_their_dependants
    from kdgrid.sweep_plan import load_named_sweep

    spec = load_named_sweep(sweep, max_trials=max_trials)
    study_of = spec.study_of()
    stale = _stale_dependants(store, study_of)
    if not stale:
        typer.echo(f"{spec.name}: no stale dependant (every trial taught by another trial's student learnt from "
                   "the student kept now)")  # fmt: skip
        return
    # their own pupils too (of this sweep): the students they learn from are about to be new
    again = sorted(t for t in with_their_dependants(read_rows(store), set(stale)) if t in study_of)
    done = forget(store, again)
    typer.echo(
        f"{spec.name}: forgot {done.rows} row(s) of {len(stale)} stale dependant(s) and "
        f"{len(again) - len(stale)} trial(s) that learnt from them (kept in {done.kept_in}); they train again now"
    )


def sweeps(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print one JSON list (name, file, trials, studies, purpose).", metavar=FLAG
        ),
    ] = False,
) -> None:
    """List the sweeps shipped with kdgrid: name, trials, studies and purpose. Name one in plan, run or status.

    Example: kdgrid sweeps, then kdgrid plan table5_single_match"""
    from kdgrid.sweep_listing import sweep_listing

    listed = sweep_listing()  # remembered per content of the sweep files and the code (`kdgrid.sweep_listing`)
    if as_json:
        typer.echo(json.dumps(listed, indent=1))
        return
    table = Table(title="sweeps shipped with kdgrid (kdgrid plan NAME)", show_header=True)
    table.add_column("sweep", no_wrap=True)
    table.add_column("trials", justify="right")
    table.add_column("studies", justify="right")
    table.add_column("purpose")
    for item in listed:
        table.add_row(
            Text(item["name"]), f"{item['trials']:,}", f"{len(item['studies'])}", Text(item["purpose"])
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    for command in (plan, run, status, resume, sweeps):
        app.command()(command)
