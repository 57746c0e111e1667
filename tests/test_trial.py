"""Trial identity: the id is a hash of the canonical configuration, the same on any machine and in any order."""

from __future__ import annotations

import hashlib
import json
import pickle

import pytest

from kdgrid.trial import TRIAL_ID_VERSION, Trial, group_key

BASE = {"task": "polarity", "teacher": "minilm-l6", "student": "bert-tiny"}


def test_id_is_the_sha256_of_sorted_canonical_json_with_defaults_filled_in():
    trial = Trial(**BASE)
    text = trial.canonical_json()
    decoded = json.loads(text)
    assert list(decoded) == sorted(decoded) and " " not in text
    assert decoded["v"] == TRIAL_ID_VERSION and decoded["epochs"] == 3 and decoded["knowledge"] == []
    assert trial.trial_id == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_equal_configurations_have_equal_ids_whatever_the_spelling_of_containers_and_numbers():
    a = Trial(**BASE, knowledge=["hidden_mse"], strategy="Last-1", temperature=2, options={"b": 1, "a": 2})
    b = Trial(
        **BASE, knowledge=("hidden_mse",), strategy="Last-1", temperature=2.0, options=[("a", 2), ("b", 1)]
    )
    assert a == b and hash(a) == hash(b) and a.trial_id == b.trial_id
    assert pickle.loads(pickle.dumps(a)).trial_id == a.trial_id
    assert Trial.from_dict(a.to_dict() | {"options": dict(a.options)}) == a


def test_any_changed_field_changes_the_id():
    base = Trial(**BASE)
    for change in (
        {"seed": 1},
        {"alpha": 0.2},
        {"beta": "auto"},
        {"knowledge": ("pkd",)},
        {"init": "random"},
    ):
        assert Trial(**BASE, **change).trial_id != base.trial_id, change


def test_unknown_keys_are_refused_naming_the_allowed_ones():
    with pytest.raises(KeyError, match=r"\['epoch'\].*allowed: task, teacher"):
        Trial.from_dict({**BASE, "epoch": 3})


def test_group_key_ignores_what_students_may_differ_in():
    a = Trial(**BASE, knowledge=("pkd",), strategy="First", lr=1e-3)
    b = Trial(**{**BASE, "student": "bert-mini"}, alpha=0.5)
    assert group_key(a) == group_key(b)
    assert group_key(a) != group_key(Trial(**BASE, seed=1))
