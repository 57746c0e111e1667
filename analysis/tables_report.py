"""What `kdgrid tables` and `kdgrid demo` print: read a store, lay out the tables asked for, compare, render.

Kept apart from the command module so that `kdgrid demo` and tests call the same code as the CLI. Which
tables a trial counts in comes from the store alone (its rows and the sweep memberships recorded when its sweeps
ran), so this works from an installed package as from a checkout.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.compare import compare_with_paper
from analysis.render import check_format, render, to_rich
from analysis.tables import PAPER_TABLES, TABLE_CHOICES, TableView, build_view, get_spec, tables_in
from analysis.tables_claims import claim_notes
from analysis.tidy import membership_tables, store_to_tidy
from kdgrid.bundled_sweeps import bundled_sweep_files
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.store import read_store, scores_long
from kdgrid.store.membership import read_memberships


def sweep_files(name: str) -> list[str]:
    """The sweep file(s) producing table ``name`` (``sweeps/table5_*.yaml``) among those shipped with kdgrid,
    or the pattern if none is; only for the hints in messages."""
    pattern = get_spec(name).sweep
    return [f"sweeps/{path.name}" for path in bundled_sweep_files(pattern)] or [f"sweeps/{pattern}"]


def missing_table_error(name: str, store_dir: Path) -> KdgridError:
    sweeps = sweep_files(name)
    label = "the demo table" if name == "demo" else f"Table {name}"
    return KdgridError(
        f"the store {store_dir} holds no trials of {label}; they come from {' or '.join(sweeps)} "
        f"(run `kdgrid run {sweeps[0]} --store {store_dir}`)"
    )


def load_tidy(store_dir: Path, kind: str = "best") -> pd.DataFrame:
    """The store at ``store_dir`` in the tidy format, seeds aggregated (`analysis.tidy.store_to_tidy`); a trial
    counts in every table whose sweep lists it, as the sweeps' memberships recorded in the store say
    (`analysis.tidy.membership_tables`; a store written before memberships were recorded falls back to each
    row's own study and sweep). No sweep file is read."""
    store_dir = Path(store_dir)
    if not store_dir.exists():
        raise KdgridError(f"no results store at {store_dir} (run a sweep first, or pass --store DIR)")
    store_df = read_store(store_dir)
    if store_df.empty:
        return store_to_tidy(
            store_df, pd.DataFrame(columns=["trial_id", "dev_set", "metric", "value", "kind"])
        )
    tables = membership_tables(read_memberships(store_dir))
    return store_to_tidy(store_df, scores_long(store_df), kind=kind, table_trials=tables)


def table_names(which: str) -> list[str]:
    """``"all"`` -> every table (1-8, demo); ``"5"``/``"table5"``/``"demo"`` -> that one."""
    if which.strip().lower() == "all":
        return list(TABLE_CHOICES)
    return [get_spec(which).name]


@dataclass
class Report:
    """The tables laid out from a store, and what was asked for but had no trials."""

    views: list[TableView]
    missing: list[str]


def build_report(tidy: pd.DataFrame, which: str, store_dir: Path, *, compare: str | None = None) -> Report:
    """Lay out the tables ``which`` names from ``tidy``; compare with the paper where asked.

    A single table the store holds nothing of raises a `KdgridError` naming its sweep; with ``all``, the tables
    present are laid out and the others listed (an error only if none is present)."""
    if compare not in (None, "paper"):
        raise ConfigError(f"unknown --compare {compare!r}; allowed: paper")
    names = table_names(which)
    present = set(tables_in(tidy))
    views, missing = [], []
    for name in names:
        if name not in present:
            missing.append(name)
            continue
        view = build_view(get_spec(name), tidy)
        view.notes.extend(claim_notes(name, tidy))
        if compare == "paper" and name in PAPER_TABLES:
            view = compare_with_paper(view)
        views.append(view)
    if not views:
        if len(names) == 1:
            raise missing_table_error(names[0], store_dir)
        sweeps = ", ".join(sweep_files(n)[0] for n in names)
        raise KdgridError(f"the store {store_dir} holds no trials of any table; the sweeps are {sweeps}")
    return Report(views, missing)


def render_report(report: Report, fmt: str, store_dir: Path) -> str:
    """All views of ``report`` in ``fmt``, then (except in CSV) a line per table that had no trials."""
    check_format(fmt)
    views = report.views
    if fmt == "csv" and any(view.compared for view in views):
        # One CSV has one header: give uncompared views (the demo) the empty paper/diff columns too.
        views = [dataclasses.replace(view, compared=True) for view in views]
    texts = [render(view, fmt) for view in views]
    if fmt == "csv":
        head, *rest = texts
        return head + "".join(text.split("\n", 1)[1] for text in rest)
    tail = [
        f"no trials of {'the demo table' if n == 'demo' else 'Table ' + n} in {store_dir} "
        f"(sweep: {sweep_files(n)[0]})"
        for n in report.missing
    ]
    comment = {"latex": "% ", "markdown": "> "}.get(fmt, "")
    return "\n".join([*texts, *(comment + line for line in tail)]) + ("\n" if tail else "")


def demo_table(store_dir: Path | str, kind: str = "best"):  # -> rich renderable
    """The demo study's table (knowledge x strategy for bert-tiny on polarity, with the soft-label-only and
    hard-label-only baselines beside it) as a rich renderable, for `kdgrid demo` to print."""
    store_dir = Path(store_dir)
    tidy = load_tidy(store_dir, kind)
    if "demo" not in tables_in(tidy):
        raise missing_table_error("demo", store_dir)
    return to_rich(build_view(get_spec("demo"), tidy))
