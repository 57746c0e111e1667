"""`kdgrid report`: a static HTML report of a store (overview, cost ledger, tables, figures, trials, failures).

The report package is imported inside the command: it imports pandas, pyarrow and matplotlib (about 2 s), which
`kdgrid --help` and every other command do without.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from kdgrid import command_clock


def report(
    store: Annotated[Path, typer.Option("--store", help="The results store.")] = Path("results"),
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="The report folder, outside the store (default: <store>-report beside it).",
            show_default=False,
        ),
    ] = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option("--sweep", help="Only this sweep's rows (its name or file: a file also places its pending trials in their table cells); repeat for several."),
    ] = None,
    compare: Annotated[
        str, typer.Option(help="`paper`: the published number beside ours in the paper's tables; `none`.")
    ] = "paper",
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", help="Keep the report up to date as rows arrive (only what changed) until Ctrl-C."
        ),
    ] = False,
    interval: Annotated[float, typer.Option(help="With --watch: seconds between looks at the store.")] = 10.0,
) -> None:
    """Write a self-contained HTML report of the store: open <out>/index.html in a browser (no server needed).

    Example: kdgrid report --store results --out results-report --watch"""
    started = command_clock.started()  # the printed time is the command's (loading kdgrid and the store included)
    from kdgrid.report.build import ReportWriter, default_out
    from kdgrid.report.rows import require_store
    from kdgrid.report.watch import (
        FIGURES_EVERY_S,
        PAGE_REFRESH_S,
        check_interval,
        describe,
        watch_until_interrupted,
    )

    if watch:
        check_interval(interval)
    if not watch:  # a one-shot report of no store is refused before its output folder is created
        require_store(store)
    out = out if out is not None else default_out(store)
    writer = ReportWriter(
        store,
        out,
        sweeps=sweep,
        compare=compare,
        refresh_s=PAGE_REFRESH_S if watch else None,
        figures_every_s=FIGURES_EVERY_S if watch else 0.0,
    )
    if watch:
        typer.echo(
            f"watching {store} every {interval:g} s; the report is {out / 'index.html'} (Ctrl-C stops)"
        )
        watch_until_interrupted(writer, interval_s=interval, log=typer.echo)
        return
    update = writer.update()
    update.seconds = time.perf_counter() - started
    typer.echo(describe(update, writer))
    typer.echo(str(out / "index.html"))


def register(app: typer.Typer) -> None:
    app.command()(report)
