"""The trial options schema: every option kdgrid reads is declared once, with its type; values are checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kdgrid.core.options import OPTIONS, option_problems, register_option
from kdgrid.core.trial_rules import option_problems as trial_option_problems
from kdgrid.trial import Trial

PACKAGE = Path(__file__).resolve().parents[2] / "kdgrid"


def test_every_option_the_package_reads_is_declared() -> None:
    read = set()
    for path in PACKAGE.rglob("*.py"):
        read |= set(re.findall(r"""\.option\(\s*["'](\w+)["']""", path.read_text()))
    assert read, "no trial.option(...) call found: the pattern is out of date"
    assert read <= set(OPTIONS), sorted(read - set(OPTIONS))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"soft_t2": "banana"}, "soft_t2='banana' is invalid; allowed: true or false"),
        ({"soft_t2": 1}, "soft_t2=1 is invalid"),
        ({"auto_batches": 0}, "auto_batches=0 is invalid; allowed: an integer >= 1"),
        ({"auto_batches": 2.5}, "auto_batches=2.5"),
        ({"max_grad_norm": float("nan")}, "max_grad_norm=nan"),
        ({"preload_layers": (1, "two")}, "preload_layers=(1, 'two')"),
        ({"data_seed": -1}, "data_seed=-1 is invalid; allowed: an integer >= 0 or null (the seed of the data order"),
        ({"data_seed": 1.5}, "data_seed=1.5 is invalid"),
        ({"data_seed": True}, "data_seed=True is invalid"),
        ({"colour": "red"}, "unknown option 'colour'; allowed: adakd_function, alp_kd_scale, alpha_end, alpha_schedule, auto_batches, ctkd_lambda_max, ctkd_max_temperature, ctkd_min_temperature, ctkd_ramp, data_seed, dot_delta, dual_head, example_weight, grad_cosine_batches, init_recipe, knowledge_weight_end, knowledge_weight_schedule, layer_curriculum, learned_lr_scale, lkd_holdout, mask_by, mask_fraction, mask_input, max_dev_samples, max_grad_norm, mohawk_stage, optimizer, preload_layers, projector_members, projector_spectral"),
        ({"pkd.colour": "red"}, "knowledge 'pkd' has no option 'colour'; allowed: ['eps', 'scale']"),
        ({"pkd.eps": 0}, "pkd.eps=0 is invalid; allowed: a positive number"),
        ({"PKD.scale": "mean"}, "write it as pkd.scale"),
        ({"mmd.second_s": 1}, "has no option 'second_s'"),
        ({"cos.eps": 1e-6}, "'cos.eps' sets a variant of 'cos', which the trial does not use"),
        ({"soft_label.t2": True}, "'soft_label.t2' sets a variant of 'soft_label'"),
    ],
)
def test_a_wrong_option_is_one_problem_naming_what_is_allowed(options: dict, message: str) -> None:
    problems = option_problems(options.items(), ["pkd", "mmd"])
    assert len(problems) == 1 and message in problems[0], problems


def test_good_options_pass() -> None:
    options = {
        "soft_t2": True,
        "auto_batches": 3,
        "max_grad_norm": None,
        "preload_layers": (1, 3),
        "pkd.scale": "mean",
        "pkd.eps": 1e-9,
    }
    assert option_problems(options.items(), ["pkd"]) == []
    trial = Trial("rte", "bert-base", "bert-tiny", knowledge=("pkd",), strategy="Last", options=options)
    assert trial_option_problems(trial) == []


def test_registering_an_option_is_one_line_and_idempotent() -> None:
    register_option("test_only_flag", "bool", False, "an option only this test reads")
    register_option("test_only_flag", "bool", False, "an option only this test reads")
    try:
        assert option_problems([("test_only_flag", True)], []) == []
        assert "test_only_flag='yes'" in option_problems([("test_only_flag", "yes")], [])[0]
        with pytest.raises(ValueError, match="already declared differently"):
            register_option("test_only_flag", "int", 0, "another meaning")
    finally:
        del OPTIONS["test_only_flag"]
