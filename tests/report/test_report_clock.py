"""`kdgrid report`'s printed time is the command's wall time: run as its own process it counts from the process's
loading of kdgrid (the command line and its libraries included); run inside a process, from the call."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

import kdgrid
from kdgrid import command_clock
from kdgrid.cli import main
from tests.analysis.tables_testing import run_kdgrid
from tests.report.store_testing import make_store


def printed_seconds(text: str) -> float:
    found = re.search(r"updated in ([0-9.]+) s", text)
    assert found, text
    return float(found.group(1))


def test_a_process_command_counts_from_loading_kdgrid_an_in_process_call_from_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    make_store(store)
    # as if this process had begun loading kdgrid 100 s ago (the script's or `python -m`'s imports)
    monkeypatch.setattr(kdgrid, "LOADED_AT", time.perf_counter() - 100.0)
    monkeypatch.setattr(sys, "argv", ["kdgrid", "report", "--store", str(store), "--out", str(tmp_path / "a")])
    with pytest.raises(SystemExit) as done:
        main()  # argv None: the process's own command line (the command line exits when done)
    assert done.value.code == 0
    assert printed_seconds(capsys.readouterr().out) >= 100.0
    code, printed, err = run_kdgrid(capsys, "report", "--store", str(store), "--out", str(tmp_path / "b"))
    assert code == 0, err  # a call inside a process: from the call
    assert printed_seconds(printed) < 100.0
    before = time.perf_counter()
    assert before <= command_clock.started() <= time.perf_counter()  # no command running: now, not a stale mark
