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

from kdgrid.errors import ConfigError, KdgridError

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
            "agreement per block (mean |difference|, Spearman rank correlation). With --sweep reaugkd: "
            "ReAugKD's published Tables 1 and 2 beside ours."
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
            "FIELD=VALUE[,FIELD=VALUE], e.g. knowledge=hidden_mse,strategy=Last-1. Default: soft labels only. "
            "With --sweep, an axis it leaves out gets a reference per slice (strategy=Last-1: within each "
            "knowledge)."
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
    sweeps: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="Lay out this sweep's trials (any sweep, by its name) instead of a paper table; its axes are "
            "the trial fields that vary between its trials (docs/tables.md). Twice (--sweep A --sweep B, or "
            "NAME@STORE_DIR for a sweep of another store): their shared cells side by side with the difference "
            "and its test, and the cells only one ran.",
        ),
    ] = None,
    rows: Annotated[
        str | None,
        typer.Option(help="With --sweep: the axis (or AXIS,AXIS) down the rows (default: the first)."),
    ] = None,
    cols: Annotated[
        str | None, typer.Option(help="With --sweep: the axis across the columns (default: the second).")
    ] = None,
    pairs: Annotated[
        bool,
        typer.Option(
            "--pairs",
            help="With --sweep: compare every two values of each axis (the table's tests, corrected as --correction).",
        ),
    ] = False,
    summary: Annotated[
        str | None,
        typer.Option(
            help="With --sweep: a method-level summary along AXIS over every task (mean and IQM with stratified "
            "bootstrap intervals); AXIS=VALUE also gives each value's probability of improvement over VALUE and "
            "Almost Stochastic Order (docs/tables.md), e.g. --summary knowledge=none.",
            metavar="AXIS[=VALUE]",
        ),
    ] = None,
    family: Annotated[
        str,
        typer.Option(
            help="Family of the multiple-comparison correction: `condition` (one per task x dev set x student x "
            "teacher) or `table` (all tests of a table at once)."
        ),
    ] = "condition",
    correction: Annotated[
        str,
        typer.Option(help="`holm` (family-wise error) or `fdr` (Benjamini-Hochberg false discovery rate)."),
    ] = "holm",
    test: Annotated[
        str,
        typer.Option(
            help="`auto`: exact McNemar / z-tests one seed a side, t-tests over seeds with two or more; "
            "`bootstrap`: the paired bootstrap test everywhere (its p cannot go below 2/(R+1))."
        ),
    ] = "auto",
) -> None:
    """Regenerate the paper's tables from the store (best value per block in bold; missing cells as '-';
    mean±std where several seeds ran; a 95% interval, ▲/▼ against the reference and † for degenerate runs
    where the rows carry predictions; docs/uncertainty.md).

    Example: kdgrid tables 5 --store results --format markdown, or kdgrid tables --sweep my_study --pairs"""
    from kdgrid.analysis.render import check_format, to_rich
    from kdgrid.analysis.tables_report import (
        UncertaintyOptions,
        build_report,
        load_tidy,
        render_report,
        sweep_files,
        table_names,
    )

    check_format(fmt)
    if sweeps and len(sweeps) > 1:
        _compare_sweeps(
            table, store, fmt, out, kind, intervals, counts_of(resamples, test_resamples), where, sweeps,
            {"--rows": rows, "--cols": cols, "--pairs": pairs or None, "--summary": summary,
             "--reference": reference, "--compare": compare, "--values": None if values == "score" else values,
             "--test": None if test == "auto" else test},
            family, correction,
        )  # fmt: skip
        return
    sweep = one_sweep(sweeps)
    counts = {
        "resamples": resamples,
        "test_resamples": test_resamples,
    }  # unset: kdgrid.analysis.stats' defaults
    counts = {name: count for name, count in counts.items() if count is not None}
    if sweep is not None:
        _sweep_tables(
            table,
            store,
            fmt,
            compare,
            out,
            kind,
            intervals,
            reference,
            counts,
            where,
            values,
            sweep,
            rows,
            cols,
            pairs,
            summary,
            family,
            correction,
            test,
        )
        return
    for option, given in (
        ("--rows", rows),
        ("--cols", cols),
        ("--pairs", pairs or None),
        ("--summary", summary),
    ):
        if given is not None:
            raise ConfigError(f"{option} lays out a sweep's own table: give it with --sweep NAME")
    table_names(table)  # an unknown table is refused before the store is read
    counts = {
        "resamples": resamples,
        "test_resamples": test_resamples,
    }  # unset: kdgrid.analysis.stats' defaults
    uncertainty = UncertaintyOptions(
        intervals,
        reference,
        **{name: count for name, count in counts.items() if count is not None},
        family=family,
        correction=correction,
        test=test,
        kind=kind,
    )
    uncertainty.check()
    tidy = load_tidy(store, kind, where or ())
    try:
        report = build_report(tidy, table, store, compare=compare, uncertainty=uncertainty, values=values)
    except KdgridError as error:
        raise _with_sweep_hint(error, store) from error
    _warn_stale(store, set(tidy["trial_id"]) if "trial_id" in tidy.columns else None)
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


KINDS: tuple[str, ...] = ("best", "last")


def check_kind(kind: str) -> None:
    """Refuse a score kind that is neither ``best`` nor ``last`` (`ConfigError` naming both)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown --kind {kind!r}; allowed: {', '.join(KINDS)}")


def one_sweep(sweeps: list[str] | None) -> str | None:
    """The one ``--sweep`` given (None without); several are refused: a figure lays out one sweep (`kdgrid
    tables` compares two)."""
    if not sweeps:
        return None
    if len(sweeps) > 1:
        raise ConfigError(
            f"--sweep given {len(sweeps)} times ({', '.join(sweeps)}): a figure lays out one sweep; give one "
            "--sweep NAME (kdgrid tables --sweep A --sweep B compares two)"
        )
    return sweeps[0]


def _warn_stale(store: Path, shown: set[str] | None) -> None:
    """A warning on stderr naming the done trials (of ``shown``; None: of the store) whose teacher, another
    trial's student, no longer exists: their numbers are in the tables, but not as the current teacher's."""
    from kdgrid.store.stale_teachers import describe, read_stale_dependants

    stale = {t: why for t, why in read_stale_dependants(store).items() if shown is None or t in shown}
    if not stale:
        return
    console = Console(stderr=True)
    console.print(
        f"warning: {len(stale)} trial(s) in these tables learnt from a teacher that no longer exists "
        "(`kdgrid resume SWEEP --stale-dependants` trains them again):",
        markup=False,
        highlight=False,
    )
    for line in describe(stale):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def counts_of(resamples: int | None, test_resamples: int | None) -> dict[str, int]:
    """The bootstrap counts given (unset ones left to `kdgrid.analysis.stats`' defaults)."""
    counts = {"resamples": resamples, "test_resamples": test_resamples}
    return {name: count for name, count in counts.items() if count is not None}


def _compare_sweeps(
    table: str,
    store: Path,
    fmt: str,
    out: Path | None,
    kind: str,
    intervals: str,
    counts: dict[str, int],
    where: list[str] | None,
    sweeps: list[str],
    refused: dict[str, object],
    family: str,
    correction: str,
) -> None:
    """`kdgrid tables --sweep A --sweep B`: the shared cells side by side with the difference and its test, the
    cells only one ran listed (`kdgrid.analysis.sweep_compare`). Options that lay out one sweep's table are
    refused, naming the option."""
    from kdgrid.analysis.render import render, to_rich
    from kdgrid.analysis.sweep_compare import compared_sweeps
    from kdgrid.analysis.tables_report import UncertaintyOptions

    if table.strip().lower() != "all":
        raise ConfigError(f"give a paper table ({table}) or --sweep, not both")
    for option, given in refused.items():
        if given is not None:
            raise ConfigError(
                f"{option} lays out one sweep's table; two --sweep compare their shared cells (allowed with "
                "them: --store, --format, --out, --where, --kind, --intervals, --resamples, --test-resamples, "
                "--family, --correction)"
            )
    UncertaintyOptions(intervals, None, **counts, family=family, correction=correction).check()
    check_kind(kind)
    built = compared_sweeps(
        sweeps, store, kind=kind, where=where or (), intervals=intervals, family=family, correction=correction,
        **counts,
    )  # fmt: skip
    if intervals == "on" and not any(c.has_interval for b in built.view.blocks for c in b.cells.values()):
        raise KdgridError(
            f"--intervals on: no cell of {built.view.name} has an interval (one seed a side and no stored "
            "predictions); run two or more seeds, or drop --intervals on"
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(built.view, fmt))
        Console(stderr=True).print(f"wrote {built.view.name} to {out}", markup=False, highlight=False)
    elif fmt != "terminal":
        typer.echo(render(built.view, fmt), nl=False)
    else:
        console = Console() if sys.stdout.isatty() else Console(width=250)
        console.print(to_rich(built.view))


def _with_sweep_hint(error: KdgridError, store: Path) -> KdgridError:
    """``error`` (a store without trials of a paper table) with the sweeps the store does have, each of which
    `kdgrid tables --sweep NAME` lays out."""
    from kdgrid.analysis.sweep_tables import store_sweeps
    from kdgrid.store import read_store
    from kdgrid.store.membership import read_memberships

    if not store.exists():
        return error
    sweeps = store_sweeps(read_store(store), read_memberships(store, skip_bad=True))
    if not sweeps:
        return error
    return KdgridError(
        f"{error}. Any sweep gets its own table: kdgrid tables --sweep NAME (this store's sweeps: {', '.join(sweeps)})"
    )


def _sweep_tables(
    table: str,
    store: Path,
    fmt: str,
    compare: str | None,
    out: Path | None,
    kind: str,
    intervals: str,
    reference: str | None,
    counts: dict[str, int],
    where: list[str] | None,
    values: str,
    sweep: str,
    rows: str | None,
    cols: str | None,
    pairs: bool,
    summary: str | None = None,
    family: str = "condition",
    correction: str = "holm",
    test: str = "auto",
) -> None:
    """`kdgrid tables --sweep NAME`: the sweep's own table (`kdgrid.analysis.sweep_tables`), with
    ``summary``'s method-level summary (`kdgrid.analysis.method_summary`) among its notes. ``family`` and
    ``correction`` are honoured; ``test`` must be ``auto`` (one procedure for every number of the table)."""
    from kdgrid.analysis.render import render, to_rich
    from kdgrid.analysis.sweep_tables import sweep_table
    from kdgrid.analysis.tables_report import UncertaintyOptions

    if table.strip().lower() != "all":
        raise ConfigError(f"give a paper table ({table}) or --sweep {sweep}, not both")
    if compare is not None:
        _published_comparison(store, fmt, compare, out, kind, intervals, counts, where, values, sweep,
                              {"--rows": rows, "--cols": cols, "--pairs": pairs or None, "--summary": summary,
                               "--reference": reference,
                               # the published comparison tests nothing: a correction or test would be ignored
                               "--family": None if family == "condition" else family,
                               "--correction": None if correction == "holm" else correction,
                               "--test": None if test == "auto" else test})  # fmt: skip
        return
    if values != "score":
        raise ConfigError(
            f"--values {values}: a sweep's table shows scores only (allowed with --sweep: score)"
        )
    UncertaintyOptions(intervals, None, **counts, family=family, correction=correction, test=test).check()
    check_kind(kind)
    if test != "auto":
        raise ConfigError(
            f"--test {test}: a sweep's table gives every number (cells, means, pairs, differences) one procedure, "
            "t over seeds (one seed: the z-test on the bootstrap standard error); allowed with --sweep: auto"
        )
    built = sweep_table(
        store,
        sweep,
        kind=kind,
        where=where or (),
        rows=rows,
        cols=cols,
        reference=reference,
        intervals=intervals,
        pairs=pairs,
        family=family,
        correction=correction,
        **counts,
    )
    if summary is not None:
        built.view.notes.extend(_method_summary(store, sweep, kind, where or (), summary))
    _warn_stale(store, None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(built.view, fmt))
        Console(stderr=True).print(
            f"wrote the table of sweep {sweep} to {out}", markup=False, highlight=False
        )
    elif fmt != "terminal":
        typer.echo(render(built.view, fmt), nl=False)
    else:
        console = Console() if sys.stdout.isatty() else Console(width=250)
        console.print(to_rich(built.view))


def _published_comparison(
    store: Path,
    fmt: str,
    compare: str,
    out: Path | None,
    kind: str,
    intervals: str,
    counts: dict[str, int],
    where: list[str] | None,
    values: str,
    sweep: str,
    layout: dict[str, object],
) -> None:
    """`kdgrid tables --sweep NAME --compare paper` for a sweep whose paper's numbers are transcribed (ReAugKD's
    Tables 1 and 2, `kdgrid.analysis.reaugkd_tables`): each published number beside ours with our 95% interval,
    as the main paper's ``--compare paper`` prints them."""
    from kdgrid.analysis.reaugkd_tables import REAUGKD_SWEEP, store_views
    from kdgrid.analysis.render import render, to_rich
    from kdgrid.analysis.tables_report import UncertaintyOptions

    if compare != "paper":
        raise ConfigError(f"unknown --compare {compare!r}; allowed: paper")
    if sweep != REAUGKD_SWEEP:
        raise ConfigError(
            f"--compare paper: sweep {sweep!r} is not one of the paper's tables, it has no published numbers "
            f"(sweeps with them: {REAUGKD_SWEEP}; the paper's tables: kdgrid tables 1-8 --compare paper)"
        )
    for option, given in layout.items():
        if given is not None:
            raise ConfigError(
                f"{option} lays out a sweep's own table; --compare paper lays out the published tables of "
                f"{sweep}: give one or the other"
            )
    if values != "score":
        raise ConfigError(f"--values {values}: the published tables hold scores (allowed with --compare: score)")
    if kind != "best":
        raise ConfigError(
            f"--kind {kind}: the comparison reads each row's best-epoch scores, as the paper reports its best "
            "(allowed with --compare: best)"
        )
    UncertaintyOptions(intervals, None, **counts).check()
    views = store_views(
        store,
        sweep=sweep,
        where=where or (),
        intervals=intervals != "off",
        **({"resamples": counts["resamples"]} if "resamples" in counts else {}),
    )
    if intervals == "on" and not any(c.has_interval for v in views for b in v.blocks for c in b.cells.values()):
        raise KdgridError(
            f"--intervals on: no cell of sweep {sweep} in {store} has an interval (one seed per cell and no stored "
            "predictions); run two or more seeds, or drop --intervals on"
        )
    if out is not None or fmt != "terminal":
        texts = [render(view, fmt) for view in views]
        if fmt == "csv":  # one CSV, one header (both tables are compared: the same columns)
            texts = [texts[0], *(text.split("\n", 1)[1] for text in texts[1:])]
        text = ("" if fmt == "csv" else "\n").join(texts)
        if out is None:
            typer.echo(text, nl=False)
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        Console(stderr=True).print(
            f"wrote the comparison of sweep {sweep} with its paper to {out}", markup=False, highlight=False
        )
        return
    console = Console() if sys.stdout.isatty() else Console(width=250)
    for view in views:
        console.print(to_rich(view))
        console.print()


def _method_summary(store: Path, sweep: str, kind: str, where: list[str], text: str) -> list[str]:
    """The notes of ``--summary AXIS[=VALUE]`` for ``sweep``'s runs."""
    from kdgrid.analysis.method_summary import parse_summary, summarise_methods, summary_lines
    from kdgrid.analysis.sweep_tables import method_strata, sweep_runs
    from kdgrid.analysis.tables_report import filter_rows
    from kdgrid.store import read_store
    from kdgrid.store.membership import read_memberships

    axis, reference = parse_summary(text)
    runs = sweep_runs(
        filter_rows(read_store(store), where), read_memberships(store, skip_bad=True), sweep, kind
    )
    methods, seeds = method_strata(runs, axis)
    if reference is not None and reference not in methods:
        values = ", ".join(v or "none" for v in methods)
        raise ConfigError(f"--summary {text}: {reference!r} is not a value of {axis}; its values: {values}")
    return summary_lines(axis, reference, summarise_methods(methods, reference, seeds=seeds))


def figures(
    store: StoreOpt = Path("results"),
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for the PNG and PDF files (default: results/figures; with --sweep: NAME-figures)."
        ),
    ] = None,
    kind: KindOpt = "best",
    sweeps: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="This sweep's figures (docs/tables.md): a forest plot of each cell's difference from the "
            "reference, a heat map of the rows x columns coloured by that difference, with marks and intervals, and "
            "each cell's seeds overlaid (training loss by step, dev score by epoch).",
        ),
    ] = None,
    rows: Annotated[str | None, typer.Option(help="With --sweep: as `kdgrid tables --rows`.")] = None,
    cols: Annotated[str | None, typer.Option(help="With --sweep: as `kdgrid tables --cols`.")] = None,
    reference: Annotated[
        str | None, typer.Option(help="With --sweep: as `kdgrid tables --reference`.")
    ] = None,
) -> None:
    """Heat maps of knowledge x strategy, temperature x hard-label weight, score vs size, ours vs published; with
    --sweep, forest plots and heat maps of any sweep's table.

    Example: kdgrid figures --store results --out figs, or kdgrid figures --sweep my_study --out figs"""
    sweep = one_sweep(sweeps)
    if sweep is not None:
        from kdgrid.analysis.seed_curves import seed_curve_figures
        from kdgrid.analysis.sweep_figures import sweep_figures
        from kdgrid.analysis.sweep_tables import sweep_table

        check_kind(kind)
        folder = out or Path(f"{sweep}-figures")
        built = sweep_table(
            store, sweep, kind=kind, rows=rows, cols=cols, reference=reference, intervals="on"
        )
        written = sweep_figures(built, folder)
        if written and built.runs is not None:  # each cell's seeds overlaid, beside its difference
            written += seed_curve_figures(built.runs, store, folder)
        if not written:
            raise KdgridError(f"sweep {sweep!r} has no cell tested against a reference: nothing to plot")
        for path in written:
            typer.echo(str(path))
        typer.echo(f"{len(written)} file(s) in {folder}")
        return
    for option, given in (("--rows", rows), ("--cols", cols), ("--reference", reference)):
        if given is not None:
            raise ConfigError(f"{option} lays out a sweep's own figures: give it with --sweep NAME")
    out = out or Path("results/figures")
    from kdgrid.analysis.figures import write_store_figures

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
