"""Reading with the read cache: the same rows as decoding every file, schema versions checked, safe beside
writers and compaction, harmless when stale, torn or unwritable."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from kdgrid.result import TrialResult
from kdgrid.store import compact, failure_result, layout, read_cache, read_store, read_table, write_result
from kdgrid.store import read as read_module
from kdgrid.store.read import StoreSchemaError
from kdgrid.store.schema import READ_SCHEMA, SCHEMA_VERSION
from kdgrid.trial import Trial
from tests.store.compaction_crash import compact_crashing_before_delete


def trial(seed: int) -> Trial:
    return Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=seed)


def result(seed: int) -> TrialResult:
    return TrialResult(
        trial=trial(seed),
        status="done",
        scores={"validation": {"accuracy": seed / 1000}},
        curve=[{"epoch": 1, "scores": {"validation": {"accuracy": seed / 1000}}}],
        best_epoch=1,
        wall_time_s=float(seed),
    )


def fill(store: Path, seeds: range) -> list[Path]:
    return [write_result(store, result(s), sweep="s", study="t") for s in seeds]


@pytest.fixture
def small_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache from 4 decoded files on, in segments of 8 rows (the defaults need thousands of files)."""
    monkeypatch.setattr(read_cache, "MIN_FILES_TO_CACHE", 4)
    monkeypatch.setattr(read_cache, "SEGMENT_FILES", 8)


def old_path(store: Path) -> pa.Table:
    """What a read of the default columns returned before the cache: one pyarrow dataset of `READ_SCHEMA` (every
    column but the per-example predictions) over every visible file (rows/ by name, then compacted/ by name),
    the first row of each row id kept."""
    files = layout.visible_files(layout.rows_dir(store)) + layout.visible_files(layout.compacted_dir(store))
    dataset = ds.dataset([str(p) for p in files], format="parquet", schema=READ_SCHEMA)
    table = dataset.to_table().combine_chunks()
    first: dict[str, int] = {}
    for index, row_id in enumerate(table.column("row_id").to_pylist()):
        first.setdefault(row_id, index)
    return table.take(pa.array(sorted(first.values()), type=pa.int64()))


def cached_files(store: Path) -> list[str]:
    """Names of the per-trial files the cache holds a row of, over every segment (repeats kept)."""
    names: list[str] = []
    for path in sorted(layout.read_cache_dir(store).glob("rows-*.arrow")):
        names += pa.ipc.open_file(str(path)).read_all().column("_file").to_pylist()
    return names


def count_decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the per-trial files each `_decode` call opens (names), leaving compacted parts out."""
    decoded: list[str] = []
    real = read_module._decode

    def decode(paths: list[Path], schema: pa.Schema, row_filter: object = None) -> pa.Table:
        decoded.extend(p.name for p in paths if p.parent.name == layout.ROWS_DIR)
        return real(paths, schema, row_filter)  # type: ignore[arg-type]

    monkeypatch.setattr(read_module, "_decode", decode)
    return decoded


def mixed_store(store: Path) -> None:
    """Compacted parts, a crashed compaction's duplicates, loose done and failed rows, and a file of an older
    schema (two columns missing): every case the reader has to merge."""
    fill(store, range(0, 10))
    compact(store, target_rows=6)  # two parts
    fill(store, range(10, 16))
    compact_crashing_before_delete(store)  # rows 10-15 now both loose and in a part
    fill(store, range(16, 30))
    write_result(store, failure_result(trial(99), error_type="OOM", message="out"), sweep="s", study="t")
    older = fill(store, range(30, 31))[0]
    pq.write_table(pq.read_table(older).drop_columns(["device", "pid"]), older)


def test_warm_reads_return_what_decoding_every_file_returns(
    tmp_path: Path, small_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed_store(tmp_path)
    expected = old_path(tmp_path)
    assert expected.num_rows == 32  # 30 done seeds (10-15 once) + the older-schema one + the failed one
    decoded = count_decoded(monkeypatch)
    cold = read_store(tmp_path)
    assert len(decoded) == 22  # every loose file: 10-15 (also in a part), 16-30, the failed one
    assert len(cached_files(tmp_path)) == 22 and len(list(layout.read_cache_dir(tmp_path).iterdir())) == 3
    decoded.clear()
    warm = read_store(tmp_path)
    assert decoded == []  # every loose file came from the cache
    assert cold.equals(warm) and list(cold.dtypes) == list(warm.dtypes)
    assert read_table(tmp_path).equals(expected)  # same rows, same order, same Arrow types
    older = warm.set_index("seed").loc[30]
    assert pd.isna(older["device"]) and pd.isna(older["pid"]) and older["wall_time_s"] == 30.0

    arrived = fill(tmp_path, range(40, 45))  # files arriving during a run
    decoded.clear()
    partly = read_store(tmp_path)
    assert sorted(decoded) == sorted(p.name for p in arrived)  # only the new files are decoded
    assert read_table(tmp_path).equals(old_path(tmp_path))
    shutil.rmtree(layout.read_cache_dir(tmp_path))
    assert read_store(tmp_path).equals(partly) and len(partly) == 37


def test_narrow_reads_use_the_cache_but_do_not_fill_it(
    tmp_path: Path, small_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(tmp_path, range(12))
    narrow = read_table(tmp_path, ["row_id", "wall_time_s"])
    assert not layout.read_cache_dir(tmp_path).exists()  # 12 files decoded, but only two columns of each
    read_table(tmp_path)
    decoded = count_decoded(monkeypatch)
    assert read_table(tmp_path, ["row_id", "wall_time_s"]).equals(narrow) and decoded == []
    failed_only = read_table(tmp_path, ["status", "wall_time_s"], open_row_file=lambda parts: False)
    assert failed_only.column("wall_time_s").null_count == 12  # files not opened stay nulls, cache or not


def test_only_files_named_after_their_single_row_are_cached(tmp_path: Path, small_cache: None) -> None:
    files = fill(tmp_path, range(6))
    two_rows = pa.concat_tables([pq.read_table(files[0]), pq.read_table(files[1])])
    pq.write_table(two_rows, files[0])  # one name, two rows (no writer does this)
    files[1].rename(files[1].with_name(f"{trial(1).trial_id}.failed.{'0' * 32}.parquet"))  # name lies
    read_table(tmp_path)
    assert sorted(cached_files(tmp_path)) == sorted(f.name for f in files[2:])
    again = read_table(tmp_path)  # the two odd files are decoded again, and their rows still read once each
    assert again.equals(old_path(tmp_path)) and again.num_rows == 6


def test_rows_of_a_newer_schema_version_are_refused_naming_the_file(
    tmp_path: Path, small_cache: None
) -> None:
    files = fill(tmp_path, range(5))
    table = pq.read_table(files[3])
    newer = table.set_column(0, "schema_version", pa.array([SCHEMA_VERSION + 1], pa.int16()))
    pq.write_table(newer.append_column("new_column", pa.array(["x"])), files[3])
    with pytest.raises(
        StoreSchemaError, match=rf"{files[3].name}: a row of store schema version {SCHEMA_VERSION + 1}, newer"
    ):
        read_store(tmp_path)
    assert not layout.read_cache_dir(tmp_path).exists()  # nothing cached from a refused read
    with pytest.raises(StoreSchemaError, match=f"newer than this kdgrid's {SCHEMA_VERSION}"):
        compact(tmp_path)  # compaction would drop the column this kdgrid does not know: it refuses
    assert len(layout.visible_files(layout.rows_dir(tmp_path))) == 5
    assert layout.visible_files(layout.compacted_dir(tmp_path)) == []
    # names alone do not open files: trial ids and statuses stay readable
    assert read_table(tmp_path, ["trial_id", "status"]).num_rows == 5


def test_a_newer_version_in_a_compacted_part_is_refused(tmp_path: Path) -> None:
    fill(tmp_path, range(3))
    compact(tmp_path)
    (part,) = layout.visible_files(layout.compacted_dir(tmp_path))
    table = pq.read_table(part)
    versions = pa.array([SCHEMA_VERSION, SCHEMA_VERSION + 3, SCHEMA_VERSION], pa.int16())
    pq.write_table(table.set_column(0, "schema_version", versions), part)
    with pytest.raises(
        StoreSchemaError, match=rf"{part.name}: a row of store schema version {SCHEMA_VERSION + 3}"
    ):
        read_table(tmp_path, ["trial_id", "status"])


def test_a_column_that_cannot_be_converted_is_left_out_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = fill(tmp_path, range(4))
    table = pq.read_table(files[2])
    index = table.schema.get_field_index("knowledge")
    pq.write_table(table.set_column(index, "knowledge", pa.array([7], pa.int64())), files[2])
    frame = read_store(tmp_path)
    assert len(frame) == 3 and trial(2).trial_id not in set(frame["trial_id"])
    assert f"rows/{files[2].name}: not kdgrid rows (column knowledge is int64" in caplog.text


def test_a_file_whose_pages_do_not_decode_is_left_out_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = fill(tmp_path, range(4))
    table = pq.read_table(files[1])
    index = table.schema.get_field_index("temperature")
    # a text column where kdgrid stores numbers: the footer passes (text may convert), the value does not
    pq.write_table(table.set_column(index, "temperature", pa.array(["hot"])), files[1])
    table, strays = read_module.read_with_strays(tmp_path)
    assert table.num_rows == 3 and [s.path for s in strays] == [files[1]]
    assert "cannot be read as kdgrid store rows" in strays[0].reason
    assert len(read_store(tmp_path)) == 3
    assert f"rows/{files[1].name}: cannot be read as kdgrid store rows" in caplog.text
    report = compact(tmp_path)  # compaction merges the rows it can read and leaves that file where it is
    assert (report.files_merged, report.rows) == (3, 3) and files[1].exists()
    assert len(read_store(tmp_path)) == 3


def test_stale_entries_are_never_returned_and_are_tidied_away(
    tmp_path: Path, small_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(tmp_path, range(20))
    read_table(tmp_path)
    saved = {p.name: p.read_bytes() for p in layout.read_cache_dir(tmp_path).iterdir()}
    compact(tmp_path)
    assert list(layout.read_cache_dir(tmp_path).iterdir()) == []  # compaction deletes what it merged
    for name, data in saved.items():  # as if a reader had written the cache during the compaction
        (layout.read_cache_dir(tmp_path) / name).write_bytes(data)
    fill(tmp_path, range(20, 26))
    assert read_table(tmp_path).equals(old_path(tmp_path))  # 20 stale cached rows, none returned twice
    # the read merged the cache down to the six live files (20 stale rows are more than the live ones)
    assert sorted(cached_files(tmp_path)) == sorted(
        p.name for p in layout.visible_files(layout.rows_dir(tmp_path))
    )
    monkeypatch.setattr(read_cache, "MAX_SEGMENTS", 0)
    read_table(tmp_path)
    assert len(list(layout.read_cache_dir(tmp_path).iterdir())) == 1


def test_a_torn_or_foreign_segment_is_ignored(tmp_path: Path, small_cache: None) -> None:
    fill(tmp_path, range(10))
    read_table(tmp_path)
    segments = sorted(layout.read_cache_dir(tmp_path).iterdir())
    segments[0].write_bytes(segments[0].read_bytes()[:100])  # a crash tore it
    other = segments[1].with_name("rows-0123456789abcdef-000000000000.arrow")  # another schema's segment
    other.write_bytes(segments[1].read_bytes())
    segments[1].unlink()
    assert read_table(tmp_path).equals(old_path(tmp_path))


def test_a_cache_that_cannot_be_written_only_loses_the_speed_up(tmp_path: Path, small_cache: None) -> None:
    fill(tmp_path, range(10))
    layout.read_cache_dir(tmp_path).write_text("not a folder")  # mkdir fails like on a read-only store
    assert read_table(tmp_path).equals(old_path(tmp_path))
    assert read_table(tmp_path).num_rows == 10


def test_compaction_takes_cached_rows_and_keeps_every_value(
    tmp_path: Path, small_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(tmp_path, range(12))
    before = read_store(tmp_path)
    decoded = count_decoded(monkeypatch)
    report = compact(tmp_path)
    assert decoded == [] and (report.files_merged, report.rows) == (12, 12)
    after = read_store(tmp_path)
    assert (
        after.sort_values("row_id")
        .reset_index(drop=True)
        .equals(before.sort_values("row_id").reset_index(drop=True))
    )
    assert not any(layout.read_cache_dir(tmp_path).iterdir())


def _caching_reader(store: str, seconds: float, queue) -> None:
    """Reads every column over and over (filling the cache) while writers and compactions change the store;
    reports a read that saw a row twice, lost a row an earlier read saw, or a row whose values are not its own."""
    read_cache.MIN_FILES_TO_CACHE = 1
    read_cache.SEGMENT_FILES = 7
    deadline = time.time() + seconds
    seen: set[str] = set()
    reads = warm = 0
    while time.time() < deadline:
        warm += any(layout.read_cache_dir(Path(store)).glob("rows-*.arrow"))  # this read may use a cache
        table = read_table(store)
        ids = table.column("row_id").to_pylist()
        if len(ids) != len(set(ids)):
            queue.put(("duplicate", reads, warm))
            return
        if not seen <= set(ids):
            queue.put(("lost", reads, warm))
            return
        seen = set(ids)
        for seed, wall, scores in zip(
            table.column("seed").to_pylist(),
            table.column("wall_time_s").to_pylist(),
            table.column("scores_json").to_pylist(),
            strict=True,
        ):
            if wall != float(seed) or json.loads(scores)["validation"]["accuracy"] != seed / 1000:
                queue.put(("wrong values", reads, warm))
                return
        reads += 1
    queue.put(("ok", reads, warm))


def _writer(store: str, start: int, count: int) -> None:
    for seed in range(start, start + count):
        write_result(store, result(seed), sweep="s", study="t")


def test_caching_readers_beside_live_writers_and_compaction_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    writers = [context.Process(target=_writer, args=(str(tmp_path), w * 1000, 60)) for w in range(2)]
    readers = [context.Process(target=_caching_reader, args=(str(tmp_path), 4.0, queue)) for _ in range(2)]
    for p in [*writers, *readers]:
        p.start()
    while any(p.is_alive() for p in writers):
        compact(tmp_path, target_rows=25)
        time.sleep(0.3)
    for p in [*writers, *readers]:
        p.join(60)
        assert p.exitcode == 0
    outcomes = [queue.get(timeout=10) for _ in readers]
    assert all(outcome == "ok" and reads > 0 for outcome, reads, _ in outcomes), outcomes
    assert sum(warm for _, _, warm in outcomes) > 0  # some reads found a cache to use
    assert read_table(tmp_path).equals(old_path(tmp_path))
    frame = read_store(tmp_path)
    assert len(frame) == 120 and frame["row_id"].nunique() == 120
