"""dot_adam, kdgrid's own Adam form of DOT (not the paper's): at Delta = 0 it is torch's AdamW, and at Delta > 0 it
steps as its equations written again in numpy; its options' rules, memory, preset and checkpointed state."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from kdgrid.core.method_registry import method_memory
from kdgrid.core.methods.dot.adam import DotAdam
from kdgrid.core.methods.dot.optimizer import step_hooks
from kdgrid.core.methods.dot.spec import DOT_ADAM_BETAS, DOT_ADAM_EPS, DOT_MOMENTUM
from kdgrid.core.optim import build_optimizer
from kdgrid.core.options import option_problems
from kdgrid.core.trial_rules import method_combination_problems as method_problems
from kdgrid.core.trial_rules import trial_problems
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.grid.memory_estimate import method_facts
from kdgrid.trial import Trial
from tests.method_references._numpy import draw
from tests.method_references.dot_adam import ReferenceDotAdam

LR, WD, DELTA = 0.01, 0.01, 0.075


class Tiny(torch.nn.Module):
    """A decayed weight, an undecayed bias and LayerNorm (kdgrid's decay groups), and a projection."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.dense = torch.nn.Linear(4, 3)
        self.LayerNorm = torch.nn.LayerNorm(3)
        self.projection = torch.nn.Linear(3, 2, bias=False)


def split_gradients(step: int, params: list[torch.Tensor], task_only: set[int], kd_only: set[int]):
    """Random task and distillation gradients of ``params`` for ``step`` (None on the side a parameter lacks)."""
    task = [None if i in kd_only else torch.from_numpy(draw(tuple(p.shape), 1000 + 100 * step + i)).to(p.dtype)
            for i, p in enumerate(params)]  # fmt: skip
    distill = [None if i in task_only else torch.from_numpy(draw(tuple(p.shape), 1050 + 100 * step + i)).to(p.dtype)
               for i, p in enumerate(params)]  # fmt: skip
    return task, distill


def test_the_betas_and_eps_are_those_of_the_students_adamw() -> None:
    signature = inspect.signature(torch.optim.AdamW).parameters
    assert signature["betas"].default == DOT_ADAM_BETAS and signature["eps"].default == DOT_ADAM_EPS
    adamw, _ = build_optimizer([Tiny()], LR, WD, total_steps=10, warmup_ratio=0.0)
    ours, _ = build_optimizer([Tiny()], LR, WD, total_steps=10, warmup_ratio=0.0, kind="dot_adam")
    assert isinstance(ours, DotAdam)
    for a, b in zip(adamw.param_groups, ours.param_groups, strict=True):
        assert (a["betas"], a["eps"], a["weight_decay"]) == (b["betas"], b["eps"], b["weight_decay"])
    assert ours.param_groups[0]["delta"] == DELTA  # dot_delta unset: DOT's 0.075
    assert DOT_ADAM_BETAS[0] == DOT_MOMENTUM  # so dot_delta's one range [0, 1 - mu) fits both optimizers


def test_with_delta_zero_dot_adam_is_torchs_adamw_on_the_summed_gradient() -> None:
    """Six steps under kdgrid's warm-up schedule, from kdgrid's decay groups: dot_adam (Delta 0) handed the two
    gradients apart against torch's AdamW (kdgrid's ``adamw``) handed their sum; the bias has a task gradient only
    and the projection a distillation gradient only (their missing side is zero in the sum)."""
    ours_model, theirs_model = Tiny(), Tiny()
    kwargs = {"total_steps": 12, "warmup_ratio": 0.25}
    ours, ours_schedule = build_optimizer([ours_model], LR, WD, kind="dot_adam", options={"dot_delta": 0}, **kwargs)
    theirs, theirs_schedule = build_optimizer([theirs_model], LR, WD, **kwargs)
    assert isinstance(theirs, torch.optim.AdamW)
    params = [p for group in ours.param_groups for p in group["params"]]
    reference = [p for group in theirs.param_groups for p in group["params"]]
    names = {id(p): name for name, p in ours_model.named_parameters()}
    task_only = {i for i, p in enumerate(params) if names[id(p)] == "dense.bias"}
    kd_only = {i for i, p in enumerate(params) if names[id(p)].startswith("projection")}
    assert task_only and kd_only
    for step in range(6):
        task, distill = split_gradients(step, params, task_only, kd_only)
        ours.set_gradients(params, task, distill)
        ours.step()
        for p, g_t, g_d in zip(reference, task, distill, strict=True):
            p.grad = (g_t if g_t is not None else 0) + (g_d if g_d is not None else 0)
        theirs.step()
        ours_schedule.step()
        theirs_schedule.step()
    for name, p in ours_model.named_parameters():
        torch.testing.assert_close(p, dict(theirs_model.named_parameters())[name], rtol=0, atol=1e-6)
    assert not torch.equal(ours_model.dense.weight, Tiny().dense.weight)  # it moved


def run_against_reference(delta: float, steps: int = 5) -> tuple[list[torch.Tensor], list[np.ndarray]]:
    """dot_adam and the numpy reference, float64, from one start: a decayed weight with both gradients, an
    undecayed bias with both, a decayed weight with the distillation gradient only, a bias with the task one only."""
    shapes = [(3, 4), (3,), (2, 3), (2,)]
    start = [draw(shape, 10 + i) for i, shape in enumerate(shapes)]
    ours = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in start]
    optimizer = DotAdam(
        [{"params": [ours[0], ours[2]], "weight_decay": WD}, {"params": [ours[1], ours[3]], "weight_decay": 0.0}],
        lr=LR, delta=delta,
    )  # fmt: skip
    reference = ReferenceDotAdam(start, [WD, 0.0, WD, 0.0], LR, 0.9, 0.999, delta, 1e-8)
    for step in range(steps):
        task, distill = split_gradients(step, ours, task_only={3}, kd_only={2})
        optimizer.set_gradients(ours, task, distill)
        optimizer.step()
        reference.step(
            [None if g is None else g.numpy() for g in task], [None if g is None else g.numpy() for g in distill]
        )
    return [p.detach() for p in ours], reference.params


def test_dot_adam_steps_as_its_equations_written_in_numpy() -> None:
    ours, theirs = run_against_reference(DELTA)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=0, atol=1e-6)
    # and the split moments matter: Delta = 0.075 is not Delta = 0 where a parameter has both gradients
    plain, _ = run_against_reference(0.0)
    assert not np.allclose(ours[0].numpy(), plain[0].numpy(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours[2].numpy(), plain[2].numpy())  # one-sided: AdamW, whatever Delta


def test_its_state_round_trips_through_a_state_dict() -> None:
    """A checkpoint mid-way (three tensors and the step per parameter) continues exactly as the run that kept
    going."""
    shapes = [(3, 4), (2,)]

    def make() -> tuple[list[torch.nn.Parameter], DotAdam]:
        params = [torch.nn.Parameter(torch.from_numpy(draw(s, 20 + i)).float()) for i, s in enumerate(shapes)]
        return params, DotAdam([{"params": params, "weight_decay": WD}], lr=LR, delta=DELTA)

    def steps(params: list[torch.nn.Parameter], optimizer: DotAdam, which: range) -> None:
        for step in which:
            optimizer.set_gradients(params, *split_gradients(step, params, task_only=set(), kd_only={1}))
            optimizer.step()

    straight, straight_opt = make()
    steps(straight, straight_opt, range(6))
    first, first_opt = make()
    steps(first, first_opt, range(3))
    state = {"params": [p.detach().clone() for p in first], "optimizer": first_opt.state_dict()}
    assert set(first_opt.state[first[0]]) >= {"step", "task_moment", "distill_moment", "second_moment"}
    resumed, resumed_opt = make()
    with torch.no_grad():
        for p, saved in zip(resumed, state["params"], strict=True):
            p.copy_(saved)
    resumed_opt.load_state_dict(state["optimizer"])
    steps(resumed, resumed_opt, range(3, 6))
    for a, b in zip(straight, resumed, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="call set_gradients first"):
        resumed_opt.step()


BASE = {"task": "sst2", "teacher": "bert-base", "student": "bert-tiny"}


def test_its_options_and_combinations_are_checked() -> None:
    assert option_problems([("optimizer", "dot_adam"), ("dot_delta", 0.05)], ()) == []
    typo = option_problems([("optimizer", "dot_adm")], ())
    assert typo == [
        "option optimizer='dot_adm' is invalid; allowed: adamw, dot, dot_adam; did you mean 'dot_adam' or 'dot'?"
    ]
    assert option_problems([("optimizer", "dot_adam"), ("dot_delta", 0.1)], ())[0].startswith(
        "option dot_delta=0.1 is invalid; allowed: a number in [0, 0.1)"
    )
    assert method_problems(Trial(**BASE, options={"optimizer": "dot_adam", "dot_delta": 0.05})) == []
    assert method_problems(Trial(**BASE, options={"optimizer": "dot_adam", "dot_form": "paper"})) == [
        "option dot_form is only for optimizer 'dot': 'dot_adam' steps a one-sided parameter as plain AdamW (no "
        "SGD buffers to choose between); leave it unset"
    ]
    assert method_problems(Trial(**BASE, options={"optimizer": "dot_adam", "max_grad_norm": 1.0})) == [
        "optimizer 'dot_adam' does not clip gradients: leave max_grad_norm unset"
    ]
    no_task = method_problems(Trial(**BASE, alpha=0.0, options={"optimizer": "dot_adam"}))
    assert no_task and no_task[0].startswith("optimizer 'dot_adam' needs both a task gradient")
    curriculum = method_problems(Trial(**BASE, knowledge=("hidden_mse",), strategy="Last",
                                       options={"optimizer": "dot_adam", "layer_curriculum": [0.5]}))  # fmt: skip
    assert any("cannot go with optimizer 'dot', 'dot_adam'" in p for p in curriculum), curriculum
    lkd = trial_problems(Trial(**BASE, knowledge=("hidden_mse",), strategy="Last",
                               options={"optimizer": "dot_adam", "lkd_holdout": 0.1}))  # fmt: skip
    assert any("cannot go with optimizer dot_adam" in p for p in lkd), lkd


def test_memory_counts_its_third_state_tensor() -> None:
    def per_parameter(optimizer: str) -> int:
        return method_memory(method_facts(Trial(**BASE, options={"optimizer": optimizer}))).bytes_per_parameter

    # AdamW's state is in the base estimate; the split's second gradient 8 bytes; dot_adam's third moment 4 more
    assert (per_parameter("adamw"), per_parameter("dot"), per_parameter("dot_adam")) == (0, 8, 12)


def test_the_paper_preset_leaves_dot_adam_at_the_studys_adamw_rate(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent("""
        name: presets
        fixed: {task: polarity, teacher: minilm-l6, student: bert-tiny, init: random, lr: 1.0e-3, alpha: 0.1,
                knowledge: [hidden_mse], strategy: Last-1}
        preset: paper
        studies:
          dot: {fixed: {options: {optimizer: dot}}}
          dot_adam: {fixed: {options: {optimizer: dot_adam}}}
        """))  # fmt: skip
    trials = {planned.study: planned.trial for planned in load_sweep(path).trials}
    assert trials["dot"].lr == 0.05
    assert trials["dot_adam"].lr == 1e-3 and trials["dot_adam"].option("dot_delta") is None


def test_fp16_loss_scaling_is_refused_at_set_up() -> None:
    """The split gradients reach the optimizer unscaled: a GradScaler would neither unscale nor see an overflow."""
    hooks = step_hooks(Trial(**BASE, options={"optimizer": "dot_adam"}))
    with pytest.raises(ConfigError, match="optimizer 'dot_adam' takes no fp16 loss scaling"):
        hooks.set_up(SimpleNamespace(scaler=object()), None)
    hooks.set_up(SimpleNamespace(scaler=None), None)  # bf16 or full precision: nothing to refuse
