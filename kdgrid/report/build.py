"""Writing a report folder from a store, and bringing it up to date: `ReportWriter`.

The folder (``--out``): ``index.html`` (overview and cost ledger), ``tables.html``, ``figures.html`` with
``figures/*.png|pdf``, ``explore.html`` and ``pivot.html`` (every sweep's configurations, `kdgrid.report.explore`),
``trials.html`` (the list; the tables page also sets sweeps that ran the same cells side by side,
`kdgrid.report.comparisons`), ``trials/<trial_id>.html``, ``failures.html``, ``assets/``,
and ``_report.json``: which store it shows and each trial page's fingerprint (its rows' ids), so an update
rewrites only the pages of trials with a new row (and the summary pages, whenever any row arrived). Every file of
an update is written under a temporary name first, and renamed into place only once all of them are written
(`kdgrid.report.staging`): a browser reloading a page never sees half of it, and a full disk leaves the folder as
the last update left it, never half old, half new.

Refused (`KdgridError`, exit status 2 in the CLI), before anything is written: an output folder inside the store
(the report never writes into the store), one that cannot be created or written, one that holds other files
than a report's. A store with no rows, or rows of a newer schema than this kdgrid reads, is refused by the read.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from kdgrid.analysis.figures import write_figures
from kdgrid.analysis.seed_curves import seed_curve_figures
from kdgrid.analysis.sweep_figures import sweep_figures
from kdgrid.analysis.sweep_pending import pending_fields, place_pending
from kdgrid.analysis.sweep_tables import (
    SweepTable,
    build_sweep_table,
    choose_layout,
    store_sweeps,
)
from kdgrid.analysis.tables import TableView
from kdgrid.analysis.tables_report import build_report
from kdgrid.analysis.tidy import declared_tables, legacy_table_of, membership_tables, store_to_tidy
from kdgrid.errors import KdgridError
from kdgrid.paper import TABLES
from kdgrid.report.comparisons import comparison_views
from kdgrid.report.configurations import ReportSweeps, report_sweeps
from kdgrid.report.explore import explore_page, pivot_page
from kdgrid.report.gather import ReportData, gather
from kdgrid.report.pages import failures_page, figures_page, overview_page, tables_page
from kdgrid.report.rows import StoreRows
from kdgrid.report.staging import ReportWriteError, StagedFiles
from kdgrid.report.static_files import asset_paths
from kdgrid.report.sweep_files import SweepFiles
from kdgrid.report.trial_intervals import TrialIntervals
from kdgrid.report.trial_list import trial_list_page
from kdgrid.report.trial_page import trial_fingerprints, trial_page, trial_page_name
from kdgrid.store.read import done_rows, scores_long
from kdgrid.store.stale_teachers import read_stale_dependants
from kdgrid.store.step_curves import read_step_curves

MANIFEST = "_report.json"
FIGURES_DIR = "figures"
COMPARE_CHOICES = ("paper", "none")


@dataclass
class ReportUpdate:
    """What one `ReportWriter.update` wrote."""

    changed: bool
    trial_pages: int = 0
    removed_pages: int = 0
    figures: int = 0
    tables: int = 0
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def trial_of_row(data: ReportData) -> dict[str, str]:
    """row id -> trial id of every row the report shows (how a table cell links to its trials' pages)."""
    return dict(zip(data.rows["row_id"].astype(str), data.rows["trial_id"].astype(str), strict=True))


def default_out(store: Path) -> Path:
    """Where a store's report goes unless told: beside the store, ``<store>-report`` (never inside it)."""
    store = Path(store)
    return store.parent / f"{store.name or store.resolve().name}-report"


def check_output(store: Path, out: Path, option: str = "--out") -> bool:
    """Refuse an output folder the report must not (or cannot) write; returns whether this call created it.

    Raises:
        KdgridError: ``out`` is the store or inside it; it is a file; it holds files but is not a report; it
            cannot be created or written. The message names ``out`` as the option ``option`` that gave it.
    """
    store_real, out_real = Path(store).resolve(), Path(out).resolve()
    if out_real == store_real or store_real in out_real.parents:
        raise KdgridError(
            f"{option} {out} is inside the store {store}: the report never writes into the store; pass a folder "
            f"outside it (e.g. {option} {store_real.parent / 'report'})"
        )
    if out.exists() and not out.is_dir():
        raise KdgridError(f"{option} {out} is a file; pass a folder for the report")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise KdgridError(
            f"{option} {out} holds other files and is not a kdgrid report (no {MANIFEST}); pass an empty or new folder"
        )
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-check-{uuid.uuid4().hex[:8]}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise KdgridError(
            f"cannot write the report into {out}: {error.strerror or error} (pass a writable folder with {option})"
        ) from error
    return created


class ReportWriter:
    """The report of ``store`` in ``out``; `update` writes what changed since the last call (everything first).

    Args:
        sweeps: only these sweeps' rows and memberships (names or sweep files); all when None.
        compare: ``paper`` puts the published number beside ours in the paper's tables; ``none`` does not.
        refresh_s: make the summary pages reload themselves every so many seconds (a watched report).
        figures: draw the figures (tests that do not look at them go without matplotlib's time).
        figures_every_s: draw them again at most this often (seconds) while watching: matplotlib is most of an
            update's time on a big store (30,000 rows: ~40 of ~60 s); the last update draws them regardless.
        option: the command-line option that named ``out``, for messages.
    """

    def __init__(
        self,
        store: Path,
        out: Path,
        *,
        sweeps: list[str] | None = None,
        compare: str = "paper",
        refresh_s: int | None = None,
        figures: bool = True,
        figures_every_s: float = 0.0,
        option: str = "--out",
    ) -> None:
        if compare not in COMPARE_CHOICES:
            raise KdgridError(f"unknown --compare {compare!r}; allowed: {', '.join(COMPARE_CHOICES)}")
        self.store, self.out = Path(store), Path(out)
        self._created_out = check_output(self.store, self.out, option)
        self.sweeps = sweeps
        self.compare = None if compare == "none" else compare
        self.refresh_s = refresh_s
        self.draw_figures = figures
        self.figures_every_s = figures_every_s
        self._figures_drawn_at = -math.inf
        self._created_at = time.perf_counter()  # the first update's time counts the store's first read
        self.rows = StoreRows(self.store)
        self._pages: dict[str, str] = self._load_manifest()
        self._figures_key: str | None = None
        self._figure_files: list[Path] = []
        self._sweep_tables: list[SweepTable] = []
        self._sweep_files = SweepFiles(sweeps)  # where a pending trial's cell is read from
        self._intervals = TrialIntervals(self.store)  # each row's interval once, however many updates
        self._figures_pending = False  # done rows arrived since the figures were last drawn
        self._written = False  # the first update writes every page (and the assets)
        self._failed = False  # the last update could not be written: the folder shows the one before

    def _load_manifest(self) -> dict[str, str]:
        try:
            manifest = json.loads((self.out / MANIFEST).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(manifest, dict) or manifest.get("store") != str(self.store.resolve()):
            return {}  # another store's report: every page is written again
        pages = manifest.get("trials")
        return dict(pages) if isinstance(pages, dict) else {}

    def update(self, *, final: bool = False) -> ReportUpdate:
        """`_update`; a first update that cannot write its files removes the folder it created (no partial
        report is left behind) and says so."""
        try:
            return self._update(final=final)
        except (ReportWriteError, OSError) as error:
            if self._written or not self._created_out:
                raise
            shutil.rmtree(self.out, ignore_errors=True)
            text = str(error) if isinstance(error, ReportWriteError) else f"cannot write the report: {error}"
            raise ReportWriteError(f"{text}; the partial report folder {self.out} was removed") from error

    def _update(self, *, final: bool = False) -> ReportUpdate:
        """Read the store's new rows; when there are any (or at the first call), write what they change.
        ``final``: the last update of a watch (figures drawn even if drawn less than ``figures_every_s`` ago).

        Raises:
            KdgridError: the store holds no rows (of the sweeps asked for), or rows of a newer schema.
        """
        first = not self._written
        started = self._created_at if first else time.perf_counter()
        changed = self.rows.refresh()
        if not (changed or first or self._failed or self._figures_due(final)):
            return ReportUpdate(changed=False)
        data = gather(self.store, self.rows.frame, self.sweeps)
        update = ReportUpdate(changed=True)
        staged = StagedFiles(self.out)
        try:
            self._write_trial_pages(data, update, staged)
            tidy = self._tidy(data)
            paper_views, missing, problem = self._tables(tidy, update)
            sweeps = report_sweeps(self.store, data.rows, data.memberships)
            sweep_views, sweep_problems = self._sweep_views(data, sweeps)
            views = [*paper_views, *sweep_views]
            update.tables = len(views)
            if sweep_problems:
                problem = "; ".join([*([problem] if problem else []), *sweep_problems])
            figures = self._figures(data, tidy, update, staged, final=final, views=paper_views)
            refresh = self.refresh_s
            comparisons, comparison_notes = comparison_views(sweeps.runs, sweeps.predictions)
            if comparison_notes:
                problem = "; ".join([*([problem] if problem else []), *comparison_notes])
            summary = {
                "index.html": overview_page(data, views, figures, refresh_s=refresh, stale=self._stale(data)),
                "tables.html": tables_page(
                    [*views, *comparisons], missing, problem, refresh_s=refresh, trial_of_row=trial_of_row(data)
                ),
                "figures.html": figures_page(
                    figures,
                    self.out,
                    refresh_s=refresh,
                    sweeps=sorted(set(data.rows["sweep"].dropna().astype(str))),
                ),
                "explore.html": explore_page(sweeps.configurations, sweeps.problems),
                "pivot.html": pivot_page(sweeps.configurations, sweeps.problems),
                "trials.html": trial_list_page(data, refresh_s=None, intervals=self._intervals.of(data)),
                "failures.html": failures_page(data, refresh_s=refresh),
            }
            for name, text in summary.items():
                update.files.append(staged.write(self.out / name, text))
            if first:
                for path, text in asset_paths(self.out).items():
                    update.files.append(staged.write(path, text))
            manifest = {"store": str(self.store.resolve()), "trials": self._pages}
            staged.write(self.out / MANIFEST, json.dumps(manifest, indent=0, sort_keys=True))
            staged.commit()
        except BaseException:
            staged.abort()
            self._pages = self._load_manifest()  # what the folder still shows
            self._figures_key = None
            self._failed = True  # the next update writes again, even if no row arrives
            raise
        self._written, self._failed = True, False
        update.seconds = time.perf_counter() - started
        return update

    def _stale(self, data: ReportData) -> dict[str, str]:
        """The report's trials whose teacher no longer exists (judged on the whole store: the teacher may be a
        trial of a sweep the report leaves out)."""
        shown = set(data.rows["trial_id"])
        return {trial_id: why for trial_id, why in read_stale_dependants(self.store).items() if trial_id in shown}

    def _figures_due(self, final: bool) -> bool:
        """Figures held back while watching are due: at the last update, or once ``figures_every_s`` passed."""
        elapsed = time.monotonic() - self._figures_drawn_at
        return self._figures_pending and (final or elapsed >= self.figures_every_s)

    def _write_trial_pages(self, data: ReportData, update: ReportUpdate, staged: StagedFiles) -> None:
        fingerprints = trial_fingerprints(data)
        for trial_id in list(self._pages):
            name = trial_page_name(trial_id)
            if trial_id not in fingerprints and name is not None:
                staged.remove(self.out / name)  # forgotten from the store (or another sweep asked)
                del self._pages[trial_id]
                update.removed_pages += 1
        due = [
            trial_id
            for trial_id, fingerprint in fingerprints.items()
            if (name := trial_page_name(trial_id)) is not None
            and not (self._pages.get(trial_id) == fingerprint and (self.out / name).is_file())
        ]
        # the deciding rows' step curves, in one read (a large column: `kdgrid.store.step_curves`)
        deciding = {trial_id: str(data.record(trial_id)["row_id"]) for trial_id in due}
        curves = read_step_curves(data.store, deciding.values()) if deciding else {}
        for trial_id in due:
            fingerprint = fingerprints[trial_id]
            name = trial_page_name(trial_id)
            assert name is not None
            staged.write(self.out / name, trial_page(data, trial_id, curves.get(deciding[trial_id])))
            self._pages[trial_id] = fingerprint
            update.trial_pages += 1

    def _tidy(self, data: ReportData) -> pd.DataFrame:
        rows = data.rows
        tables = membership_tables(data.memberships)
        declared = declared_tables(data.memberships)
        return store_to_tidy(
            rows, scores_long(rows), kind="best", table_trials=tables, declared=declared, tables=TABLES
        )

    def _tables(self, tidy: pd.DataFrame, update: ReportUpdate):
        """(views, tables asked for with no trials, why none could be laid out)."""
        try:
            report = build_report(tidy, "all", self.store, compare=self.compare)
        except KdgridError as error:
            return [], [], str(error)
        update.tables = len(report.views)
        return report.views, report.missing, None

    def _sweep_views(self, data: ReportData, sweeps: ReportSweeps) -> tuple[list[TableView], list[str]]:
        """The tables of the sweeps that count in no paper table (a user's own grid), laid out as
        ``kdgrid tables --sweep NAME`` lays them out by default (`kdgrid.analysis.sweep_tables`), from the runs
        and predictions ``sweeps`` read; and, per sweep that could not be laid out, why."""
        declared = declared_tables(data.memberships)
        studies: dict[str, set[str]] = {}
        for membership in data.memberships:
            studies.setdefault(membership.sweep, set()).update(membership.trials.values())
        for sweep, study in zip(data.rows["sweep"], data.rows["study"], strict=True):
            studies.setdefault(str(sweep), set()).add(str(study))
        views: list[TableView] = []
        problems: list[str] = []
        self._sweep_tables = []
        for sweep in store_sweeps(data.rows, data.memberships):
            if declared.get(sweep) or any(
                legacy_table_of(s, sweep) in TABLES for s in studies.get(sweep, {""})
            ):
                continue  # a paper table (or the demo's) shows it
            runs = sweeps.runs.get(sweep)
            if runs is None:  # it could not be read: `report_sweeps` says why
                problems.extend(p for p in sweeps.problems if p.startswith(f"sweep {sweep}: "))
                continue
            try:
                built = build_sweep_table(runs, choose_layout(runs.axes), sweeps.predictions)
                waiting = {t: study for (name, study), ids in data.pending.items() if name == sweep for t in ids}
                if waiting:
                    fields = pending_fields(
                        self._sweep_files.trials(sweep), waiting, "study" in runs.runs.columns
                    )
                    placed = place_pending(built, {t: fields.get(t) for t in sorted(waiting)})
                    built.view.notes.append(placed.note())
                self._sweep_tables.append(built)
                views.append(built.view)
            except KdgridError as error:
                problems.append(f"sweep {sweep}: {error}")
        return views, problems

    def _figures(
        self,
        data: ReportData,
        tidy: pd.DataFrame,
        update: ReportUpdate,
        staged: StagedFiles,
        *,
        final: bool,
        views: list[TableView],
    ) -> list[Path]:
        """The figures, drawn again only when a done row arrived, and then at most every ``figures_every_s``;
        the paper tables' heat maps from ``views`` (the tables page's, with their intervals and marks)."""
        if not self.draw_figures:
            return []
        done = done_rows(data.rows)["row_id"]
        key = ",".join(sorted(map(str, done)))
        if key == self._figures_key:
            self._figures_pending = False
            return self._figure_files
        now = time.monotonic()
        if not final and now - self._figures_drawn_at < self.figures_every_s:
            self._figures_pending = True
            return self._figure_files
        self._figures_key, self._figures_drawn_at, self._figures_pending = key, now, False
        folder = staged.folder()  # drawn aside, put in place with the rest of the update
        drawn = write_figures(tidy, folder, views=views) if len(done) else []
        for table in self._sweep_tables:  # a user's own sweep: its forest plots and heat maps, its seeds' curves
            drawn += sweep_figures(table, folder)
            if table.runs is not None:
                drawn += seed_curve_figures(table.runs, self.store, folder)
        self._figure_files = staged.adopt(drawn, folder, self.out / FIGURES_DIR)
        update.figures = len(self._figure_files)
        return self._figure_files
