"""`kdgrid plan | run | status | resume`: sweeps against the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kdgrid.commands.common import not_yet

SweepArg = Annotated[Path, typer.Argument(help="A sweep file (sweeps/*.yaml).", show_default=False)]
StoreOpt = Annotated[Path, typer.Option("--store", help="The results store (a directory of Parquet files).")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object (keys: trials, jobs, done, failed, pending).")
]
ExecutorOpt = Annotated[str, typer.Option("--executor", "-e", help="Where jobs run: local, ray or slurm.")]

DEFAULT_STORE = Path("results")


def plan(sweep: SweepArg, store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """Expand and validate a sweep: its trials, how they group into jobs sharing one teacher pass, how many are
    already done / failed / pending in the store, and a cost estimate from the store's own timings."""
    raise not_yet("plan", "sweeps issue")


def run(sweep: SweepArg, store: StoreOpt = DEFAULT_STORE, executor: ExecutorOpt = "local") -> None:
    """Run every trial of a sweep that has no done row in the store (never a finished trial twice)."""
    raise not_yet("run", "sweeps issue")


def status(sweep: SweepArg, store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """Counts of a sweep's trials by state, and each failed trial with its error on one line."""
    raise not_yet("status", "sweeps issue")


def resume(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    executor: ExecutorOpt = "local",
    max_attempts: Annotated[
        int, typer.Option(help="Give up on a trial after this many failed attempts.")
    ] = 3,
) -> None:
    """Run what is missing plus what failed (up to --max-attempts), nothing else."""
    raise not_yet("resume", "sweeps issue")


def register(app: typer.Typer) -> None:
    for command in (plan, run, status, resume):
        app.command()(command)
