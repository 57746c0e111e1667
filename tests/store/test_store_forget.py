"""`kdgrid store forget`: the named trials leave loose and compacted files alike, every other row stays, the
trials read as pending again; unknown ids and failed writes change nothing."""

from __future__ import annotations

import errno
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

from kdgrid.cli import main
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.grid.state import sweep_state
from kdgrid.result import TrialResult
from kdgrid.store import compact, failure_result, layout, read_store, write_result
from kdgrid.store.compact import StoreMaintenanceError
from kdgrid.store.forget import forget, forgotten_dir
from kdgrid.trial import Trial

compact_module = importlib.import_module("kdgrid.store.compact")  # `compact` is also its function's name
forget_module = importlib.import_module("kdgrid.store.forget")

TASKS = ["rte", "mrpc", "qqp", "sst2", "cola", "stsb"]


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        json.dumps({"fixed": {"teacher": "bert-base", "student": "bert-tiny"}, "axes": {"task": TASKS}})
    )
    return path


def done(trial: Trial, seed: int) -> TrialResult:
    return TrialResult(
        trial=trial, status="done", scores={"validation": {"accuracy": seed / 100}}, wall_time_s=1.0
    )


def mixed_store(store: Path, trials: list[Trial]) -> None:
    """Trials 0-2 done and compacted (trial 1 with a failed row before it), trial 3 failed in the part and done
    loose, trial 4 done loose, trial 5 done loose in another sweep."""
    write_result(
        store, failure_result(trials[1], error_type="OOM", message="out of memory"), sweep="s", study="a"
    )
    for index in range(3):
        write_result(store, done(trials[index], index), sweep="s", study="a")
    write_result(store, failure_result(trials[3], error_type="OOM", message="again"), sweep="s", study="a")
    compact(store)
    write_result(store, done(trials[3], 3), sweep="s", study="a")
    write_result(store, done(trials[4], 4), sweep="s", study="a")
    write_result(store, done(trials[5], 5), sweep="other", study="b")


def by_row(store: Path) -> pd.DataFrame:
    return read_store(store).sort_values("row_id").reset_index(drop=True)


def snapshot(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def test_forgetting_two_trials_keeps_every_other_row_and_makes_them_pending(
    tmp_path: Path, sweep_file: Path
) -> None:
    sweep = load_sweep(sweep_file)
    trials = [p.trial for p in sweep.trials]
    store = tmp_path / "store"
    mixed_store(store, trials)
    before = by_row(store)
    assert len(layout.visible_files(layout.compacted_dir(store))) == 1
    gone = {trials[1].trial_id, trials[3].trial_id}  # compacted only; compacted and loose

    report = forget(store, sorted(gone))

    assert report.trials == sorted(gone) and report.rows == 4  # 2 rows each
    assert (report.loose_files, report.parts_rewritten, report.parts_written) == (1, 1, 1)
    after = by_row(store)
    expected = before[~before["trial_id"].isin(gone)].reset_index(drop=True)
    assert after.equals(expected)  # every other row, every value
    state = sweep_state(sweep, store)
    assert {t.trial_id for t in state.pending} == gone
    assert {t.trial_id for t in state.done} == {t.trial_id for t in trials} - gone
    kept = pd.read_parquet(report.kept_in)
    assert report.kept_in.parent == forgotten_dir(store) and set(kept["trial_id"]) == gone and len(kept) == 4

    # undo: the forgotten rows moved into compacted/ are read again, exactly as before
    report.kept_in.rename(layout.compacted_dir(store) / report.kept_in.name)
    assert by_row(store).equals(before)


def test_forget_clears_the_read_cache(tmp_path: Path) -> None:
    trials = [Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=s) for s in range(70)]
    for index, trial in enumerate(trials):
        write_result(tmp_path, done(trial, index), sweep="s", study="a")
    read_store(tmp_path)  # 70 loose files decoded: cached
    assert list(layout.read_cache_dir(tmp_path).glob("*.arrow"))
    forget(tmp_path, [trials[0].trial_id])
    assert not list(layout.read_cache_dir(tmp_path).glob("*.arrow"))
    frame = read_store(tmp_path)
    assert len(frame) == 69 and trials[0].trial_id not in set(frame["trial_id"])


def test_forget_by_sweep(tmp_path: Path, sweep_file: Path) -> None:
    trials = [p.trial for p in load_sweep(sweep_file).trials]
    store = tmp_path / "store"
    mixed_store(store, trials)
    with pytest.raises(ConfigError, match="no row of sweep other"):
        forget(store, [trials[0].trial_id], sweep="other")
    with pytest.raises(ConfigError, match="--sweep nope: no row"):
        forget(store, sweep="nope")
    report = forget(store, sweep="other")
    assert report.trials == [trials[5].trial_id]
    assert set(read_store(store)["trial_id"]) == {t.trial_id for t in trials[:5]}


def test_unknown_trial_ids_are_refused_by_name_and_nothing_changes(
    tmp_path: Path, sweep_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trials = [p.trial for p in load_sweep(sweep_file).trials]
    store = tmp_path / "store"
    mixed_store(store, trials)
    before = snapshot(store)
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "forget", trials[0].trial_id, "deadbeef", "cafe", "--store", str(store)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "no row in the store" in err and "cafe, deadbeef" in err and "Traceback" not in err
    assert snapshot(store) == before
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "forget", "--store", str(store)])
    assert exit_info.value.code == 2 and "name the trials to forget" in capsys.readouterr().err


def test_the_cli_forgets_and_says_where_the_rows_are_kept(
    tmp_path: Path, sweep_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trials = [p.trial for p in load_sweep(sweep_file).trials]
    store = tmp_path / "store"
    mixed_store(store, trials)
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "forget", trials[4].trial_id, "--store", str(store)])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "forgot 1 trial(s), 1 row(s)" in out and str(forgotten_dir(store)) in out
    assert trials[4].trial_id not in set(read_store(store)["trial_id"])


def test_a_failed_write_forgets_nothing(
    tmp_path: Path, sweep_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trials = [p.trial for p in load_sweep(sweep_file).trials]
    store = tmp_path / "store"
    mixed_store(store, trials)
    before = by_row(store)
    real = compact_module.write_table_atomically
    calls = {"n": 0}

    def disk_full_on_the_second_file(table, final, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(final))
        return real(table, final, **kw)

    monkeypatch.setattr(compact_module, "write_table_atomically", disk_full_on_the_second_file)
    with pytest.raises(StoreMaintenanceError, match="no input was deleted"):
        forget(store, [trials[1].trial_id, trials[3].trial_id])
    assert by_row(store).equals(before)
    assert not list(forgotten_dir(store).glob("*.parquet"))  # the forgotten rows' file was removed again


def test_a_failure_between_write_and_delete_loses_no_row(
    tmp_path: Path, sweep_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trials = [p.trial for p in load_sweep(sweep_file).trials]
    store = tmp_path / "store"
    mixed_store(store, trials)
    before = by_row(store)

    def killed(store, inputs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(forget_module, "delete_inputs", killed)
    with pytest.raises(KeyboardInterrupt):
        forget(store, [trials[1].trial_id])
    assert by_row(store).equals(before)  # the old part still holds every row; its rewrite repeats the others
    monkeypatch.undo()
    forget(store, [trials[1].trial_id])  # running it again finishes the job
    assert by_row(store).equals(before[before["trial_id"] != trials[1].trial_id].reset_index(drop=True))
