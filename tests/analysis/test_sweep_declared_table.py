"""A sweep file declares its table (`table: 5`): validated, recorded in the store with the sweep's membership, and
what decides the table its trials count in; stores written before keep mapping sweeps to tables by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kdgrid.analysis.tables import tables_in
from kdgrid.analysis.tables_report import load_tidy
from kdgrid.analysis.tidy import legacy_table_of
from kdgrid.bundled_sweeps import bundled_sweep_files
from kdgrid.errors import ConfigError
from kdgrid.grid.expand import load_sweep
from kdgrid.paper import TABLES
from kdgrid.store.membership import memberships_dir, read_memberships, record_membership
from tests.analysis.tables_testing import result, run_kdgrid, write

BASE = {
    "fixed": {"task": "rte", "teacher": "bert-base", "student": "bert-tiny"},
    "axes": {"lr": [1e-4, 1e-3]},
}


def sweep_file(tmp_path: Path, **top: object) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({**BASE, **top}))
    return path


@pytest.mark.parametrize(("written", "table"), [(5, "5"), ("5", "5"), ("demo", "demo"), (None, None)])
def test_the_table_key_is_read_as_a_table_name(tmp_path: Path, written: object, table: str | None) -> None:
    top = {} if written is None else {"table": written}
    assert load_sweep(sweep_file(tmp_path, **top)).table == table


@pytest.mark.parametrize("written", ["table5", 9, True, [5]])
def test_a_table_that_is_not_one_is_refused_naming_the_allowed_ones(tmp_path: Path, written: object) -> None:
    allowed = f"table: must be one of {', '.join(TABLES)} (the table this sweep's trials are laid out in), got {written!r}"
    with pytest.raises(ConfigError, match=re.escape(allowed)):
        load_sweep(sweep_file(tmp_path, table=written))


def test_the_cli_refuses_a_typo_before_running_anything(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    code, _, err = run_kdgrid(capsys, "run", str(sweep_file(tmp_path, table="table5")), "--store", str(store))
    assert code == 2 and "table: must be one of 1, 2, 3, 4, 5, 6, 7, 8, demo" in err
    assert not store.exists() or not any(store.rglob("*.parquet"))


def test_the_declared_table_is_not_part_of_any_trial(tmp_path: Path) -> None:
    plain = load_sweep(sweep_file(tmp_path))
    declared = load_sweep(sweep_file(tmp_path, table=5))
    assert [p.trial.trial_id for p in plain.trials] == [p.trial.trial_id for p in declared.trials]


def test_every_bundled_paper_sweep_declares_the_table_its_name_gave() -> None:
    # the name rule of stores written before agrees with what the files now declare, so old and new stores
    # put the same trials in the same tables
    declared = {
        path.name: load_sweep(path).table for path in bundled_sweep_files("*.yaml") if path.name[0] != "_"
    }
    assert (
        declared.pop("controls.yaml") is None
    )  # its trials count in Table 5 through table5's own membership
    for study in ("layer_selection.yaml", "layer_selection_glue.yaml"):  # no paper table: their own sweep tables
        assert declared.pop(study) is None
    assert declared.pop("assistants.yaml") is None  # not a paper study: `kdgrid tables --sweep assistants` lays it out
    assert declared.pop("methods.yaml") is None  # the literature's methods: `kdgrid tables --sweep methods`
    assert declared.pop("methods_copied.yaml") is None  # their second testbed: `kdgrid tables --sweep methods_copied`
    assert declared.pop("mohawk.yaml") is None  # SSM students by MOHAWK: `kdgrid tables --sweep mohawk`
    # ReAugKD's sweeps are another paper's: no table of this one (`kdgrid tables --sweep`)
    assert declared.pop("reaugkd.yaml") is None and declared.pop("reaugkd_offline.yaml") is None
    assert declared.pop("flex_kd.yaml") is None  # Flex-KD's comparison: `kdgrid tables --sweep flex_kd`
    assert declared == {name: legacy_table_of("main", name) for name in declared} and set(
        declared.values()
    ) == set(TABLES)


def test_the_membership_records_the_table_and_keeps_the_old_file_without_one(tmp_path: Path) -> None:
    trials = {"b": "main", "a": "main"}
    old = record_membership(tmp_path, "mine", trials)
    # without a table the file is byte for byte what stores before declared tables held
    assert (
        old.read_bytes()
        == json.dumps({"sweep": "mine", "trials": {"a": "main", "b": "main"}}, indent=0).encode()
    )
    new = record_membership(tmp_path, "mine", trials, table="5")
    assert new != old and json.loads(new.read_text())["table"] == "5"
    assert {(m.sweep, m.table) for m in read_memberships(tmp_path)} == {("mine", None), ("mine", "5")}


def test_a_sweep_of_any_name_that_declares_its_table_fills_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    made = [
        result(0.7, knowledge=("cos",), strategy="Last"),
        result(0.6, knowledge=("mmd",), strategy="First"),
    ]
    write(store, "main", *made, sweep="my_study")
    assert tables_in(load_tidy(store)) == []  # its name says nothing
    record_membership(store, "my_study", {r.trial.trial_id: "main" for r in made}, table="5")
    tidy = load_tidy(store)
    assert tables_in(tidy) == ["5"]
    assert set(tidy.loc[tidy["table"] == "5", "knowledge"]) == {"cos", "mmd"}


def test_an_old_store_maps_its_sweeps_to_tables_by_name(tmp_path: Path) -> None:
    # rows and a membership file as kdgrid wrote them before sweeps declared tables (no "table" key)
    store = tmp_path / "store"
    made = [result(0.7, knowledge=("cos",), strategy="Last")]
    write(store, "main", *made, sweep="table5_single_match")
    shared = result(0.65, knowledge=("pkd",), strategy="First")
    write(store, "main", shared, sweep="controls")  # run by another sweep, listed by Table 5's
    folder = memberships_dir(store)
    folder.mkdir()
    listed = {r.trial.trial_id: "main" for r in [*made, shared]}
    content = json.dumps({"sweep": "table5_single_match", "trials": dict(sorted(listed.items()))}, indent=0)
    (folder / "table5_single_match.0123456789abcdef.json").write_text(content)
    assert [m.table for m in read_memberships(store)] == [None]
    tidy = load_tidy(store)
    assert tables_in(tidy) == ["5"]
    assert set(tidy.loc[tidy["table"] == "5", "knowledge"]) == {"cos", "pkd"}
