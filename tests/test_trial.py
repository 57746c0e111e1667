"""Trial identity: the id is a hash of the canonical configuration, the same on any machine and in any order."""

from __future__ import annotations

import hashlib
import json
import pickle

import pytest

from kdgrid.trial import TRIAL_ID_VERSION, Trial, data_order_seed, group_fields, group_key

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


def test_todays_trial_ids_are_pinned():
    # Literal ids: declaring a new option (data_seed, ...) or a new field default must leave existing ids alone.
    assert Trial(**BASE).trial_id == "108bee81a55b5a4d"
    assert Trial(**BASE, seed=1).trial_id == "fdab9a667af25ece"
    trial = Trial(
        task="sst2",
        teacher="bert-base",
        student="bert-mini",
        knowledge=("hidden_mse",),
        strategy="Last-1",
        seed=3,
        options={"soft_t2": True},
    )
    assert trial.trial_id == "46d1a850d12e307d"
    assert "data_seed" not in trial.canonical_json()


def test_the_data_order_follows_the_seed_unless_data_seed_sets_it_apart():
    assert data_order_seed(Trial(**BASE, seed=4)) == 4
    assert data_order_seed(Trial(**BASE, seed=4, options={"data_seed": 7})) == 7
    assert data_order_seed(Trial(**BASE, seed=4, options={"data_seed": 0})) == 0
    # data_seed is part of the id: the same student seed with another data order is another trial
    assert Trial(**BASE, seed=4, options={"data_seed": 7}).trial_id != Trial(**BASE, seed=4).trial_id


def test_seeds_sharing_a_data_seed_share_a_group_and_others_keep_todays_groups():
    seeds = [Trial(**BASE, seed=s, options={"data_seed": 7}) for s in (1, 2, 3)]
    assert len({group_key(t) for t in seeds}) == 1
    assert group_key(seeds[0]) == group_key(Trial(**BASE, seed=7))  # the same batches: the same pass
    assert group_key(Trial(**BASE, seed=1)) != group_key(Trial(**BASE, seed=2))
    # a group's fields (and hence its hash, its checkpoint folder) are those it had before data_seed existed
    assert group_fields(Trial(**BASE, seed=5)) == {
        "task": "polarity",
        "teacher": "minilm-l6",
        "seed": 5,
        "batch_size": 32,
        "max_length": 128,
        "epochs": 3,
        "max_train_samples": None,
    }
