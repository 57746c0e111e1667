"""`kdgrid tables` and `kdgrid figures`: the paper's tables and figures from the results store.

The analysis modules are imported inside the commands: they import pandas, pyarrow and matplotlib (about 2 s),
which `kdgrid --help` and every other command do without.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kdgrid.errors import KdgridError

StoreOpt = Annotated[Path, typer.Option("--store", help="The results store.")]
KindOpt = Annotated[
    str,
    typer.Option("--kind", help="Scores of the best epoch (`best`, as the paper) or the last one (`last`)."),
]


def tables(
    table: Annotated[str, typer.Argument(help="Which table: 1-8, demo, or all.")] = "all",
    store: StoreOpt = Path("results"),
    fmt: Annotated[str, typer.Option("--format", help="terminal, markdown, latex or csv.")] = "terminal",
    compare: Annotated[
        str | None,
        typer.Option(
            help="`paper`: put the published number and the difference beside each of ours, and summarise "
            "agreement per block (mean |difference|, Spearman rank correlation)."
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write to this file instead of the terminal.")] = None,
    kind: KindOpt = "best",
    intervals: Annotated[
        str,
        typer.Option(
            help="95% bootstrap intervals and paired tests per cell: `auto` where the rows carry per-example "
            "predictions, `on` (refuse a store without any), `off`."
        ),
    ] = "auto",
    reference: Annotated[
        str | None,
        typer.Option(
            help="The cell each cell is tested against, within its condition (task, dev set, student, teacher): "
            "FIELD=VALUE[,FIELD=VALUE], e.g. knowledge=hidden_mse,strategy=Last-1. Default: soft labels only."
        ),
    ] = None,
    resamples: Annotated[
        int | None, typer.Option(help="Bootstrap resamples of each interval (default 1,000).", max=10**7)
    ] = None,
    test_resamples: Annotated[
        int | None, typer.Option(help="Bootstrap resamples of each paired test (default 10,000).", max=10**7)
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(help="Keep only trials with this field value (FIELD=VALUE, repeatable), e.g. lr=0.001."),
    ] = None,
    values: Annotated[
        str, typer.Option(help="`score`, or `agreement`: the student's agreement with its teacher on dev.")
    ] = "score",
) -> None:
    """Regenerate the paper's tables from the store (best value per block in bold; missing cells as '-';
    mean±std where several seeds ran; a 95% interval, ▲/▼ against the reference and † for degenerate runs
    where the rows carry predictions; docs/uncertainty.md)."""
    from analysis.render import check_format, to_rich
    from analysis.tables_report import (
        UncertaintyOptions,
        build_report,
        load_tidy,
        render_report,
        sweep_files,
        table_names,
    )

    check_format(fmt)
    table_names(table)  # an unknown table is refused before the store is read
    counts = {"resamples": resamples, "test_resamples": test_resamples}  # unset: analysis.stats' defaults
    uncertainty = UncertaintyOptions(
        intervals, reference, **{name: count for name, count in counts.items() if count is not None}
    )
    uncertainty.check()
    tidy = load_tidy(store, kind, where or ())
    report = build_report(tidy, table, store, compare=compare, uncertainty=uncertainty, values=values)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_report(report, fmt, store))
        Console(stderr=True).print(
            f"wrote {len(report.views)} table(s) to {out}", markup=False, highlight=False
        )
        return
    if fmt != "terminal":
        typer.echo(render_report(report, fmt, store), nl=False)
        return

    # Piped output gets the width a table needs rather than 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=250)
    for view in report.views:
        console.print(to_rich(view))
        console.print()
    for name in report.missing:
        label = "the demo table" if name == "demo" else f"Table {name}"
        line = f"no trials of {label} in {store} (sweep: {sweep_files(name)[0]})"
        console.print(line, style="dim", markup=False, highlight=False)


def figures(
    store: StoreOpt = Path("results"),
    out: Annotated[Path, typer.Option(help="Folder for the PNG and PDF files.")] = Path("results/figures"),
    kind: KindOpt = "best",
) -> None:
    """Heat maps of knowledge x strategy, temperature x hard-label weight, score vs size, ours vs published."""
    from analysis.figures import write_store_figures

    written = write_store_figures(store, out, kind=kind)
    if not written:
        raise KdgridError(
            f"the store {store} holds nothing a figure is drawn from (tables 2, 4, 5, 6, 8 or the demo); "
            "run one of their sweeps first"
        )
    console = Console()
    for path in written:
        console.print(str(path), markup=False, highlight=False)
    console.print(f"{len(written)} file(s) in {out}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(tables)
    app.command()(figures)
