"""Compaction: merges without losing or repeating a row, at every crash point, beside readers and writers;\nrefuses bad arguments, read-only stores and unverifiable writes without deleting anything."""

from __future__ import annotations

import errno
import importlib
import multiprocessing
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdgrid.atomic_files import TMP_PREFIX
from kdgrid.cli import main
from kdgrid.errors import ConfigError
from kdgrid.result import TrialResult
from kdgrid.store import compact, layout, read_store, read_table, write_result
from kdgrid.store import read as read_module
from kdgrid.store.compact import StoreMaintenanceError
from kdgrid.store.schema import SCHEMA
from kdgrid.trial import Trial
from tests.store.compaction_crash import compact_crashing_before_delete

# the module itself: `kdgrid.store.compact` is also the name of its function
compact_module = importlib.import_module("kdgrid.store.compact")


def row(seed: int) -> TrialResult:
    trial = Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=seed)
    return TrialResult(
        trial=trial, status="done", scores={"validation": {"accuracy": seed / 1000}}, wall_time_s=1.0
    )


def fill(store: Path, seeds: range) -> set[str]:
    return {write_result(store, row(s), sweep="s", study="t").name.split(".")[2] for s in seeds}


def row_ids(store: Path) -> list[str]:
    return read_table(store, ["row_id"]).column("row_id").to_pylist()


def test_compaction_keeps_every_row_exactly_once(tmp_path: Path) -> None:
    ids = fill(tmp_path, range(30))
    before = read_store(tmp_path).sort_values("row_id").reset_index(drop=True)
    report = compact(tmp_path, target_rows=12)
    assert (report.files_merged, report.rows, report.parts_written) == (30, 30, 3)
    assert layout.visible_files(layout.rows_dir(tmp_path)) == []
    after = read_store(tmp_path).sort_values("row_id").reset_index(drop=True)
    assert sorted(row_ids(tmp_path)) == sorted(ids)
    assert after.drop(columns=[]).equals(before)  # every value survives, not only the ids


def test_new_rows_after_compaction_are_merged_next_time(tmp_path: Path) -> None:
    first = fill(tmp_path, range(5))
    compact(tmp_path)
    second = fill(tmp_path, range(5, 9))
    assert sorted(row_ids(tmp_path)) == sorted(first | second)
    report = compact(tmp_path)
    assert report.files_merged == 5  # 4 new files + the small part
    assert len(layout.visible_files(layout.compacted_dir(tmp_path))) == 1
    assert sorted(row_ids(tmp_path)) == sorted(first | second)


def test_a_crash_before_deleting_the_originals_shows_no_row_twice(tmp_path: Path) -> None:
    ids = fill(tmp_path, range(10))
    compact_crashing_before_delete(tmp_path)
    # the rows are now in the originals and in the merged part: a reader sees each once
    assert len(layout.visible_files(layout.rows_dir(tmp_path))) == 10
    assert sorted(row_ids(tmp_path)) == sorted(ids)
    assert len(read_store(tmp_path)) == 10
    compact(tmp_path)  # the next compaction finishes the job
    assert layout.visible_files(layout.rows_dir(tmp_path)) == []
    assert sorted(row_ids(tmp_path)) == sorted(ids)
    assert len(layout.visible_files(layout.compacted_dir(tmp_path))) == 1


def test_a_reader_whose_listing_went_stale_reads_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = fill(tmp_path, range(8))
    stale = read_module.list_store(tmp_path)  # what a reader saw just before a compaction
    compact(tmp_path)
    calls = {"n": 0}
    real = read_module.list_store

    def listing(store: Path):
        calls["n"] += 1
        return stale if calls["n"] == 1 else real(store)

    monkeypatch.setattr(read_module, "list_store", listing)
    assert sorted(row_ids(tmp_path)) == sorted(ids)
    assert calls["n"] >= 2  # the stale read (the first listing) failed and the store was listed again


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    fill(tmp_path, range(2))
    old = layout.rows_dir(tmp_path) / f"{TMP_PREFIX}dead-writer.parquet"
    old.write_bytes(b"half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    fresh = layout.rows_dir(tmp_path) / f"{TMP_PREFIX}live-writer.parquet"
    fresh.write_bytes(b"half")
    assert compact(tmp_path).stale_tmp_removed == 1
    assert not old.exists() and fresh.exists()


def _writer(store: str, start: int, count: int) -> None:
    for seed in range(start, start + count):
        write_result(store, row(seed), sweep="s", study="t")


def _reader(store: str, seconds: float, queue) -> None:
    """Reads the store over and over while it changes; reports any read that saw a row twice."""
    deadline = time.time() + seconds
    reads = 0
    while time.time() < deadline:
        ids = read_table(store, ["row_id", "wall_time_s"]).column("row_id").to_pylist()  # opens every file
        if len(ids) != len(set(ids)):
            queue.put(("duplicate", reads))
            return
        reads += 1
    queue.put(("ok", reads))


def test_compaction_beside_live_writers_and_readers_loses_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    writers = [context.Process(target=_writer, args=(str(tmp_path), w * 1000, 60)) for w in range(2)]
    reader = context.Process(target=_reader, args=(str(tmp_path), 6.0, queue))
    for p in [*writers, reader]:
        p.start()
    while any(p.is_alive() for p in writers):
        compact(tmp_path, target_rows=25)
        time.sleep(0.05)
    for p in [*writers, reader]:
        p.join(60)
        assert p.exitcode == 0
    outcome, reads = queue.get(timeout=10)
    assert outcome == "ok" and reads > 0
    compact(tmp_path)
    frame = read_store(tmp_path)
    assert len(frame) == 120 and frame["row_id"].nunique() == 120 and frame["trial_id"].nunique() == 120


# ------------------------------------------------------------------ arguments, failures, read-only stores


def snapshot(store: Path) -> dict[str, bytes]:
    """Every file of a store (path relative to it -> bytes): to show that a refused command changed nothing."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def all_rows(store: Path):
    return read_store(store).sort_values("row_id").reset_index(drop=True)


@pytest.mark.parametrize("target_rows", [-1, 0, True])
def test_a_target_below_one_row_is_refused_and_nothing_changes(tmp_path: Path, target_rows: int) -> None:
    fill(tmp_path, range(4))
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=r"target_rows .*at least 1"):
        compact(tmp_path, target_rows=target_rows)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("target_rows", ["-1", "0"])
def test_the_cli_refuses_a_bad_target_in_one_message(
    tmp_path: Path, target_rows: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(tmp_path, range(4))
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "compact", "--store", str(tmp_path), "--target-rows", target_rows])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--target-rows {target_rows}" in err and "at least 1" in err and "Traceback" not in err
    assert snapshot(tmp_path) == before


def test_nothing_to_merge_deletes_nothing(tmp_path: Path) -> None:
    assert compact(tmp_path / "missing") == compact_module.CompactionReport(0, 0, 0, 0)
    ids = fill(tmp_path, range(3))
    compact(tmp_path)
    before = snapshot(tmp_path)
    assert compact(tmp_path).files_merged == 0  # one small part and no loose file: left as it is
    assert snapshot(tmp_path) == before and sorted(row_ids(tmp_path)) == sorted(ids)


def test_a_write_that_fails_midway_deletes_no_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(tmp_path, range(10))
    before = all_rows(tmp_path)
    real = compact_module.write_table_atomically
    calls = {"n": 0}

    def disk_full_on_the_second_part(table, final, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(final))
        return real(table, final, **kw)

    monkeypatch.setattr(compact_module, "write_table_atomically", disk_full_on_the_second_part)
    with pytest.raises(StoreMaintenanceError, match=r"No space left on device.*no input was deleted"):
        compact(tmp_path, target_rows=4)
    assert len(layout.visible_files(layout.rows_dir(tmp_path))) == 10
    assert layout.visible_files(layout.compacted_dir(tmp_path)) == []  # the first part was removed again
    assert all_rows(tmp_path).equals(before)


def test_a_part_that_does_not_read_back_whole_deletes_no_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(tmp_path, range(6))
    before = all_rows(tmp_path)
    real = compact_module.write_table_atomically

    def torn(table, final, **kw):  # type: ignore[no-untyped-def]
        return real(table.slice(1), final, **kw)  # a part silently missing its first row

    monkeypatch.setattr(compact_module, "write_table_atomically", torn)
    with pytest.raises(StoreMaintenanceError, match="1 row id\\(s\\) missing"):
        compact(tmp_path)
    assert len(layout.visible_files(layout.rows_dir(tmp_path))) == 6
    assert layout.visible_files(layout.compacted_dir(tmp_path)) == []
    assert all_rows(tmp_path).equals(before)


def test_a_failure_between_write_and_delete_loses_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = fill(tmp_path, range(8))
    before = all_rows(tmp_path)

    def killed(store, inputs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(compact_module, "delete_inputs", killed)
    with pytest.raises(KeyboardInterrupt):
        compact(tmp_path)
    assert len(layout.visible_files(layout.rows_dir(tmp_path))) == 8  # every input still there
    assert len(layout.visible_files(layout.compacted_dir(tmp_path))) == 1  # and its verified part
    assert all_rows(tmp_path).equals(before)  # each row once
    monkeypatch.undo()
    compact(tmp_path)
    assert layout.visible_files(layout.rows_dir(tmp_path)) == []
    assert sorted(row_ids(tmp_path)) == sorted(ids) and all_rows(tmp_path).equals(before)


def test_a_file_promising_a_row_it_lacks_is_not_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fill(tmp_path, range(3))
    empty = layout.rows_dir(tmp_path) / layout.RowFileName("t0", "done", "0" * 32).name
    pq.write_table(SCHEMA.empty_table(), empty)
    report = compact(tmp_path)  # the listing leaves it out: the three rows are merged, the file stays
    assert (report.files_merged, report.rows) == (3, 3)
    assert empty.exists() and layout.visible_names(layout.rows_dir(tmp_path)) == [empty.name]
    assert f"rows/{empty.name}: holds no row" in caplog.text and "kdgrid store check" in caplog.text
    # and had it been an input, the verification would have refused to delete it
    table = read_table(tmp_path)
    with pytest.raises(StoreMaintenanceError, match="1 row id\\(s\\) missing"):
        compact_module.write_verified(
            tmp_path,
            [(compact_module.new_part_path(tmp_path), table)],
            compact_module.input_row_ids(table, [empty.name]),
        )
    assert len(layout.visible_files(layout.compacted_dir(tmp_path))) == 1  # the refused part was removed


def test_rows_without_a_row_id_are_never_merged_and_are_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fill(tmp_path, range(3))
    foreign = layout.rows_dir(tmp_path) / "notes.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    report = compact(tmp_path)
    assert (report.files_merged, report.rows) == (3, 3)
    assert foreign.exists() and pq.read_table(foreign).equals(pa.table({"x": [1, 2]}))
    assert "rows/notes.parquet: not a row file name" in caplog.text
    # the check behind the listing's rule still refuses such rows by name
    nameless = pa.table({"row_id": pa.array([None, None], pa.string())})
    with pytest.raises(StoreMaintenanceError, match=f"rows without a row id .*{foreign}"):
        compact_module.check_row_ids(nameless, [foreign])


def test_compacting_a_read_only_store_is_one_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(tmp_path, range(3))
    before = snapshot(tmp_path)

    def read_only(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(compact_module, "open", read_only, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "compact", "--store", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "cannot be changed (Read-only file system" in err and "Nothing was changed" in err
    assert "Traceback" not in err and snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_compacting_a_store_without_write_permission_changes_nothing(tmp_path: Path) -> None:
    fill(tmp_path, range(3))
    before = snapshot(tmp_path)
    folders = [tmp_path, layout.rows_dir(tmp_path)]
    for folder in folders:
        folder.chmod(0o555)
    try:
        with pytest.raises(StoreMaintenanceError, match="cannot be changed"):
            compact(tmp_path)
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert snapshot(tmp_path) == before
