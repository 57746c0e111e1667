"""Every command tolerant of one bad file: `report` warns, skips and carries on as `status` and `tables` do;
`store check` covers ``memberships/``, ``_claims/`` and rows of a newer schema version, and ``--quarantine``
moves them all; a store subfolder that is a file is refused once, up front."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdgrid.grid import load_sweep
from kdgrid.store import layout, listing, membership
from kdgrid.store.claims import claims_dir
from kdgrid.store.schema import SCHEMA_VERSION
from tests.commands.test_store_hygiene import row_file
from tests.commands.test_sweep_commands import FAKE, as_json, invoke, starts, sweep_file, user_error


@pytest.fixture
def store_of_a_sweep(tmp_path: Path) -> tuple[Path, Path]:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    assert invoke("run", sweep, "--store", store, *FAKE, "--no-compact")[0] == 0
    return sweep, store


def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "_reported", set())
    monkeypatch.setattr(membership, "_reported", set())


def test_report_skips_a_truncated_row_file_and_a_garbage_membership_with_a_warning(
    tmp_path: Path, store_of_a_sweep: tuple[Path, Path], caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    sweep, store = store_of_a_sweep
    first = load_sweep(sweep).trials[0].trial.trial_id
    truncated = row_file(store, first)
    truncated.write_bytes(truncated.read_bytes()[:-10])
    (store / "memberships" / "garbage.json").write_text("{not json")
    _fresh_warnings(monkeypatch)
    code, out = invoke("report", "--store", store, "--out", tmp_path / "report")
    assert code == 0, out
    assert (tmp_path / "report" / "index.html").is_file()
    messages = [r.getMessage() for r in caplog.records if r.name == "kdgrid.store"]
    assert any(truncated.name in m for m in messages), messages
    assert any("garbage.json" in m and "not a sweep membership file" in m for m in messages), messages
    # status and tables carry on over the same two files
    _fresh_warnings(monkeypatch)
    assert as_json("status", sweep, "--store", store)["done"] == 6


def test_store_check_lists_bad_memberships_claims_and_newer_rows_and_quarantines_them_all(
    store_of_a_sweep: tuple[Path, Path],
) -> None:
    sweep, store = store_of_a_sweep
    first = load_sweep(sweep).trials[0].trial.trial_id
    newer = row_file(store, first)
    table = pq.read_table(newer)
    column = table.schema.get_field_index("schema_version")
    pq.write_table(table.set_column(column, "schema_version", pa.array([99], pa.int16())), newer)
    (store / "memberships" / "garbage.json").write_text("[1, 2]")
    (store / "memberships" / "notes.txt").write_text("hello")
    claims_dir(store).mkdir(exist_ok=True)
    (claims_dir(store) / "0123456789abcdef.json").write_text("not a claim")
    (claims_dir(store) / "stray.bin").write_bytes(b"\0\1")

    code, out = invoke("store", "check", "--store", store)
    assert code == 1, out  # listed, not a crash on the newer version
    for expected in (
        f"rows/{newer.name}: a row of store schema version 99, newer than this kdgrid's {SCHEMA_VERSION}",
        "memberships/garbage.json: not a sweep membership file",
        "memberships/notes.txt: not a sweep membership file",
        "_claims/0123456789abcdef.json: not a claim",
        "_claims/stray.bin: not a claim file",
    ):
        assert expected in out, out
    code, out = invoke("store", "check", "--store", store, "--quarantine")
    assert code == 0 and "moved 5 file(s)" in out, out
    quarantined = store / "_quarantine"
    assert (quarantined / "rows" / newer.name).is_file() and (
        quarantined / "memberships" / "notes.txt"
    ).is_file()
    assert (quarantined / "_claims" / "stray.bin").is_file()
    code, out = invoke("store", "check", "--store", store)
    assert code == 0 and "every file is a kdgrid row file" in out, out
    assert (
        as_json("status", sweep, "--store", store)["pending"] == 1
    )  # the moved row's trial reads as not run


@pytest.mark.parametrize("folder", ["_claims", "memberships", "compacted"])
def test_a_store_subfolder_that_is_a_file_is_refused_once_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    store.mkdir()
    (store / folder).write_text("in the way")
    message = user_error(capsys, "run", sweep, "--store", store, *FAKE)
    assert f"store {store}: {folder} is a file, not a folder" in message
    assert not starts(tmp_path)  # nothing trained, no trial failed on it
    assert not layout.rows_dir(store).exists()
    (store / folder).unlink()
    assert invoke("run", sweep, "--store", store, *FAKE)[0] == 0


def test_a_store_subfolder_that_cannot_be_written_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    sweep, store = sweep_file(tmp_path), tmp_path / "store"
    (store / "_claims").mkdir(parents=True)
    real = tempfile.NamedTemporaryFile

    def read_only(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).name == "_claims":  # root ignores permission bits: refuse as EROFS
            raise OSError(30, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    message = user_error(capsys, "run", sweep, "--store", store, *FAKE)
    assert "_claims/ is not writable (Read-only file system)" in message
    assert not starts(tmp_path)
    shutil.rmtree(store)


def test_a_symlinked_claims_folder_is_quarantined_as_a_link_and_nothing_behind_it_moves(
    tmp_path: Path, store_of_a_sweep: tuple[Path, Path]
) -> None:
    _, store = store_of_a_sweep
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine")
    (outside / "0123456789abcdef.json").write_text("not a claim either")
    shutil.rmtree(claims_dir(store), ignore_errors=True)
    claims_dir(store).symlink_to(outside, target_is_directory=True)
    code, out = invoke("store", "check", "--store", store)
    assert code == 1 and "_claims: a symbolic link, not a folder of the store" in out, out
    assert "notes.txt" not in out
    code, out = invoke("store", "check", "--store", store, "--quarantine")
    assert code == 0 and "moved 1 file(s)" in out, out
    assert sorted(p.name for p in outside.iterdir()) == ["0123456789abcdef.json", "notes.txt"]
    assert (store / "_quarantine" / "_claims").is_symlink() and not os.path.lexists(claims_dir(store))
    code, out = invoke("store", "check", "--store", store)
    assert code == 0, out


def test_store_check_says_what_the_other_commands_do_with_rows_of_a_newer_schema(
    tmp_path: Path, store_of_a_sweep: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, store = store_of_a_sweep
    newer = row_file(store, load_sweep(sweep).trials[0].trial.trial_id)
    table = pq.read_table(newer)
    column = table.schema.get_field_index("schema_version")
    pq.write_table(table.set_column(column, "schema_version", pa.array([99], pa.int16())), newer)
    (store / "memberships" / "notes.txt").write_text("hello")
    code, out = invoke("store", "check", "--store", store)
    assert code == 1, out
    summary = " ".join(out.strip().split("\n")[-1].split())
    assert "1 file(s) are not kdgrid rows and are left out of every read" in summary, out
    assert "1 file(s) hold rows of a newer schema, which every other command that reads rows refuses (exit 2)" in (
        summary
    ), out
    for command in ("status", "plan"):  # and they do
        message = user_error(capsys, command, sweep, "--store", store)
        assert "schema version 99" in message, message
