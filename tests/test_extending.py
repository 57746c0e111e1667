"""A method is one module: a plugin written to a folder adds a knowledge function and a learnable strategy, and a
sweep that names it runs them through the local executor with no other edit. The learnable mapping's parameters
train, are saved in the epoch checkpoints, and a preempted trial resumes to the same numbers bit for bit."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kdgrid.cli import main
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.grid import load_sweep
from kdgrid.store import read_table
from kdgrid.sweep_run import RunOptions, run_sweep
from kdgrid.trial import Trial
from tests.plugin_files import isolated_plugins
from tests.preemption import preempted_in_epoch

MODULE = "kdlearn_plugin"
PLUGIN_SOURCE = '''\
"""A researcher's method as one module: an L1 knowledge and a learnable layer mix."""
import torch
from torch import nn

from kdgrid.core.knowledge import register
from kdgrid.core.mapping import LayerMapping
from kdgrid.core.matching import register_strategy
from kdgrid.core.teacher.targets import fixed


@register("plug_l1", needs=["hidden"], needs_projection=True, category="feature", region="hidden",
          call_style="pair", source="a test plugin")
def plug_l1(hidden_s, hidden_t, mask):
    real = mask.bool()[:, :, None]
    diff = (hidden_s - fixed(hidden_t)).abs().masked_fill(~real, 0.0)
    return diff.sum() / (real.sum() * hidden_s.shape[-1])


class LayerMix(LayerMapping):
    def __init__(self, context):
        super().__init__(context)
        self.logits = nn.Parameter(torch.zeros(context.student_layers, context.teacher_layers))

    def forward(self, feature, student_layer, student, teacher):
        weights = self.logits[student_layer - 1].softmax(-1)
        return torch.einsum("t,t...->...", weights, torch.stack(list(teacher)))

    def summary(self):
        return {"weights": self.logits.softmax(-1).tolist()}


@register_strategy("PlugMix", distinct_teacher_layers=False, description="softmax weights over teacher layers",
                   mapping=LayerMix, mapping_parameters=lambda c: c.student_layers * c.teacher_layers)
def plug_mix(student_layers, teacher_layers):
    return [(i, teacher_layers) for i in range(1, student_layers + 1)]
'''
TASK = "synthetic-single-binary-n96-d32"


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    monkeypatch.syspath_prepend(str(folder))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with isolated_plugins(prefix="kdlearn"):
        yield folder
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)


def sweep_file(path: Path, teacher: str, strategies: tuple[str, ...] = ("PlugMix",)) -> Path:
    spec = {
        "name": "learned-mix",
        "plugins": [MODULE],
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random", "batch_size": 16,
                  "max_length": 24, "epochs": 2, "lr": 2e-2, "seed": 3, "knowledge": ["plug_l1"],
                  "beta": 1.0, "options": dict(NOT_MEANT_TO_BE_ACCURATE)},
        "axes": {"strategy": list(strategies)},
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def test_a_plugin_alone_adds_a_knowledge_and_a_learnable_strategy_that_run_in_a_sweep(
    tmp_path: Path, teacher: str, plugin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, store = sweep_file(tmp_path / "s.yaml", teacher, ("PlugMix", "Last-1")), tmp_path / "store"
    outcome = run_sweep(sweep, store, RunOptions(executor_settings={"local_progress": False}, preflight=False))
    assert outcome.ok and outcome.done_now == 2 and outcome.jobs == 1  # one teacher pass for both
    rows = read_table(store, ["status", "strategy", "extra_json", "layer_pairs_json"]).to_pylist()
    [row] = [r for r in rows if r["strategy"] == "PlugMix"]
    [fixed_row] = [r for r in rows if r["strategy"] == "Last-1"]
    assert row["status"] == fixed_row["status"] == "done"
    assert "mapping" not in json.loads(fixed_row["extra_json"])
    extra = json.loads(row["extra_json"])
    assert extra["mapping_params"] == 2 * 3  # L_S x L_T weights
    weights = torch.tensor(extra["mapping"]["weights"])
    assert weights.shape == (2, 3)
    assert torch.allclose(weights.sum(-1), torch.ones(2))
    assert (weights - 1 / 3).abs().max() > 1e-3  # the mapping learned: it no longer gives every layer 1/3
    assert json.loads(row["layer_pairs_json"]) == [[1, 3], [2, 3]]
    # the analysis lays the sweep out with the plugin's strategy as any other
    with pytest.raises(SystemExit) as exited:
        main(["tables", "--sweep", "learned-mix", "--store", str(store)])
    assert exited.value.code in (0, None)
    out = capsys.readouterr().out
    assert "PlugMix" in out and "Last-1" in out


def test_the_learnable_mapping_is_checkpointed_and_resumes_bit_for_bit(
    tmp_path: Path, teacher: str, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.core.training.train import run_job

    [trial] = [planned.trial for planned in load_sweep(sweep_file(tmp_path / "s.yaml", teacher)).trials]

    def run(trials: list[Trial], **kwargs: object) -> tuple[list, dict[str, torch.Tensor]]:
        weights: dict[str, torch.Tensor] = {}

        def keep(t: Trial, model: torch.nn.Module) -> None:
            weights.update({k: v.detach().clone() for k, v in model.state_dict().items()})

        return run_job(trials, device="cpu", on_model=keep, **kwargs), weights  # type: ignore[arg-type]

    [straight], straight_weights = run([trial])

    with preempted_in_epoch(monkeypatch, 1):
        run([trial], checkpoint_dir=tmp_path)
    state = torch.load(tmp_path / f"{trial.trial_id}.pt", weights_only=False)
    saved = state["objective"]["mapping.logits"]
    assert saved.shape == (2, 3) and saved.abs().max() > 0  # trained for an epoch, and saved
    [resumed], resumed_weights = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 1
    assert resumed.extra["mapping"] == straight.extra["mapping"]  # the learned weights, exactly
    assert resumed.curve == straight.curve and resumed.scores == straight.scores
    assert straight_weights.keys() == resumed_weights.keys()
    for key in straight_weights:
        assert torch.equal(straight_weights[key], resumed_weights[key]), key


def test_the_worked_examples_of_docs_extending_run_and_register_what_they_say(plugin: Path) -> None:
    import re

    from kdgrid.core.example_weights import EXAMPLE_WEIGHTS, ExampleBatch, normalised_weights
    from kdgrid.core.knowledge import KNOWLEDGE
    from kdgrid.core.matching import STRATEGIES, layer_pairs
    from kdgrid.core.method_registry import METHODS, TrialFacts, run_rules
    from kdgrid.core.options import option_problems
    from kdgrid.core.schedules import TEMPERATURE_LEARNERS, schedule_value

    text = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 7
    for block in blocks:
        exec(compile(block, "docs/extending.md", "exec"), {"__name__": "kdlearn_docs"})
    assert {"hidden_l1"} <= set(KNOWLEDGE) and {"LastTwo", "LayerMix"} <= set(STRATEGIES)
    assert STRATEGIES["LayerMix"].learnable and not STRATEGIES["LastTwo"].learnable
    assert layer_pairs("LastTwo", 4, 12) == [(3, 11), (4, 12)]
    assert option_problems([("hidden_l1.scale", 0.5)], ("hidden_l1",)) == []
    assert schedule_value("exponential", 0.5, 4.0, 1.0) == pytest.approx(2.0)  # sqrt(4 * 1)
    logits = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    batch = ExampleBatch(logits, logits, torch.zeros(2), torch.ones(2), False, 0.0, {})
    confident = torch.tensor([1 / (1 + math.exp(-2)), 0.5])
    assert torch.allclose(normalised_weights("teacher_confident", batch), confident / confident.mean())
    assert "teacher_confident" in EXAMPLE_WEIGHTS
    learner = TEMPERATURE_LEARNERS["adversarial"](2.0, {})
    temperature = learner(0.5, 2.0)  # 1 + softplus(2): the reversal leaves the value alone
    assert temperature.item() == pytest.approx(1 + math.log1p(math.exp(2.0)))
    temperature.backward()
    # d/draw of 1 + softplus(raw) is sigmoid(raw); reversed with strength (1 - cos(pi / 2)) / 2 = 1/2
    assert learner.raw.grad.item() == pytest.approx(-0.5 / (1 + math.exp(-2.0)))
    assert learner.summary() == {"temperature": pytest.approx(1 + math.log1p(math.exp(2.0)))}
    assert METHODS["heavy_ball"].options == ("heavy_ball_momentum",)
    misplaced = Trial(task="sst2", teacher="bert-base", student="bert-tiny", options={"heavy_ball_momentum": 0.5})
    assert run_rules("combination", TrialFacts(misplaced)) == [
        "option heavy_ball_momentum is only for optimizer 'heavy_ball'"
    ]
    assert option_problems([("heavy_ball_momentum", 1.0)], ()) == [
        "option heavy_ball_momentum=1.0 is invalid; allowed: a number in [0, 1)"
    ]
