"""The report's summary pages: the overview (states, time, the cost ledger), the paper tables, the figures, the
failures grouped by error type. Each function returns a whole page as text; `kdgrid.report.build` writes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.analysis.sweep_figures import figure_slug
from kdgrid.analysis.tables import TableView
from kdgrid.diagnosis import flag_names
from kdgrid.report.findings import Finding, table_findings
from kdgrid.report.gather import (
    FailureGroup,
    ReportData,
    StudyCounts,
    failure_groups,
    resume_command,
    study_counts,
    unique_counts,
)
from kdgrid.report.html import esc, page, table, text_of
from kdgrid.report.labels import degenerate_reasons, score_text, trial_title
from kdgrid.report.ledger import LedgerLine, cost_ledger
from kdgrid.report.table_html import TrialOfRow, table_html
from kdgrid.report.trial_page import trial_page_name
from kdgrid.store.step_curves import row_diagnosis

# Trials named per error type on the failures page; the trial list (filter ``error:TYPE``) has them all.
FAILURES_LISTED = 50
# Cells named per kind of finding on the overview; the Tables page has them all.
FINDINGS_LISTED = 10


def degenerate_trials(data: ReportData) -> list[str]:
    """The done trials whose rows record reasons to distrust their number, in id order."""
    done = data.trials.index[data.trials["state"] == "done"]
    return [str(t) for t in done if degenerate_reasons(data.record(str(t)))]


def diagnosed_trials(data: ReportData) -> dict[str, list[dict[str, str]]]:
    """The done trials the diagnosis of their curves flags (`kdgrid.diagnosis`), in id order, with the flags."""
    done = data.trials.index[data.trials["state"] == "done"]
    found = {str(t): row_diagnosis(data.record(str(t))) for t in done}
    return {t: flags for t, flags in found.items() if flags}


def diagnosis_html(data: ReportData) -> str:
    """The overview's diagnosis finding: how many done trials each failure mode flags, then the first few
    trials linked with their evidence; empty when none is flagged."""
    found = diagnosed_trials(data)
    if not found:
        return ""
    counts: dict[str, int] = {}
    for flags in found.values():
        for name in flag_names(flags):
            counts[name] = counts.get(name, 0) + 1
    done = int((data.trials["state"] == "done").sum())
    summary = ", ".join(f"{name.replace('_', ' ')} {count:,}" for name, count in counts.items())
    items = [
        f"<li>{_trial_link(trial_id)} <b>{esc(flag['flag'].replace('_', ' '))}</b>: {esc(flag['evidence'])}</li>"
        for trial_id, flags in found.items()
        for flag in flags
    ]
    more = len(items) - FINDINGS_LISTED
    tail = f'<li class="muted">and {more:,} more on the trial pages</li>' if more > 0 else ""
    return (
        f'<h3 class="diagnosis">Diagnosis of the curves: {len(found):,} of {done:,} done trials flagged '
        f"({esc(summary)})</h3><ul>{''.join(items[:FINDINGS_LISTED])}{tail}</ul>"
    )


def _trial_link(trial_id: str, depth_prefix: str = "") -> str:
    name = trial_page_name(trial_id)
    return f'<a href="{depth_prefix}{esc(name)}">{esc(trial_id)}</a>' if name else esc(trial_id)


def _generated(refresh_s: int | None) -> str:
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    live = f"; this page reloads every {refresh_s} s while the report is kept up to date" if refresh_s else ""
    return f'<p class="generated">generated {esc(when)}{esc(live)}</p>'


def _card(value: str, label: str, cls: str = "") -> str:
    return (
        f'<div class="card"><div class="big {cls}">{value}</div><div class="label">{esc(label)}</div></div>'
    )


def _progress_bar(line: StudyCounts) -> str:
    total = line.done + line.failed + line.pending
    if not total:
        return ""
    widths = {
        "done": line.done / total,
        "failed": line.failed / total,
        "running": line.running / total,
    }
    spans = "".join(f'<span class="{k}" style="width:{100 * v:.2f}%"></span>' for k, v in widths.items())
    return f'<span class="bar" title="{line.done} done, {line.failed} failed, {line.pending} pending">{spans}</span>'


def _hours(value: float) -> str:
    """Device or elapsed time given in hours, in the unit that reads best (h, min or s)."""
    if math.isnan(value):
        return "-"
    if value >= 1 or value == 0:
        return f"{value:,.2f} h"
    if value * 60 >= 1:
        return f"{value * 60:.1f} min"
    return f"{value * 3600:.1f} s"


def _ledger_table(lines: list[LedgerLine]) -> str:
    rows = []
    for line in lines:
        label = [esc(line.sweep), esc(line.study)] if line.sweep or line.study else ["<b>total</b>", ""]
        sharing = "-" if math.isnan(line.sharing) else f"{line.sharing:.1f}×"
        rows.append(
            [*label, str(line.rows), f"{line.forwards_run:,.0f}", f"{line.forwards_per_trial:,}",
             f"{line.forwards_saved:,.0f}", sharing, _hours(line.device_hours), _hours(line.hours_saved),
             str(line.rows_without_record)]
        )  # fmt: skip
    headers = ["sweep", "study", "rows", "teacher forwards run", "per-trial forwards", "forwards saved",
               "sharing", "device time spent", "device time saved", "rows without record"]  # fmt: skip
    return table(headers, rows, cls="ledger")


def overview_page(
    data: ReportData,
    views: list[TableView],
    figures: list[Path],
    *,
    refresh_s: int | None,
    stale: dict[str, str] | None = None,
) -> str:
    """The front page: totals, one line per sweep and study, the cost ledger, links to the other pages; first,
    the done trials whose teacher no longer exists (``stale``: id -> why, `kdgrid.store.stale_teachers`)."""
    lines = study_counts(data)
    ledger = cost_ledger(data.rows)
    total = ledger[-1]
    done, failed, pending, running = unique_counts(data)  # a trial two sweeps list counts once
    degenerate = len(degenerate_trials(data))
    pngs = sum(1 for f in figures if f.suffix == ".png")
    cards = "".join(
        [
            _card(f"{done:,}", "trials done", "state-done"),
            _card(f"{failed:,}", "trials failed", "state-failed" if failed else ""),
            _card(f"{degenerate:,}", "done but degenerate", "degenerate" if degenerate else ""),
            _card(f"{pending:,}", f"pending ({running:,} running)", "state-pending" if pending else ""),
            _card(_hours(total.device_hours), "device time spent"),
            _card(_hours(total.hours_saved), "device time saved by shared teacher passes"),
            _card(f"{len(views):,}", "tables with results"),
            _card(f"{pngs:,}", "figures drawn"),
        ]
    )
    study_rows = [
        [esc(line.sweep), esc(line.study), _progress_bar(line), str(line.done), str(line.failed),
         str(line.pending), str(line.running), str(line.attempts), _hours(line.device_hours),
         _hours(line.elapsed_hours)]
        for line in lines
    ]  # fmt: skip
    headers = ["sweep", "study", "progress", "done", "failed", "pending", "running", "rows",
               "device time", "elapsed"]  # fmt: skip
    body = (
        _generated(refresh_s)
        + f"<p>store <code>{esc(data.store)}</code></p>"
        + _stale_html(stale or {})
        + findings_html(views)
        + diagnosis_html(data)
        + f'<div class="cards">{cards}</div>'
        + "<h2>Sweeps and studies</h2>"
        + table(headers, study_rows, cls="overview")
        + "<p class=muted>pending: listed by a sweep that ran against this store, no row yet (running: with a live "
        "claim). device time: the rows' wall time summed (each row's share of its job); elapsed: first start to "
        "last end.</p>"
        + "<h2>Cost ledger: shared teacher passes</h2>"
        + _ledger_table(ledger)
        + "<p class=muted>A job's students share one teacher forward per batch. Per-trial forwards: what training "
        "each trial alone would have run; device time saved: the teacher time those extra forwards would have cost, "
        "from the rows' own timings. Rows without record: written before kdgrid recorded the teacher's share "
        "(they add nothing).</p>"
    )
    return page("Overview", body, current="index.html", refresh_s=refresh_s)


def _stale_html(stale: dict[str, str]) -> str:
    """The stale dependants, each linked to its trial page, with why: their rows are in the tables, but the
    teacher that produced them is not the one kept now."""
    if not stale:
        return ""
    items = "".join(
        f'<li><a href="trials/{esc(trial_id)}.html">{esc(trial_id)}</a>: {esc(why)}</li>'
        for trial_id, why in stale.items()
    )
    return (
        f"<h2>Stale dependants: {len(stale):,} trial(s) learnt from a teacher that no longer exists</h2>"
        f"<ul class=findings>{items}</ul><p class=muted>Their rows still count in the tables. "
        "<code>kdgrid resume SWEEP --stale-dependants</code> trains them again from the teacher kept now.</p>"
    )


def _finding_line(finding: Finding) -> str:
    interval = (
        ""
        if math.isnan(finding.ci_low)
        else f" [{score_text(finding.ci_low)}, {score_text(finding.ci_high)}]"
    )
    p_value = "" if math.isnan(finding.p_value) else f", adjusted p = {finding.p_value:.3g}"
    reasons = f" ({'; '.join(finding.degenerate)})" if finding.degenerate else ""
    return (
        f'<li><a href="tables.html#table-{esc(finding.table)}">{esc(finding.where)}</a>: '
        f"{score_text(finding.value)}{interval}{esc(p_value)}{esc(reasons)}</li>"
    )


def _finding_list(title: str, found: list[Finding], cls: str) -> str:
    if not found:
        return ""
    shown = "".join(_finding_line(f) for f in found[:FINDINGS_LISTED])
    more = len(found) - FINDINGS_LISTED
    tail = (
        f'<li class="muted">and {more:,} more on the <a href="tables.html">Tables</a> page</li>'
        if more > 0
        else ""
    )
    return f'<h3 class="{cls}">{esc(title)} ({len(found):,})</h3><ul>{shown}{tail}</ul>'


def findings_html(views: list[TableView]) -> str:
    """The overview's lead: what beats its reference by the tables' tests, what is worse, what is degenerate."""
    if not views:
        return ""
    found = table_findings(views)
    body = (
        _finding_list("Better than the reference", found.better, "better")
        + _finding_list("Worse than the reference", found.worse, "worse")
        + _finding_list(
            f"{DEGENERATE_MARK} Degenerate: the number is not evidence", found.degenerate, "degenerate"
        )
    )
    marked = [*found.better, *found.worse]
    one_seed = sum(f.n_seeds < 2 for f in marked)
    caveat = (
        f" {one_seed:,} of them are run-to-run (one seed): those marks compare one run with another and leave the "
        "variance between seeds out (the notes under each table say what each mark tests)."
        if one_seed
        else " Each compares methods over their seeds (the notes under each table say what each mark tests)."
    )
    if not found.tested:
        summary = "No cell of the tables could be tested against a reference (no stored predictions)."
    elif not marked:
        summary = (
            f"None of the {found.tested:,} cells tested differs from its reference by the tables' tests (adjusted "
            "for the number of cells in each family)."
        )
    else:
        summary = (
            f"{len(found.better):,} better and {len(found.worse):,} worse than their reference, of "
            f"{found.tested:,} cells tested (the tables' tests, adjusted for the number of cells in each family)."
            + caveat
        )
    return f'<section class="findings"><h2>Findings</h2><p>{esc(summary)}</p>{body}</section>'


def tables_page(
    views: list[TableView],
    missing: list[str],
    problem: str | None,
    *,
    refresh_s: int | None,
    trial_of_row: TrialOfRow | None = None,
) -> str:
    """Every paper table the store fills (compared with the published numbers where the report was asked to);
    with ``trial_of_row``, each number links to the trial page(s) of its run(s)."""
    contents = "".join(f'<li><a href="#table-{esc(v.name)}">{esc(v.title)}</a></li>' for v in views)
    body = _generated(refresh_s)
    if problem:
        body += f'<p class="muted">{esc(problem)}</p>'
    if views:
        body += f"<ul>{contents}</ul>" + "".join(
            table_html(v, f"table-{v.name}", trial_of_row) for v in views
        )
    if missing:
        labels = ", ".join("the demo table" if n == "demo" else f"Table {n}" for n in missing)
        body += f'<p class="muted">no trials in this store for {esc(labels)}.</p>'
    return page("Tables", body, current="tables.html", refresh_s=refresh_s)


SWEEP_FIGURE_KINDS = {"forest": "forest plot", "heatmap": "heat map", "seedcurves": "the seeds of each cell"}


def figure_title(stem: str, sweeps: Iterable[str] = ()) -> str:
    """The heading of a figure file (`kdgrid.analysis.figures` names them ``table<name>_<what>``), in words:
    ``table5_mrpc_knowledge_x_strategy`` -> ``Table 5: mrpc, knowledge × strategy``; a sweep's
    ``my-study_heatmap_1_sst2`` -> ``Sweep my-study: heat map, sst2``."""
    head, _, rest = stem.partition("_")
    kind, _, where = rest.partition("_")
    if kind in SWEEP_FIGURE_KINDS:  # `kdgrid.analysis.sweep_figures`: <sweep>_<kind>_<n>_<block>
        _, _, block = where.partition("_")
        named = {figure_slug(name): name for name in sweeps}  # the file name's slug back to the sweep's name
        return f"Sweep {named.get(head, head)}: {SWEEP_FIGURE_KINDS[kind]}, {block.replace('-', ' ')}"
    if not head.startswith("table"):
        return stem.replace("_", " ")
    name = head[len("table") :]
    label = "The demo table" if name == "demo" else f"Table {name}"
    words = rest.split("_")
    described = f"{words[0]}, {' '.join(words[1:])}" if len(words) > 1 else " ".join(words)
    described = described.replace(" x ", " × ")
    return f"{label}: {described}" if described else label


def figures_page(
    figures: list[Path], out: Path, *, refresh_s: int | None, sweeps: Iterable[str] = ()
) -> str:
    """The PNG figures `kdgrid figures` draws, each with a link to its PDF; a sweep's figures headed by the
    sweep's name as written (``sweeps``: the names of the store's sweeps)."""
    body = _generated(refresh_s)
    pngs = [f for f in figures if f.suffix == ".png"]
    if not pngs:
        body += "<p class=muted>nothing a figure is drawn from yet (tables 2, 4, 5, 6, 8 or the demo).</p>"
    for figure in pngs:
        relative = figure.relative_to(out).as_posix()
        pdf = figure.with_suffix(".pdf")
        link = f'<p><a href="{esc(pdf.relative_to(out).as_posix())}">PDF</a></p>' if pdf in figures else ""
        title = figure_title(figure.stem, sweeps)
        body += (
            f'<section class="figures"><h2>{esc(title)}</h2>'
            f'<img src="{esc(relative)}" alt="{esc(title)}">{link}</section>'
        )
    return page("Figures", body, current="figures.html", refresh_s=refresh_s)


def _failure_section(data: ReportData, group: FailureGroup) -> str:
    rows = []
    for trial_id in group.trial_ids[:FAILURES_LISTED]:
        row = data.record(trial_id)
        name = trial_page_name(trial_id)
        link = f'<a href="{esc(name)}">{esc(trial_id)}</a>' if name else esc(trial_id)
        message = row.get("error_message")
        message = message if isinstance(message, str) else ""
        short = message if len(message) <= 300 else message[:300] + "…"
        rows.append(
            [
                link,
                esc(text_of(row.get("sweep"))),
                esc(text_of(row.get("study"))),
                str(int(row["failures"])),
                esc(short),
            ]
        )
    more = len(group.trial_ids) - FAILURES_LISTED
    tail = (
        f'<p class=muted>and {more:,} more: <a href="trials.html?q=error:{esc(group.error_type)}">in the trial '
        "list</a></p>"
        if more > 0
        else ""
    )
    commands = "".join(
        f'<li><code class="cmd">{esc(resume_command(sweep, data.store))}</code></li>'
        for sweep in group.sweeps
    )
    return (
        f"<h2>{esc(group.error_type)} · {len(group.trial_ids):,} trial(s)</h2>"
        + table(["trial", "sweep", "study", "failed attempts", "error"], rows, cls="failures")
        + tail
        + "<p>retry them (resume reruns failed trials up to <code>--max-attempts</code> failed rows each):</p>"
        f"<ul>{commands}</ul>"
    )


def _degenerate_section(data: ReportData) -> str:
    """The done trials whose number is not evidence (constant predictions, majority class, MCC <= 0)."""
    found = degenerate_trials(data)
    if not found:
        return ""
    rows = []
    for trial_id in found:
        row = data.record(trial_id)
        rows.append([_trial_link(trial_id), esc(trial_title(row)), esc("; ".join(degenerate_reasons(row)))])
    return (
        f'<h2 class="degenerate">{DEGENERATE_MARK} Degenerate students · {len(found):,} trial(s)</h2>'
        "<p>Done, but their numbers are not evidence of anything: a rerun with another seed or learning rate, "
        "not a resume, is what changes them.</p>" + table(["trial", "settings", "why"], rows, cls="failures")
    )


def failures_page(data: ReportData, *, refresh_s: int | None) -> str:
    """The failed trials grouped by error type, each group with its trials and the command that retries them."""
    groups = failure_groups(data)
    body = _generated(refresh_s)
    if not groups:
        body += "<p>No failed trial: every trial with a row is done.</p>"
    body += "".join(_failure_section(data, group) for group in groups)
    body += _degenerate_section(data)
    return page("Failures", body, current="failures.html", refresh_s=refresh_s)
