"""What `kdgrid tables` and `kdgrid demo` print: read a store, lay out the tables asked for, compare, render.

Kept apart from the command module so that `kdgrid demo` and tests call the same code as the CLI. Which
tables a trial counts in comes from the store alone (its rows and the sweep memberships recorded when its sweeps
ran), so this works from an installed package as from a checkout.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import attach_uncertainty, check_choices, parse_reference
from kdgrid.analysis.compare import compare_with_paper
from kdgrid.analysis.render import check_format, render, to_rich
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.seed_power import seeds_needed_notes
from kdgrid.analysis.significant_conclusions import significant_claim_notes
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.analysis.tables import (
    TABLE_CHOICES,
    Block,
    Cell,
    Column,
    TableView,
    build_view,
    get_spec,
    mark_best,
    tables_in,
)
from kdgrid.analysis.tables_conclusions import claim_notes
from kdgrid.analysis.tidy import declared_tables, knowledge_label, membership_tables, store_to_tidy
from kdgrid.bundled_sweeps import bundled_sweep_files
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.paper import PAPER_TABLES
from kdgrid.predictions import TrialPredictions
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


def _matches(value: object, wanted: str) -> bool:
    """A store value equals a ``--where`` value: as numbers where both are, else as text (lists as ``a+b``)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return knowledge_label(list(value)) == knowledge_label(wanted)
    try:
        return float(value) == float(wanted)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value) == wanted


def filter_rows(store_df: pd.DataFrame, where: Iterable[str]) -> pd.DataFrame:
    """The rows of ``store_df`` whose trial fields have the values ``where`` gives (``["lr=0.001", ...]``);
    a trial option is named by its name (``data_seed=3``). Rows are selected for the analysis, never changed.

    Raises:
        ConfigError: a condition without ``=``, or a field that is neither a store column nor a trial option.
    """
    out = store_df
    for condition in where:
        name, sep, wanted = condition.partition("=")
        name, wanted = name.strip(), wanted.strip()
        if not sep or not name:
            raise ConfigError(f"--where takes FIELD=VALUE (e.g. lr=0.001), got {condition!r}")
        if name in out.columns:
            values = list(out[name])
        elif "trial_json" in out.columns:
            values = [
                json.loads(t).get("options", {}).get(name) if isinstance(t, str) else None
                for t in out["trial_json"]
            ]
            if all(v is None for v in values) and len(out):
                raise ConfigError(f"--where {condition}: the store has no trial field or option {name!r}")
        else:
            raise ConfigError(f"--where {condition}: the store has no column {name!r}")
        out = out[[_matches(v, wanted) for v in values]]
    return out


def load_tidy(store_dir: Path, kind: str = "best", where: Iterable[str] = ()) -> pd.DataFrame:
    """The store at ``store_dir`` in the tidy format, seeds aggregated (`kdgrid.analysis.tidy.store_to_tidy`); a trial
    counts in every table whose sweep lists it, as the sweeps' memberships recorded in the store say
    (`kdgrid.analysis.tidy.membership_tables`; a store written before memberships were recorded falls back to each
    row's own study and sweep). No sweep file is read. ``where``: keep only rows with these trial field values
    (`filter_rows`)."""
    store_dir = Path(store_dir)
    if not store_dir.exists():
        raise KdgridError(f"no results store at {store_dir} (run a sweep first, or pass --store DIR)")
    store_df = filter_rows(read_store(store_dir), where)
    if store_df.empty:
        return store_to_tidy(
            store_df, pd.DataFrame(columns=["trial_id", "dev_set", "metric", "value", "kind"])
        )
    memberships = read_memberships(store_dir, skip_bad=True)
    return store_to_tidy(
        store_df,
        scores_long(store_df),
        kind=kind,
        table_trials=membership_tables(memberships),
        declared=declared_tables(memberships),
        tables=TABLE_CHOICES,
    )


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


INTERVAL_MODES: tuple[str, ...] = ("auto", "on", "off")
VALUE_KINDS: tuple[str, ...] = ("score", "agreement")


@dataclass(frozen=True)
class UncertaintyOptions:
    """How cells get intervals and tests (`kdgrid.analysis.cell_stats`).

    ``intervals``: ``auto`` where the rows carry predictions, ``on`` (a store with none is refused), ``off``.
    ``reference``: `kdgrid.analysis.cell_stats.parse_reference`'s text (None: soft labels only). ``resamples`` and
    ``test_resamples``: bootstrap resamples of an interval and of a paired test; ``seed``: the bootstrap's.
    ``family``, ``correction``, ``test``: `kdgrid.analysis.cell_stats.attach_uncertainty`'s. ``kind``: the score kind
    the values are (``last`` has no predictions of its own epoch, so it gets no intervals: refused with ``on``)."""

    intervals: str = "auto"
    reference: str | None = None
    resamples: int = stats.DEFAULT_RESAMPLES
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES
    seed: int = 0
    family: str = "condition"
    correction: str = "holm"
    test: str = "auto"
    kind: str = "best"

    def check(self) -> None:
        """Refuse bad settings before any store is read."""
        if self.intervals not in INTERVAL_MODES:
            raise ConfigError(f"unknown --intervals {self.intervals!r}; allowed: {', '.join(INTERVAL_MODES)}")
        check_choices(self.family, self.correction, self.test)
        if self.kind == "last" and self.intervals == "on":
            raise ConfigError(
                "--kind last with --intervals on: the store keeps per-example predictions of the best epoch only, "
                "so an interval or test would be another epoch's than the value printed; use --kind best, or "
                "--intervals off (or auto: the values without intervals)"
            )
        for name, count in (("--resamples", self.resamples), ("--test-resamples", self.test_resamples)):
            if count < 1:
                raise ConfigError(
                    f"{name} must be at least 1 (1,000 or more for a 95% interval), got {count}"
                )
        parse_reference(self.reference)


PredictionsLoader = Callable[[Path, Iterable[str]], Mapping[str, TrialPredictions]]


def _cell_row_ids(views: Iterable[TableView]) -> set[str]:
    return {
        row_id
        for view in views
        for block in view.blocks
        for cell in block.cells.values()
        for row_id in cell.row_ids
    }


def _agreement_column(column: Column) -> Column:
    """A column that says ``score`` (the demo's baselines) says ``agreement`` in the agreement view."""
    return dataclasses.replace(column, label=AGREEMENT_COLUMN) if column.label == SCORE_COLUMN else column


SCORE_COLUMN, AGREEMENT_COLUMN = "score", "agreement"


def agreement_view(view: TableView) -> TableView:
    """The same layout with each cell's student-teacher agreement (top-1 agreement; correlation for regression)
    instead of its score; cells without a recorded agreement are missing."""
    blocks = []
    for block in view.blocks:
        cells = {
            (row, _agreement_column(column)): dataclasses.replace(
                Cell(value=cell.teacher_agreement, n_seeds=cell.n_seeds, degenerate=cell.degenerate),
                row_ids=cell.row_ids,
                trial_ids=cell.trial_ids,
                config=cell.config,
            )
            for (row, column), cell in block.cells.items()
            if not column.fact
        }
        columns = [_agreement_column(c) for c in block.columns if not c.fact]
        blocks.append(Block(block.title, list(block.rows), columns, cells))
    out = TableView(
        view.name, view.title + " — student-teacher agreement on dev", blocks, side_by_side=view.side_by_side
    )
    mark_best(out, get_spec(view.name).bold)
    out.notes.append(
        "agreement: the share of dev examples where the student predicts the teacher's class "
        "(Pearson correlation with the teacher's scores for regression), mean over seeds"
    )
    return out


def _attach_statistics(
    views: list[TableView],
    tidy: pd.DataFrame,
    store_dir: Path,
    uncertainty: UncertaintyOptions,
    load: PredictionsLoader,
) -> None:
    """Intervals, tests and the significance-counting claims on each view, in place. Predictions are read one
    table at a time (with Table 5's for Table 8's claims), so memory holds one table's, not the store's."""
    reference = parse_reference(uncertainty.reference)
    found = False
    for view in views:
        table5 = build_view(get_spec("5"), tidy) if view.name == "8" and "5" in tables_in(tidy) else None
        predictions = load(store_dir, _cell_row_ids([view, *([table5] if table5 else [])]))
        found = found or bool(predictions)
        bank = ReplicateBank(uncertainty.test_resamples, uncertainty.seed)  # the tests' and the claims'
        summary = attach_uncertainty(
            view,
            predictions,
            reference=reference,
            resamples=uncertainty.resamples,
            test_resamples=uncertainty.test_resamples,
            seed=uncertainty.seed,
            test_bank=bank,
            family=uncertainty.family,
            correction=uncertainty.correction,
            test=uncertainty.test,
        )
        view.notes.extend(summary.notes)
        view.notes.extend(seeds_needed_notes(view))  # where cells ran >= 2 seeds: the measured seed variance
        view.notes.extend(
            significant_claim_notes(
                view.name,
                view,
                predictions,
                table5=table5,
                resamples=uncertainty.test_resamples,
                seed=uncertainty.seed,
                bank=bank,
                correction=uncertainty.correction,
            )
        )
    if uncertainty.intervals == "on" and not found:
        raise KdgridError(
            f"the store {store_dir} has no per-example predictions for these tables: its rows are of row "
            "schema version 1 (written before kdgrid kept predictions), so no interval can be computed. "
            "Rerun the trials with this kdgrid, or drop --intervals on"
        )


def build_report(
    tidy: pd.DataFrame,
    which: str,
    store_dir: Path,
    *,
    compare: str | None = None,
    uncertainty: UncertaintyOptions | None = None,
    values: str = "score",
    load: PredictionsLoader = load_predictions,
) -> Report:
    """Lay out the tables ``which`` names from ``tidy``; intervals and tests where the store's rows carry
    predictions (``uncertainty``; none: ``auto`` with the defaults); compare with the paper where asked;
    ``values="agreement"`` shows student-teacher agreement instead of scores.

    A single table the store holds nothing of raises a `KdgridError` naming its sweep; with ``all``, the tables
    present are laid out and the others listed (an error only if none is present). Intervals asked for (``on``)
    of a store whose rows carry no predictions are refused (`KdgridError`)."""
    if compare not in (None, "paper"):
        raise ConfigError(f"unknown --compare {compare!r}; allowed: paper")
    if values not in VALUE_KINDS:
        raise ConfigError(f"unknown --values {values!r}; allowed: {', '.join(VALUE_KINDS)}")
    if values == "agreement" and compare is not None:
        raise ConfigError(
            "--values agreement shows no scores, so there is nothing to --compare with the paper"
        )
    uncertainty = uncertainty or UncertaintyOptions()
    uncertainty.check()
    names = table_names(which)
    if compare == "paper" and len(names) == 1 and names[0] not in PAPER_TABLES:
        raise ConfigError(
            f"--compare paper: table {names[0]} is not one of the paper's, it has no published numbers "
            f"(tables with them: {', '.join(PAPER_TABLES)})"
        )
    present = set(tables_in(tidy))
    views, missing = [], []
    for name in names:
        if name not in present:
            missing.append(name)
            continue
        view = build_view(get_spec(name), tidy)
        view.notes.extend(claim_notes(name, tidy))
        views.append(view)
    if uncertainty.intervals != "off" and values == "score" and views:
        if uncertainty.kind == "last":  # the stored predictions are the best epoch's: never mix epochs
            for view in views:
                view.notes.append(
                    "no intervals or tests: the values are the last epoch's and the store keeps per-example "
                    "predictions of the best epoch only (--kind best has them)"
                )
        else:
            _attach_statistics(views, tidy, store_dir, uncertainty, load)
    if values == "agreement":
        views = [agreement_view(view) for view in views]
    if compare == "paper":
        views = [compare_with_paper(view) if view.name in PAPER_TABLES else view for view in views]
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
    (view,) = build_report(
        tidy, "demo", store_dir
    ).views  # intervals and tests where the rows carry predictions
    return to_rich(view)
