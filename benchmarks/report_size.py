"""How long `kdgrid report` takes on a 30,000-trial store, how big the report is, and how fast its trial list is
in a browser.

    .venv/bin/python benchmarks/report_size.py [--rows 30000] [--arrivals 100] [--json PATH] [--quick | --smoke]

The synthetic store: Table 5's grid (10 knowledge types x 5 strategies x 3 students x 8 tasks) over as many seeds
as ``--rows`` needs, every row realistic (scores, a 3-epoch curve with loss terms, weights, layer pairs, the
teacher's share), one in 50 failed with a traceback. Rows are built with the store's own `result_row` and written
as compacted parts (the shape of a big store after `kdgrid store compact`; writing 30,000 loose files alone takes
minutes). Then ``--arrivals`` loose rows are written with `write_result`, as workers write them. Measured:

- ``full``: the first `ReportWriter.update` (every trial page, the list, overview, tables, figures), in seconds;
- ``arrivals``: the update after the arrivals, as `--watch` makes it (their trial pages, the summary pages and
  the list; the figures held back, drawn at most every `FIGURES_EVERY_S`);
- ``idle``: an update when nothing arrived (the cost of one `--watch` poll);
- ``final``: the last update of a watch (the figures drawn again);
- sizes: the report folder, ``trials.html`` (its JSON blob), the largest trial page;
- in headless Chromium, when installed: ``trials.html`` opened (JSON parsed, first 200 rows drawn: ``ready``
  ms since navigation), a filter over every row (``state:failed``: ``filter`` ms), both read from the page's own
  ``performance.now()`` marks; the same for ``explore.html`` (opened: every configuration drawn; brushed: a
  categorical axis and a score range) and ``pivot.html`` (opened; other rows and columns, an axis fixed, a
  reference's marks), with what each counted;
- ``targets``: at 30,000 trials each explore and pivot view ready in under 2 s and filtered in under 200 ms, the
  build under 90 s, every configuration counted (``--check``: exit 1 when one is missed);
- ``configurations_s``: the explore and pivot pages' numbers alone (`report_configurations`: every
  configuration's interval and its tests against each reference offered), part of ``full``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kdgrid.core.teacher.share import record_teacher_pass
from kdgrid.paper import PAPER_KNOWLEDGE, PAPER_STRATEGIES
from kdgrid.report.build import ReportWriter
from kdgrid.report.configurations import report_configurations
from kdgrid.report.watch import FIGURES_EVERY_S
from kdgrid.result import TrialResult
from kdgrid.store import layout, write_result
from kdgrid.store.compact import new_part_path
from kdgrid.store.membership import read_memberships
from kdgrid.store.schema import SCHEMA
from kdgrid.store.write import result_row
from kdgrid.trial import Trial

TASKS = ("mnli", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte")
STUDENTS = ("bert-tiny", "bert-mini", "bert-small")
PART_ROWS = 5000
FAIL_EVERY = 50


def synthetic_result(index: int) -> TrialResult:
    grid = len(PAPER_KNOWLEDGE) * len(PAPER_STRATEGIES) * len(STUDENTS) * len(TASKS)
    seed, cell = divmod(index, grid)
    cell, task = divmod(cell, len(TASKS))
    cell, student = divmod(cell, len(STUDENTS))
    knowledge, strategy = divmod(cell, len(PAPER_STRATEGIES))
    trial = Trial(task=TASKS[task], teacher="bert-base", student=STUDENTS[student],
                  knowledge=(PAPER_KNOWLEDGE[knowledge],), strategy=PAPER_STRATEGIES[strategy], seed=seed)  # fmt: skip
    metric = "pearson" if trial.task == "stsb" else "accuracy"
    times = {"wall_time_s": 600.0 + index % 97, "device": "cuda:0", "started_at": "2026-01-01T00:00:00+00:00",
             "ended_at": "2026-01-01T00:10:00+00:00"}  # fmt: skip
    if index % FAIL_EVERY == FAIL_EVERY - 1:
        return TrialResult(trial=trial, status="failed", error_type=("DivergenceError", "OutOfMemoryError")[index % 2],
                           error_message=f"loss is nan at step {index}", traceback="Traceback ...\n" * 20, **times)  # fmt: skip
    score = 0.6 + (index * 7919 % 1000) / 4000
    scores = {"validation": {metric: score}}
    term = f"{trial.knowledge[0]}@4-12"
    curve = [{"epoch": e, "scores": {"validation": {metric: score - 0.05 / e}},
              "loss_terms": {"soft": 1.0 / e, "hard": 0.5 / e, term: 0.1 / e}} for e in (1, 2, 3)]  # fmt: skip
    extra: dict[str, Any] = {"steps_per_epoch": 100}
    for _ in range(3):
        record_teacher_pass(extra, 0.05, 50)
    return TrialResult(trial=trial, status="done", scores=scores, last_scores=scores, best_epoch=3, curve=curve,
                       loss_terms={"soft": 0.3, "hard": 0.2, term: 0.05}, weights={"soft": 0.9, "hard": 0.1, term: 1.0},
                       layer_pairs=[(4, 12)], extra=extra, **times)  # fmt: skip


def write_store(store: Path, rows: int) -> float:
    started = time.perf_counter()
    layout.compacted_dir(store).mkdir(parents=True, exist_ok=True)
    for start in range(0, rows, PART_ROWS):
        batch = [result_row(synthetic_result(i), sweep="table5_single_match", study="table5")
                 for i in range(start, min(rows, start + PART_ROWS))]  # fmt: skip
        pq.write_table(pa.Table.from_pylist(batch, schema=SCHEMA), new_part_path(store), compression="zstd")
    return time.perf_counter() - started


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def browser_marks(
    page: Path, query: str = "", fragment: str = "", count_id: str = ""
) -> dict[str, Any] | None:
    """A page's own timing marks after Chromium loaded ``page`` (None without Chromium): ``ready`` ms since
    navigation (data parsed, filtered, drawn), ``filter`` ms of its last filter, ``draw`` ms of its last draw;
    with ``count_id``, the text of that element (what the page counted)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return None
    url = page.resolve().as_uri() + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")
    started = time.perf_counter()
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    wall = time.perf_counter() - started
    marks = dict(re.findall(r'data-(draw|ready|filter)-ms="([0-9.]+)"', done.stdout))
    found: dict[str, Any] = {"wall_s": round(wall, 2), **{k: float(v) for k, v in marks.items()}}
    if count_id:
        counted = re.search(rf'id="{count_id}"[^>]*>([^<]*)<', done.stdout)
        found["counted"] = counted.group(1) if counted else None
    return found


def explore_views(out: Path) -> dict[str, Any]:
    """The explore and pivot pages in Chromium: opened (every configuration drawn), brushed (a categorical axis
    and a score range), the pivot opened and laid out otherwise (other rows and columns, an axis fixed, a
    reference's marks)."""
    sweep = "table5_single_match"
    reference = f"strategy%3D{PAPER_STRATEGIES[0]}"
    return {
        "explore_open": browser_marks(out / "explore.html", fragment=f"sweep={sweep}", count_id="count"),
        "explore_brush": browser_marks(out / "explore.html", count_id="count",
                                       fragment=f"sweep={sweep}&b.student=~bert-tiny&b.score=0.7..0.8"),
        "pivot_open": browser_marks(out / "pivot.html", fragment=f"sweep={sweep}", count_id="pivot-count"),
        "pivot_rows": browser_marks(out / "pivot.html", count_id="pivot-count",
                                    fragment=f"sweep={sweep}&rows=strategy&cols=student&f.task=mnli&ref={reference}"),
    }  # fmt: skip


def measure(rows: int, arrivals: int, figures: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kdgrid-report-bench-") as temporary:
        root = Path(temporary)
        store, out = root / "store", root / "report"
        result: dict[str, Any] = {
            "rows": rows,
            "arrivals": arrivals,
            "write_store_s": round(write_store(store, rows), 1),
        }
        writer = ReportWriter(store, out, figures=figures, figures_every_s=FIGURES_EVERY_S)
        full = writer.update()
        result["full_s"] = round(full.seconds, 2)
        result["trial_pages"] = full.trial_pages
        for index in range(rows, rows + arrivals):
            write_result(store, synthetic_result(index), sweep="table5_single_match", study="table5")
        arrived = writer.update()
        result["arrivals_s"] = round(arrived.seconds, 2)
        result["arrival_pages"] = arrived.trial_pages
        started = time.perf_counter()
        idle = writer.update()
        result["idle_s"] = round(time.perf_counter() - started, 3)
        assert not idle.changed
        result["final_s"] = round(writer.update(final=True).seconds, 2)
        result["report_mb"] = round(folder_bytes(out) / 2**20, 1)
        result["trials_html_mb"] = round((out / "trials.html").stat().st_size / 2**20, 2)
        result["largest_trial_page_kb"] = round(
            max(p.stat().st_size for p in (out / "trials").iterdir()) / 1024, 1
        )
        result["browser_open"] = browser_marks(out / "trials.html")
        result["browser_filter"] = browser_marks(out / "trials.html", "q=state:failed")
        result["explore_html_mb"] = round((out / "explore.html").stat().st_size / 2**20, 2)
        result.update(explore_views(out))
        started = time.perf_counter()
        configurations, _ = report_configurations(store, writer.rows.frame, read_memberships(store))
        result["configurations_s"] = round(time.perf_counter() - started, 2)
        result["configurations"] = sum(len(c["configs"]["mean"]) for c in configurations)
        result["references"] = sum(len(c["references"]) for c in configurations)
        return result


# What the explore and pivot pages must do at 30,000 trials (headless Chromium, 2 cores): load, filter, build.
LOAD_MS = 2000.0
FILTER_MS = 200.0
BUILD_S = 90.0


def targets(result: dict[str, Any]) -> dict[str, bool | None]:
    """Each target met or not (None: not measured, Chromium missing): every explore and pivot view ready within
    `LOAD_MS` of navigation and its filter or layout within `FILTER_MS`, the first build within `BUILD_S`, and
    the explore page counting every configuration the report computed."""
    views = [result[k] for k in ("explore_open", "explore_brush", "pivot_open", "pivot_rows")]
    measured = all(view is not None for view in views)
    configurations = result["configurations"]
    return {
        "load_under_2s": all(v["ready"] < LOAD_MS for v in views) if measured else None,
        "filter_under_200ms": all(v["filter"] < FILTER_MS for v in views) if measured else None,
        "build_under_90s": result["full_s"] < BUILD_S,
        "explore_counts_every_configuration": (
            result["explore_open"]["counted"].startswith(
                f"{configurations} of {configurations} configurations"
            )
            if measured
            else None
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--arrivals", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="3,000 rows, 20 arrivals")
    parser.add_argument("--smoke", action="store_true", help="300 rows, 5 arrivals, no figures")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target (`targets`) is missed")
    args = parser.parse_args()
    rows, arrivals = (300, 5) if args.smoke else (3000, 20) if args.quick else (args.rows, args.arrivals)
    result = measure(rows, arrivals, figures=not args.smoke)
    result["targets"] = targets(result)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    missed = [name for name, met in result["targets"].items() if met is False]
    if args.check and missed:
        raise SystemExit(f"missed: {', '.join(missed)}")


if __name__ == "__main__":
    main()
