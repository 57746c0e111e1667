"""`kdgrid store ...`: maintenance of the Parquet results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kdgrid.errors import ConfigError

# The store modules import pyarrow (about 0.3 s): imported inside the commands so that `kdgrid --help` stays fast.

store_app = typer.Typer(help="Maintain the results store (one Parquet file per trial).", no_args_is_help=True)

STORE_OPTION = typer.Option("--store", help="The results store.")


def _existing_store(store: Path) -> Path:
    if store.exists() and not store.is_dir():
        raise ConfigError(f"--store {store}: a file, not a store directory")
    if not store.is_dir():
        raise ConfigError(f"--store {store}: no such store directory")
    return store


@store_app.command()
def check(
    store: Annotated[Path, STORE_OPTION] = Path("results"),
    move_aside: Annotated[
        bool,
        typer.Option(
            "--quarantine",
            help="Move the files that are not kdgrid rows to <store>/_quarantine/ (never deleted).",
        ),
    ] = False,
) -> None:
    """List every file of the store that is not a kdgrid row (a bad name, a truncated or unreadable file,
    Parquet without kdgrid's columns) and why. Every other command leaves such files out and warns; with
    --quarantine they are moved aside, so that every command reads the store cleanly and `kdgrid resume`
    trains again the trials whose rows they held. Also lists the trials with more than one done row, the done
    trials whose teacher (another trial's student) no longer exists, and counts the superseded rows. Exit status
    0: clean (or everything moved); 1: files found and left in place, a trial with two done rows, or a stale
    dependant; 2: no such store.

    Example: kdgrid store check --store results --quarantine"""
    from kdgrid.store.check import check_store, quarantine

    report = check_store(_existing_store(store))
    if report.superseded:
        typer.echo(
            f"{store}: {report.superseded} superseded row(s) (written under a lost claim; kept, never counted)"
        )
    for trial_id, row_ids in report.duplicates.items():
        typer.echo(f"trial {trial_id}: {len(row_ids)} done rows ({', '.join(row_ids)}); the latest counts")
    if report.stale:
        from kdgrid.store.stale_teachers import describe

        for line in describe(report.stale):
            typer.echo(line)
        typer.echo(f"{store}: {len(report.stale)} done trial(s) learnt from a teacher that no longer exists "
                   "(`kdgrid resume SWEEP --stale-dependants` trains them again)")  # fmt: skip
    if report.duplicates:
        typer.echo(f"{store}: {len(report.duplicates)} trial(s) with more than one done row (trained twice); every "
                   "command counts each once, by its latest done row (`kdgrid store forget` removes rows)")  # fmt: skip
    if not report.strays:
        if report.duplicates or report.stale:
            raise typer.Exit(1)
        typer.echo(
            f"{store}: every file is a kdgrid row file ({report.loose} per-trial file(s), {report.parts} "
            f"compacted part(s), {report.rows} row(s))"
        )
        return
    for stray in report.strays:
        typer.echo(f"{stray.describe(store)}")
    if not move_aside:
        newer = sum(stray.stops_reads for stray in report.strays)
        said = []
        if len(report.strays) > newer:
            said.append(f"{len(report.strays) - newer} file(s) are not kdgrid rows and are left out of every read")
        if newer:
            said.append(
                f"{newer} file(s) hold rows of a newer schema, which every other command that reads rows refuses "
                "(exit 2) rather than count their trials as not run"
            )
        typer.echo(
            f"{store}: {'; '.join(said)}; `kdgrid store check --store {store} --quarantine` moves them to "
            f"{store / '_quarantine'}"
        )
        raise typer.Exit(1)
    moved = quarantine(store, report.strays)
    for source, target in moved:
        typer.echo(f"moved {source} -> {target}")
    typer.echo(
        f"{store}: moved {len(moved)} file(s) to {store / '_quarantine'}; the trials whose rows they held read "
        "as not run (`kdgrid resume` trains them)"
    )
    if report.duplicates:
        raise typer.Exit(1)


@store_app.command()
def compact(
    store: Annotated[Path, STORE_OPTION] = Path("results"),
    target_rows: Annotated[int, typer.Option(help="Rows per merged file (at least 1).")] = 100_000,
) -> None:
    """Merge the store's many small per-trial files into a few large ones without losing a row: a file is
    deleted only after its rows are written, synced and read back from a merged file. Safe while trials are
    running and writing, and safe to interrupt: run it again to finish.

    Example: kdgrid store compact --store results"""
    from kdgrid.store.compact import check_target_rows
    from kdgrid.store.compact import compact as compact_store

    check_target_rows(target_rows, name="--target-rows")
    report = compact_store(_existing_store(store), target_rows=target_rows)
    typer.echo(
        f"{store}: merged {report.files_merged} file(s) holding {report.rows} row(s) into "
        f"{report.parts_written} part(s); removed {report.stale_tmp_removed} stale temporary file(s)"
    )


@store_app.command()
def forget(
    trial_ids: Annotated[list[str] | None, typer.Argument(help="Ids of the trials to forget.")] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            help="Forget every trial with a row of this sweep (with trial ids: they must be of it)."
        ),
    ] = None,
    store: Annotated[Path, STORE_OPTION] = Path("results"),
) -> None:
    """Remove every row of some trials, loose or compacted, so that `kdgrid resume` trains them again. Every
    other row stays; the forgotten rows are kept in <store>/_forgotten/ (move that file into <store>/compacted/
    to undo). Forget trials that are not running.

    Example: kdgrid store forget 3f2a9c1e0b7d4e55 --store results"""
    from kdgrid.store.forget import forget as forget_trials
    from kdgrid.store.stale_teachers import read_rows, with_their_dependants

    report = forget_trials(_existing_store(store), trial_ids or (), sweep=sweep)
    typer.echo(
        f"{store}: forgot {len(report.trials)} trial(s), {report.rows} row(s) ({report.loose_files} loose "
        f"file(s), {report.parts_rewritten} compacted part(s) rewritten); the rows are kept in {report.kept_in}"
    )
    taught = sorted(with_their_dependants(read_rows(store), set(report.trials)) - set(report.trials))
    if taught:  # their teacher is gone now, and will be another student once it trains again
        shown = ", ".join(taught[:5]) + (f" and {len(taught) - 5} more" if len(taught) > 5 else "")
        typer.echo(
            f"{store}: {len(taught)} done trial(s) learnt from these trials' students, directly or down a chain "
            f"({shown}): their teachers are gone; once those train again, `kdgrid resume SWEEP --stale-dependants` "
            "trains these again too"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
