"""`kdgrid prefetch --check` against a Hub-shaped cache (tests/hub), offline refusals, and `kdgrid run` requiring a
prefetch: workers run offline once everything is cached, ``--online`` opts out, a missing item is one message."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app, main
from kdgrid.errors import ConfigError
from kdgrid.store.layout import rows_dir
from kdgrid.sweep_run import RunOptions, run_sweep
from tests.hub.conftest import small_hub, use_hub  # noqa: F401 (fixtures of the Hub-shaped cache)
from tests.launch.fakes import job_to_store

worker_environments: list[dict[str, str | None]] = []


def recording_job_to_store(trials, store_dir, *, sweep, studies=None, checkpoint_dir=None) -> None:
    """The fake job (tests.launch.fakes) that also records the Hub switches of the environment it runs in."""
    worker_environments.append({name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")})
    job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir)


FAKE = {"job_fn": f"{__name__}:recording_job_to_store", "local_progress": False}


def hub_sweep(tmp_path: Path) -> Path:
    """Two GLUE tasks with the paper's BERT-base teachers and a pretrained BERT-tiny: 5 Hub items, all in
    ``small_hub``."""
    path = tmp_path / "hubby.yaml"
    spec = {"name": "hubby", "fixed": {"teacher": "bert-base", "student": "bert-tiny", "init": "pretrain"},
            "axes": {"task": ["mrpc", "stsb"]}}  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def check(*sweeps: Path | str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["prefetch", *map(str, sweeps), "--check"], terminal_width=200)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def user_error(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    return " ".join(err.split())


def copy_of(hub: Path, tmp_path: Path) -> Path:
    target = tmp_path / "hf"
    shutil.copytree(hub, target, symlinks=True)
    return target


def test_check_finds_everything_in_a_complete_cache(
    small_hub: Path, use_hub: Callable[[Path], dict[str, str]], tmp_path: Path  # noqa: F811
) -> None:
    use_hub(small_hub)
    code, out = check(hub_sweep(tmp_path))
    assert code == 0, out
    assert "5 of 5 item(s) cached, 0 missing" in out and "missing" not in out.split("cached,")[0]


def test_check_lists_a_removed_model_and_a_removed_dataset_as_missing(
    small_hub: Path, use_hub: Callable[[Path], dict[str, str]], tmp_path: Path  # noqa: F811
) -> None:
    hub = copy_of(small_hub, tmp_path)
    shutil.rmtree(hub / "hub" / "models--textattack--bert-base-uncased-STS-B")
    shutil.rmtree(hub / "datasets" / "nyu-mll___glue" / "mrpc")
    use_hub(hub)
    code, out = check(hub_sweep(tmp_path))
    assert code == 1, out
    assert "3 of 5 item(s) cached, 2 missing" in out
    missing = [line for line in out.splitlines() if line.startswith("│") and line.rstrip("│ ").endswith("missing")]
    assert len(missing) == 2
    assert any("textattack/bert-base-uncased-STS-B" in line for line in missing)
    assert any("nyu-mll/glue" in line and "mrpc" in line for line in missing)
    assert "kdgrid prefetch hubby" in out


def test_a_teacher_without_its_vocabulary_is_missing(
    small_hub: Path, use_hub: Callable[[Path], dict[str, str]], tmp_path: Path  # noqa: F811
) -> None:
    hub = copy_of(small_hub, tmp_path)
    for link in (hub / "hub" / "models--textattack--bert-base-uncased-MRPC" / "snapshots").glob("*/vocab.txt"):
        link.unlink()
    use_hub(hub)
    code, out = check(hub_sweep(tmp_path))
    assert code == 1 and "4 of 5 item(s) cached, 1 missing" in out, out


def test_a_sweep_that_needs_nothing_from_the_hub_checks_clean(tmp_path: Path) -> None:
    code, out = check("demo")
    assert code == 0 and "nothing to fetch from the Hub" in out


def test_prefetch_offline_or_of_an_unknown_sweep_is_one_message(
    small_hub: Path,  # noqa: F811
    use_hub: Callable[[Path], dict[str, str]],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hub = copy_of(small_hub, tmp_path)
    shutil.rmtree(hub / "hub" / "models--google--bert_uncased_L-2_H-128_A-2")
    use_hub(hub)
    message = user_error(capsys, "prefetch", hub_sweep(tmp_path))
    assert "offline mode is on" in message and "HF_HUB_OFFLINE=1" in message and "--check" in message
    assert "no_such_sweep: cannot read the file" in user_error(capsys, "prefetch", "no_such_sweep")


def test_run_with_everything_cached_runs_its_workers_offline(
    small_hub: Path, use_hub: Callable[[Path], dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    use_hub(small_hub)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # the caller's own switches off: run_sweep sets them
        monkeypatch.delenv(name)
    worker_environments.clear()
    lines: list[str] = []
    outcome = run_sweep(
        hub_sweep(tmp_path),
        tmp_path / "store",
        RunOptions(executor_settings=FAKE),
        log=lines.append,
    )
    assert outcome.ok and outcome.done_now == 2
    assert worker_environments == [{"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}] * 2
    assert any("workers run offline" in line for line in lines)
    assert "HF_HUB_OFFLINE" not in os.environ  # restored after the run


def test_run_with_an_item_missing_refuses_naming_prefetch_unless_online(
    small_hub: Path,  # noqa: F811
    use_hub: Callable[[Path], dict[str, str]],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hub = copy_of(small_hub, tmp_path)
    shutil.rmtree(hub / "datasets" / "nyu-mll___glue" / "stsb")
    use_hub(hub)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    sweep, store = hub_sweep(tmp_path), tmp_path / "store"
    with pytest.raises(ConfigError, match=r"dataset nyu-mll/glue \(stsb\).*Run `kdgrid prefetch .*hubby.yaml`"):
        run_sweep(sweep, store, RunOptions(executor_settings=FAKE))
    assert not list(rows_dir(store).glob("*")) if rows_dir(store).exists() else True
    message = user_error(capsys, "run", sweep, "--store", store, "--set", f"job_fn={FAKE['job_fn']}")
    assert "kdgrid prefetch" in message and "--online" in message
    worker_environments.clear()
    outcome = run_sweep(sweep, store, RunOptions(executor_settings=FAKE, online=True))
    assert outcome.ok and worker_environments == [{"HF_HUB_OFFLINE": None, "HF_DATASETS_OFFLINE": None}] * 2


def test_a_sweep_without_hub_items_is_not_made_offline(tmp_path: Path, teacher: str) -> None:
    sweep = tmp_path / "local.yaml"
    sweep.write_text(json.dumps({"name": "local", "fixed": {"task": "synthetic-single-binary", "teacher": teacher,
                                                             "student": "bert-tiny", "init": "random"}}))  # fmt: skip
    worker_environments.clear()
    outcome = run_sweep(sweep, tmp_path / "store", RunOptions(executor_settings=FAKE))
    unchanged = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    assert outcome.ok and worker_environments == [unchanged]


def test_a_missing_item_inside_a_worker_offline_is_one_message_naming_prefetch(
    small_hub: Path, use_hub: Callable[[Path], dict[str, str]]  # noqa: F811
) -> None:
    from kdgrid.core.data import get_task
    from kdgrid.core.data.glue import load_glue_splits
    from kdgrid.core.model.models import load_pretrained_bert
    from kdgrid.errors import KdgridError

    use_hub(small_hub)
    with pytest.raises(KdgridError, match=r"textattack/bert-base-uncased-RTE.*kdgrid prefetch SWEEP"):
        load_pretrained_bert("textattack/bert-base-uncased-RTE", 2, what="teacher")
    with pytest.raises(KdgridError, match=r"(?s)'rte'.*kdgrid prefetch SWEEP"):
        load_glue_splits(get_task("rte"))
