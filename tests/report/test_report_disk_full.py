"""A full disk while the report is written: one message naming the file and the free space, exit status 2, and
no partial report folder left behind (the store untouched)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kdgrid import cli
from kdgrid.store import write_result
from tests.report.store_testing import STUDY, SWEEP, demo_trial, done_result, make_store

_write_text = Path.write_text


def report(store: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int | str | None, str]:
    """``kdgrid report`` through its console entry point: (exit status, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "--store", str(store), "--out", str(out)])
    return exit_info.value.code, capsys.readouterr().err


def test_a_full_disk_names_the_file_and_leaves_no_partial_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    make_store(store)
    written: list[Path] = []

    def full_after_two(self: Path, *args, **kwargs):
        if out in self.parents:
            if len(written) >= 2:
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
            written.append(self)
        return _write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_after_two)
    code, err = report(store, out, capsys)
    assert code == 2, err
    message = " ".join(err.split())
    assert "cannot write the report file" in message and "No space left on device" in message
    assert str(out) in message and " free)" in message and "partial report folder" in message
    assert len(written) == 2 and not out.exists()  # pages were written, then all of it removed
    assert (store / "rows").is_dir()  # the store is as it was


def test_a_full_disk_in_an_existing_report_keeps_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    make_store(store)
    assert report(store, out, capsys)[0] in (0, None)

    def full(self: Path, *args, **kwargs):
        if out in self.parents:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return _write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    code, err = report(store, out, capsys)
    assert code == 2 and "No space left on device" in err
    assert (out / "index.html").is_file()  # the report written before is kept: only a new folder is removed


def folder_contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_full_disk_halfway_through_an_update_leaves_every_file_as_the_last_update_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    make_store(store)
    assert report(store, out, capsys)[0] in (0, None)
    before = folder_contents(out)
    # a new done row: the next update rewrites its trial's page, the summary pages and the manifest
    write_result(store, done_result(demo_trial(["soft"], "First-1", seed=7), 0.91, 60.0), sweep=SWEEP, study=STUDY)
    written: list[Path] = []

    def full_after_three(self: Path, *args, **kwargs):
        if out in self.parents:
            if len(written) >= 3:
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
            written.append(self)
        return _write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_after_three)
    code, err = report(store, out, capsys)
    assert code == 2 and "No space left on device" in err, err
    assert len(written) == 3  # three new files were written in full before the disk filled...
    assert folder_contents(out) == before  # ...and none of them replaced the old ones: no file is half new
    monkeypatch.setattr(Path, "write_text", _write_text)
    assert report(store, out, capsys)[0] in (0, None)  # with room again, the update goes through
    after = folder_contents(out)
    assert after["index.html"] != before["index.html"] and not any(".staged-" in name for name in after)
