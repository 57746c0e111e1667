"""Files that are not kdgrid rows, `kdgrid store check [--quarantine]`, and a store that cannot take rows.

Every command reads the store through one listing with one rule of what a row file is: a bad name, a truncated
file, a Parquet file of another program or a file where ``rows/`` should be is left out of every read and
reported by every command in the same warning; ``store check`` lists them, ``--quarantine`` moves them aside.
"""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.grid import load_sweep
from kdgrid.store import latest_state, layout, listing, read_store
from kdgrid.store import write as write_module
from tests.commands.test_sweep_commands import FAKE, as_json, invoke, starts, sweep_file, user_error
from tests.launch.fakes import KDGRID_WITH_FAKES


def warning_of(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, *args: object) -> str:
    """The store warning the command ``args`` logs, as a fresh process would (each command is one process)."""
    monkeypatch.setattr(listing, "_reported", set())
    caplog.clear()
    CliRunner().invoke(
        app, [str(a) for a in args]
    )  # `tables` ends in an error: this store holds no paper table
    lines = [r.getMessage() for r in caplog.records if r.name == "kdgrid.store"]
    assert len(lines) == 1, (args, lines)
    return lines[0]


def row_file(store: Path, trial_id: str) -> Path:
    (name,) = [n for n in layout.visible_names(layout.rows_dir(store)) if n.startswith(trial_id)]
    return layout.rows_dir(store) / name


def spoil(store: Path, truncated_trial: str) -> list[str]:
    """A copy of a row under a bad name, a truncated row file, and a Parquet file of another program under a
    row file's name. Returns their paths relative to the store."""
    rows = layout.rows_dir(store)
    bad_name = rows / "copy-of-a-row.parquet"
    shutil.copy(row_file(store, truncated_trial), bad_name)
    truncated = row_file(store, truncated_trial)
    truncated.write_bytes(truncated.read_bytes()[:300])
    foreign = rows / f"0123456789abcdef.done.{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), foreign)
    return [f"rows/{p.name}" for p in (bad_name, truncated, foreign)]


def test_every_command_reports_the_same_files_and_quarantine_makes_reads_clean(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    assert invoke("run", sweep, "--store", store, *FAKE, "--no-compact")[0] == 0
    first = load_sweep(sweep).trials[0].trial.trial_id
    strays = spoil(store, first)

    warnings = {
        "status": warning_of(caplog, monkeypatch, "status", sweep, "--store", store),
        "plan": warning_of(caplog, monkeypatch, "plan", sweep, "--store", store),
        "tables": warning_of(caplog, monkeypatch, "tables", "all", "--store", store),
        "resume": warning_of(caplog, monkeypatch, "resume", sweep, "--store", store, *FAKE, "--no-compact"),
        "compact": warning_of(caplog, monkeypatch, "store", "compact", "--store", store),
    }
    forgotten = load_sweep(sweep).trials[1].trial.trial_id
    warnings["forget"] = warning_of(caplog, monkeypatch, "store", "forget", forgotten, "--store", store)
    assert len(set(warnings.values())) == 1, warnings  # one warning, word for word, from every command
    message = warnings["status"]
    assert (
        "holds 3 file(s) that are not kdgrid rows" in message
        and f"kdgrid store check --store {store}" in message
    )
    for stray in strays:
        assert stray in message
    assert "not a row file name" in message and "truncated or corrupt" in message
    assert "not kdgrid rows (no row_id, trial_id, status column)" in message
    # the truncated trial read as not run, so resume trained it again; nothing else ran twice
    assert starts(tmp_path).count(first) == 2 and len(starts(tmp_path)) == 8
    # every stray file is still there: left out, never merged, never deleted
    assert all((store / stray).exists() for stray in strays)

    code, out = invoke("store", "check", "--store", store)
    assert code == 1 and [line.split(":")[0] for line in out.splitlines()[:3]] == sorted(strays)
    code, out = invoke("store", "check", "--store", store, "--quarantine")
    assert code == 0 and "moved 3 file(s)" in out
    assert sorted(
        str(p.relative_to(store / "_quarantine")) for p in (store / "_quarantine").rglob("*.parquet")
    ) == sorted(strays)
    code, out = invoke("store", "check", "--store", store)
    assert code == 0 and "every file is a kdgrid row file" in out
    caplog.clear()
    monkeypatch.setattr(listing, "_reported", set())
    status = as_json("status", sweep, "--store", store)
    assert not [r for r in caplog.records if r.name == "kdgrid.store"]  # clean reads: no warning
    assert (status["done"], status["pending"]) == (6, 1)  # the forgotten trial
    assert invoke("resume", sweep, "--store", store, *FAKE)[0] == 0
    assert as_json("status", sweep, "--store", store)["done"] == 7


def test_a_quarantined_row_is_trained_again_by_resume(tmp_path: Path) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    invoke("run", sweep, "--store", store, *FAKE, "--no-compact")
    first = load_sweep(sweep).trials[0].trial.trial_id
    path = row_file(store, first)
    path.write_bytes(path.read_bytes()[:-10])  # cut off the footer
    assert invoke("store", "check", "--store", store, "--quarantine")[0] == 0
    assert as_json("status", sweep, "--store", store)["pending"] == 1
    assert invoke("resume", sweep, "--store", store, *FAKE)[0] == 0
    assert starts(tmp_path).count(first) == 2
    assert (store / "_quarantine" / "rows" / path.name).exists()  # kept, never deleted


def test_rows_being_a_file_is_reported_and_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    store.mkdir()
    (store / "rows").write_text("not a folder")
    status = as_json("status", sweep, "--store", store)
    assert status["pending"] == 7 and "rows: not a directory" in caplog.text
    message = user_error(capsys, "run", sweep, "--store", store, *FAKE)
    # refused once, up front, naming the folder (not a "make room" message on a disk with room)
    assert f"store {store}: rows is a file, not a folder" in message and "free on its disk" not in message
    assert not starts(tmp_path)
    code, out = invoke("store", "check", "--store", store)
    assert code == 1 and out.startswith("rows: not a directory")
    assert invoke("store", "check", "--store", store, "--quarantine")[0] == 0
    assert (store / "_quarantine" / "rows").read_text() == "not a folder"
    assert invoke("run", sweep, "--store", store, *FAKE)[0] == 0
    assert as_json("status", sweep, "--store", store)["done"] == 7


def test_a_store_that_is_a_file_is_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "a-file"
    store.write_text("")
    for command in ("plan", "status"):
        assert f"the store {store} is a file, not a directory" in user_error(
            capsys, command, sweep, "--store", store
        )
    for command in ("check", "compact"):
        assert "a file, not a store directory" in user_error(capsys, "store", command, "--store", store)
    assert "a file, not a store directory" in user_error(
        capsys, "store", "forget", "0" * 16, "--store", store
    )
    assert store.read_text() == ""


def test_the_warning_is_one_plain_line_on_stderr(tmp_path: Path) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    invoke("run", sweep, "--store", store, *FAKE, "--no-compact")
    (layout.rows_dir(store) / "stray.parquet").write_bytes(b"junk")
    done = subprocess.run(
        [*KDGRID_WITH_FAKES, "status", str(sweep), "--store", str(store)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: the store {store} holds 1 file(s)")
    assert "rows/stray.parquet: not a row file name" in lines[0]


def test_status_and_tables_agree_on_a_large_store_with_a_truncated_file(tmp_path: Path) -> None:
    """With 2,000+ loose files `status` does not decode done rows (it opens a sample for wall times): it must
    still not count a row file that `tables` cannot read."""
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    invoke("run", sweep, "--store", store, *FAKE, "--no-compact")
    trials = [p.trial.trial_id for p in load_sweep(sweep).trials]
    template = row_file(store, trials[0]).read_bytes()
    for index in range(2100):  # rows of trials of other sweeps
        name = f"{index:016x}.done.{uuid.uuid4().hex}.parquet"
        (layout.rows_dir(store) / name).write_bytes(template)
    truncated = row_file(store, trials[3])
    truncated.write_bytes(truncated.read_bytes()[:-40])
    status = as_json("status", sweep, "--store", store)
    states = latest_state(read_store(store))  # what `tables` reads
    tables_done = {t for t in trials if t in states.index and states.at[t, "state"] == "done"}
    assert status["done"] == len(tables_done) == 6 and trials[3] not in tables_done
    assert status["pending"] == 1


def test_a_full_disk_stops_the_job_with_one_message_and_resume_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    real = write_module.write_table_atomically
    written: list[Path] = []

    def disk_fills_after_two(table: pa.Table, final: Path, **kwargs: object) -> Path:
        if len(written) >= 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(final))
        written.append(real(table, final, **kwargs))
        return written[-1]

    monkeypatch.setattr(write_module, "write_table_atomically", disk_fills_after_two)
    message = user_error(capsys, "run", sweep, "--store", store, *FAKE, "--no-compact")
    assert message.count("error:") == 1 and "No space left on device" in message
    assert f"cannot write a row to the store {store}" in message and "free on its disk" in message
    assert "`kdgrid resume` trains the trials without a row" in message
    # the job stopped at the row it could not write: one more trial trained, no other job started
    assert len(starts(tmp_path)) == 3
    assert sorted(layout.visible_files(layout.rows_dir(store))) == sorted(written)
    assert len(read_store(store)) == 2  # the rows written before are intact
    monkeypatch.undo()
    assert invoke("resume", sweep, "--store", store, *FAKE)[0] == 0
    assert as_json("status", sweep, "--store", store)["done"] == 7
    assert len(starts(tmp_path)) == 3 + 5 and len(read_store(store)) == 7


def test_the_free_space_is_named_in_the_message(tmp_path: Path) -> None:
    error = write_module.store_write_error(tmp_path / "new", OSError(errno.EROFS, "Read-only file system"))
    free = shutil.disk_usage(tmp_path).free
    shown = re.search(r"; ([\d.]+) (GB|MB|kB|bytes) free", str(error))
    assert shown is not None and "Read-only file system" in str(error)
    scale = {"GB": 1e9, "MB": 1e6, "kB": 1e3, "bytes": 1}[shown.group(2)]
    assert abs(float(shown.group(1)) * scale - free) <= max(0.06 * scale, free * 0.01)
