"""`kdgrid report` on a small store written with the store's own API: what each page shows, escaping, the cost
ledger against a hand-computed case, incremental updates, watching, and the refusals (exit status 2)."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from kdgrid.analysis.render import BETTER_MARK, DEGENERATE_MARK
from kdgrid.analysis.tables import Block, Cell, Column, TableView
from kdgrid.cli import app
from kdgrid.report.build import ReportWriter
from kdgrid.report.gather import gather
from kdgrid.report.ledger import cost_ledger
from kdgrid.report.rows import StoreRows
from kdgrid.report.table_html import table_html
from kdgrid.report.watch import watching
from kdgrid.store import write_result
from kdgrid.store.schema import SCHEMA_VERSION
from tests.report.store_testing import HOSTILE, STUDY, SWEEP, demo_trial, done_result, make_store


def store_files(store: Path) -> dict[str, tuple[int, int]]:
    """Every file under the store with its size and modification time (to prove the report wrote nothing)."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(store.rglob("*"))}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("report")
    store, out = root / "store", root / "report"
    ids = make_store(store)
    before = store_files(store)
    result = CliRunner().invoke(
        app, ["report", "--store", str(store), "--out", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert str(out / "index.html") in result.output
    assert store_files(store) == before  # the report never writes into the store
    return store, out, ids


def read(out: Path, name: str) -> str:
    return (out / name).read_text()


def test_overview_counts_states_time_and_the_ledger(built) -> None:
    _, out, _ = built
    page = read(out, "index.html")
    row = re.search(r"<tr><td>demo</td><td>demo</td>(.*?)</tr>", page).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[1:5] == ["2", "1", "1", "0"]  # done, failed, pending, running
    assert "1.00 h" in cells  # device time: (1800 + 1764 + 36) s
    ledger = re.search(r'<table class="ledger">(.*?)</table>', page).group(1)
    total = re.search(r"<tr><td><b>total</b></td>(.*?)</tr>", ledger).group(1)
    assert re.findall(r"<td>(.*?)</td>", total) == ["", "3", "3", "6", "3", "2.0×", "1.00 h", "1.0 s", "1"]


def test_the_ledger_against_a_hand_computed_case(built) -> None:
    store, _, _ = built
    rows = StoreRows(store)
    rows.refresh()
    [line, total] = cost_ledger(rows.frame)
    assert (line.sweep, line.study, line.rows) == (SWEEP, STUDY, 3)
    # two done rows, each 3 batches fed to 2 students: 1.5 forwards' share, 1.0 s of teacher time, 0.5 s share
    assert line.forwards_run == pytest.approx(3.0) and line.forwards_per_trial == 6
    assert line.forwards_saved == pytest.approx(3.0) and line.sharing == pytest.approx(2.0)
    assert line.hours_saved == pytest.approx((1.0 - 0.5) * 2 / 3600)
    assert line.device_hours == pytest.approx(1.0)
    assert line.rows_without_record == 1  # the failure row recorded no teacher pass
    assert total == type(line)("", "", 3, line.forwards_run, 6, line.device_hours, line.hours_saved, 1)


def test_tables_and_figures_pages_show_the_demo_table(built) -> None:
    _, out, _ = built
    tables = read(out, "tables.html")
    assert 'id="table-demo"' in tables and "0.7500" in tables and "<b>0.8000</b>" in tables  # best in bold
    figures = read(out, "figures.html")
    [src] = re.findall(r'<img src="([^"]+)"', figures)
    assert (out / src).is_file() and src.endswith(".png") and (out / src).with_suffix(".pdf").is_file()


def test_a_done_trial_page(built) -> None:
    _, out, ids = built
    page = read(out, f"trials/{ids['done_last']}.html")
    assert "S2←T3" in page  # layer pairs
    assert "0.0123" in page  # the calibrated weight of cos@2-3
    assert page.count("<svg") == 3  # loss terms (log axis; linear in a fold), dev metrics of validation
    assert "cos@2-3" in page and "dev metrics · validation" in page
    assert "teacher_batches" in page and "Provenance" in page and "0.8000" in page


def test_a_failed_trial_page_and_the_failures_page_escape_the_error(built) -> None:
    _, out, ids = built
    page = read(out, f"trials/{ids['failed']}.html")
    escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;not bold&lt;/b&gt;"
    assert page.count(escaped) == 2  # the message and the traceback
    assert "Traceback (most recent call last)" in page
    failures = read(out, "failures.html")
    assert "DivergenceError · 1 trial(s)" in failures
    assert f'href="trials/{ids["failed"]}.html"' in failures
    assert f"kdgrid resume demo --store {built[0]}" in failures
    for html in out.rglob("*.html"):
        assert HOSTILE not in html.read_text() and "<script>alert" not in html.read_text(), html


def test_the_trial_list_carries_every_trial_as_json(built) -> None:
    _, out, ids = built
    page = read(out, "trials.html")
    blob = json.loads(
        re.search(r'<script type="application/json" id="trial-data">(.*?)</script>', page).group(1)
    )
    by_id = {row[0]: dict(zip(blob["columns"], row, strict=True)) for row in blob["rows"]}
    assert set(by_id) == set(ids.values())
    assert by_id[ids["pending"]]["state"] == "pending"
    assert by_id[ids["failed"]]["error"] == "DivergenceError"
    assert by_id[ids["done_last"]]["score"] == 0.8 and by_id[ids["done_last"]]["knowledge"] == "cos"
    assert "\\u003cscript\\u003e" not in page or "<script>alert" not in page
    assert (out / "assets" / "trials.js").is_file() and 'src="assets/trials.js"' in page


def test_an_update_rewrites_only_what_changed(tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    make_store(store)
    writer = ReportWriter(store, out, figures=False)
    assert writer.update().trial_pages == 3
    assert not writer.update().changed  # nothing arrived
    extra = demo_trial(["mmd"], "Last")
    write_result(store, done_result(extra, 0.7, 10.0), sweep=SWEEP, study=STUDY)
    update = writer.update()
    assert update.changed and update.trial_pages == 1
    assert (out / f"trials/{extra.trial_id}.html").is_file()
    # a new writer on the same folder knows the pages already written (the manifest)
    assert ReportWriter(store, out, figures=False).update().trial_pages == 0


def test_watching_writes_rows_as_they_arrive_and_stops(tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    store.mkdir()
    writer = ReportWriter(store, out, figures=False)
    lines: list[str] = []
    trial = demo_trial(["pkd"], "First")
    with watching(writer, interval_s=0.05, log=lines.append):
        time.sleep(0.2)  # an empty store is waited for
        write_result(store, done_result(trial, 0.6, 5.0), sweep=SWEEP, study=STUDY)
        deadline = time.time() + 20
        while not (out / f"trials/{trial.trial_id}.html").is_file() and time.time() < deadline:
            time.sleep(0.05)
    assert (out / f"trials/{trial.trial_id}.html").is_file()
    assert any("waiting for rows" in line for line in lines)
    assert not [t for t in threading.enumerate() if t.name == "kdgrid-report"]  # the thread ended


def test_run_report_refuses_an_output_inside_the_store_before_running(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    assert invoke("run", "demo", "--store", str(store), "--report", str(store / "report")) == 2
    assert f"--report {store / 'report'} is inside the store" in capsys.readouterr().err
    assert not store.exists()  # refused before the run created anything


def invoke(*args: str):
    """``kdgrid`` through its console entry point (so errors become exit status 2 and one message)."""
    from kdgrid import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(args))
    return exit_info.value.code


@pytest.mark.parametrize(
    "case", ["empty", "missing", "newer-schema", "inside-store", "under-a-file", "not-report"]
)
def test_bad_input_is_one_message_and_exit_status_2(tmp_path: Path, case: str, capsys) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    expected = {
        "empty": "holds no rows",
        "missing": "no results store",
        "newer-schema": f"newer than this kdgrid's {SCHEMA_VERSION}",
        "inside-store": "inside the store",
        "under-a-file": "cannot write the report",
        "not-report": "is not a kdgrid report",
    }[case]
    if case == "empty":
        (store / "rows").mkdir(parents=True)
    elif case != "missing":
        make_store(store)
    if case == "newer-schema":
        path = next((store / "rows").glob("*.parquet"))
        table = pq.read_table(path)
        column = table.schema.get_field_index("schema_version")
        newer = pa.array([SCHEMA_VERSION + 1] * table.num_rows, type=table.schema.field(column).type)
        pq.write_table(table.set_column(column, table.schema.field(column), newer), path)
    if case == "inside-store":
        out = store / "report"
    if case == "under-a-file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "report"
    if case == "not-report":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    before = store_files(store) if store.exists() else {}
    assert invoke("report", "--store", str(store), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert (store_files(store) if store.exists() else {}) == before
    if case == "not-report":
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    if case == "missing":
        assert not out.exists()  # refused before the output folder was made


def test_intervals_and_significance_are_rendered_when_cells_have_them() -> None:
    column = Column("First")
    block = Block("MRPC · bert-tiny", ["cos", "gram"], [column])
    block.cells[("cos", column)] = Cell(0.8, ci_low=0.78, ci_high=0.82, p_vs_reference=0.003,
                                        significant=True, direction=1)  # fmt: skip
    block.cells[("gram", column)] = Cell(0.5, ci_low=0.45, ci_high=0.55, degenerate=("constant predictions",))
    html = table_html(TableView("5", "Table 5", [block]), "t5")
    assert "[0.7800, 0.8200]" in html and BETTER_MARK in html and "p = 0.003" in html
    assert "[0.4500, 0.5500]" in html and DEGENERATE_MARK in html and "constant predictions" in html
    plain = table_html(
        TableView("5", "Table 5", [Block("b", ["cos"], [column], {("cos", column): Cell(0.8)})]), "x"
    )
    assert "0.8000" in plain and 'class="unc"' not in plain


def test_gather_selects_sweeps_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_store(store)
    write_result(store, done_result(demo_trial(["mmd"], "First"), 0.7, 1.0), sweep="other", study="x")
    rows = StoreRows(store)
    rows.refresh()
    assert set(gather(store, rows.frame, ["sweeps/demo.yaml"]).trials["sweep"]) == {"demo"}
    assert len(gather(store, rows.frame).trials) == 4
    with pytest.raises(Exception, match="no rows of sweep"):
        gather(store, rows.frame, ["nope"])


def test_kdgrid_demo_ends_with_the_path_of_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kdgrid demo` (the training replaced by writing the small store) writes the report beside the store and
    prints its path as the last line."""
    import kdgrid.demo

    @dataclass
    class Outcome:
        ok: bool = True

    def fake_run_demo(store: Path, **_: object) -> Outcome:
        make_store(store)
        return Outcome()

    monkeypatch.setattr(kdgrid.demo, "run_demo", fake_run_demo)
    store = tmp_path / "results"
    result = CliRunner().invoke(app, ["demo", "--store", str(store)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    index = tmp_path / "results-report" / "index.html"
    assert result.output.strip().splitlines()[-1] == f"the demo's report: {index}"
    assert index.is_file() and "trials done" in index.read_text()


def test_watch_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    """`kdgrid report --watch` in its own process: it writes the report, then SIGINT (Ctrl-C) ends it with
    status 0 after its update, with no traceback and no half-written file left behind."""
    import os
    import signal
    import subprocess
    import sys

    store, out = tmp_path / "store", tmp_path / "report"
    make_store(store)
    command = [sys.executable, "-c", "from kdgrid.cli import main; main()", "report", "--store", str(store),
               "--out", str(out), "--watch", "--interval", "0.2"]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        deadline = time.time() + 60
        while not (out / "_report.json").is_file() and time.time() < deadline:
            time.sleep(0.1)
        assert (out / "_report.json").is_file()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "stopped watching" in stdout and "Traceback" not in stderr
    assert not list(out.rglob("*.tmp"))


def test_figures_are_redrawn_at_most_so_often_while_watching_and_at_the_end(tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    make_store(store)
    writer = ReportWriter(store, out, figures_every_s=3600.0)
    assert writer.update().figures == 2  # the demo heat map, PNG and PDF
    write_result(store, done_result(demo_trial(["mmd"], "First"), 0.7, 1.0), sweep=SWEEP, study=STUDY)
    throttled = writer.update()
    assert throttled.changed and throttled.trial_pages == 1 and throttled.figures == 0
    assert writer.update(final=True).figures == 2  # the last update of a watch draws what was held back
    assert not writer.update(final=True).changed
