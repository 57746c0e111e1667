"""Compaction: merges without losing or repeating a row, at every crash point, beside readers and writers."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from kdgrid.result import TrialResult
from kdgrid.store import compact, layout, read_store, read_table, write_result
from kdgrid.store import read as read_module
from kdgrid.trial import Trial


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
    compact(tmp_path, _crash_before_delete=True)
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
    stale = read_module._listing(tmp_path)  # what a reader saw just before a compaction
    compact(tmp_path)
    calls = {"n": 0}
    real = read_module._listing

    def listing(store: Path):
        calls["n"] += 1
        return stale if calls["n"] == 1 else real(store)

    monkeypatch.setattr(read_module, "_listing", listing)
    assert sorted(row_ids(tmp_path)) == sorted(ids)
    assert calls["n"] >= 3  # the stale read failed and was retried


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    fill(tmp_path, range(2))
    old = layout.rows_dir(tmp_path) / f"{layout.TMP_PREFIX}dead-writer.parquet"
    old.write_bytes(b"half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    fresh = layout.rows_dir(tmp_path) / f"{layout.TMP_PREFIX}live-writer.parquet"
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
