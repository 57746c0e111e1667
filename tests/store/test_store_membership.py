"""`kdgrid.store.membership`: which trials each sweep lists, recorded in the store and read back."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from kdgrid.errors import KdgridError
from kdgrid.store.membership import SweepMembership, memberships_dir, read_memberships, record_membership


def test_a_store_without_memberships_reads_as_none(tmp_path: Path) -> None:
    assert read_memberships(tmp_path / "never-written") == []
    assert read_memberships(tmp_path) == []


def test_recorded_then_read_back_and_recording_again_writes_nothing(tmp_path: Path) -> None:
    trials = {"b" * 16: "fixed_flops", "a" * 16: "fixed_params"}
    first = record_membership(tmp_path, "table2_width_depth", trials)
    mtime = first.stat().st_mtime_ns
    again = record_membership(tmp_path, "table2_width_depth", dict(reversed(list(trials.items()))))
    assert again == first and first.stat().st_mtime_ns == mtime
    assert [p.name for p in memberships_dir(tmp_path).iterdir()] == [first.name]
    assert first.name.startswith("table2_width_depth.") and first.suffix == ".json"
    assert read_memberships(tmp_path) == [SweepMembership("table2_width_depth", trials)]


def test_an_edited_sweep_adds_a_file_and_readers_see_both(tmp_path: Path) -> None:
    record_membership(tmp_path, "mine", {"t1": "main"})
    record_membership(tmp_path, "mine", {"t1": "main", "t2": "main"})
    read = read_memberships(tmp_path)
    assert len(read) == 2 and {s.sweep for s in read} == {"mine"}
    assert set().union(*(s.trials for s in read)) == {"t1", "t2"}


def test_odd_sweep_names_stay_one_visible_file_each(tmp_path: Path) -> None:
    for name in (".hidden", "a/b", "a%2Fb", "üñï code"):
        record_membership(tmp_path, name, {"t": "main"})
    names = sorted(p.name for p in memberships_dir(tmp_path).iterdir())
    assert len(names) == 4 and not any(n.startswith(".") or "/" in n for n in names)
    assert sorted(s.sweep for s in read_memberships(tmp_path)) == sorted(
        [".hidden", "a/b", "a%2Fb", "üñï code"]
    )


def test_temporary_files_are_not_read_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    record_membership(tmp_path, "mine", {"t1": "main"})
    folder = memberships_dir(tmp_path)
    (folder / ".tmp-123-half.json").write_text('{"sweep": "mi')
    assert [s.sweep for s in read_memberships(tmp_path)] == ["mine"]
    (folder / "other.json").write_text(json.dumps({"sweep": "x", "trials": ["t1"]}))
    with pytest.raises(KdgridError, match=r"other.json: not a sweep membership file"):
        read_memberships(tmp_path)
    (folder / "other.json").write_text("{not json")
    with pytest.raises(KdgridError, match=r"other.json: not a sweep membership file"):
        read_memberships(tmp_path)


def _record_many(store: str, sweep: str) -> None:
    for _ in range(30):
        record_membership(store, sweep, {f"{sweep}-{i}": "main" for i in range(200)})


def test_concurrent_runs_of_sweeps_never_collide(tmp_path: Path) -> None:
    # Two processes per sweep, two sweeps, all recording at once: one complete file per sweep, nothing left over.
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_record_many, args=(str(tmp_path), s)) for s in ("s1", "s2", "s1", "s2")
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    read = {s.sweep: s.trials for s in read_memberships(tmp_path)}
    assert sorted(read) == ["s1", "s2"] and all(len(trials) == 200 for trials in read.values())
    assert len(list(memberships_dir(tmp_path).iterdir())) == 2
