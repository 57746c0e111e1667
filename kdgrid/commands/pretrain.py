"""`kdgrid pretrain`: pre-train or general-distil a student shape into a content-addressed checkpoint.

The training modules (torch, transformers) are imported inside the command: `kdgrid --help` stays fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from kdgrid.errors import ConfigError
from kdgrid.grid.expand import raise_problems
from kdgrid.grid.spec import Problems, load_yaml
from kdgrid.pretrain import artifacts
from kdgrid.pretrain.processes import process_place
from kdgrid.pretrain.recipe import PretrainRecipe

RECIPE_HELP = "Recipe"
RUN_HELP = "How it runs (not part of the recipe's key)"


def read_recipe_file(path: Path) -> dict[str, Any]:
    """The recipe fields of a YAML/JSON file (one mapping)."""
    if not path.is_file():
        raise ConfigError(f"recipe file {path} does not exist")
    problems = Problems()
    data = load_yaml(path, problems)
    raise_problems(problems, path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe file holds one mapping of recipe fields")
    return data


def parse_set_fields(items: list[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` items as recipe fields, each value read as YAML (``0.1`` a number, ``null`` None,
    ``{pkd.scale: mean}`` a mapping); an item without ``=`` is refused."""
    fields: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {item!r}: write FIELD=VALUE (e.g. --set dropout=0.0)")
        try:
            fields[name.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"--set {item!r}: the value is not valid YAML ({error})") from None
    return fields


def _relaunch_with_torchrun(processes: int, recipe: PretrainRecipe, run_options: list[str]) -> None:
    """Run this recipe under torchrun with ``processes`` processes on this node (the recipe handed over as a
    JSON file, so every process reads exactly the recipe checked here); exits with torchrun's status."""
    with tempfile.TemporaryDirectory(prefix="kdgrid-pretrain-") as folder:
        recipe_path = Path(folder) / "recipe.json"
        recipe_path.write_text(json.dumps(recipe.to_dict()))
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
        ]
        command += ["-m", "kdgrid.pretrain", "--recipe", str(recipe_path), *run_options]
        status = subprocess.call(command, env=os.environ.copy())
    raise typer.Exit(status)


def pretrain(
    student: Annotated[
        str | None,
        typer.Option(
            help="Student shape: bert-tiny, bert-mini, ... or w{width}-l{layers}.",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    teacher: Annotated[
        str | None,
        typer.Option(
            help="General distillation from this teacher (Hub name, local folder, minilm-l6); without it, "
            "plain pre-training (masked LM only).",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    corpus: Annotated[
        str | None,
        typer.Option(
            help="wikibooks (English Wikipedia + BookCorpus from the Hub), hub:NAME[:CONFIG], polarity, "
            "generated, or a local text file / folder of *.txt. Default: wikibooks.",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    recipe_file: Annotated[
        Path | None,
        typer.Option(
            "--recipe",
            help="A YAML/JSON file of recipe fields (any field of docs/pretrain.md); options given here override it.",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="Optimizer steps (default 1,000,000).", rich_help_panel=RECIPE_HELP)
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option(
            help="Sequences per optimizer step over all processes (default 256).", rich_help_panel=RECIPE_HELP
        ),
    ] = None,
    block_length: Annotated[
        int | None, typer.Option(help="Tokens per sequence (default 128).", rich_help_panel=RECIPE_HELP)
    ] = None,
    lr: Annotated[
        float | None, typer.Option(help="Peak learning rate (default 1e-4).", rich_help_panel=RECIPE_HELP)
    ] = None,
    knowledge: Annotated[
        list[str] | None,
        typer.Option(
            help="Knowledge type (repeat the option); default MiniLMv2's q/k/v relations.",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    strategy: Annotated[
        str | None,
        typer.Option(help="Matching strategy (default MiniLM: the last layer).", rich_help_panel=RECIPE_HELP),
    ] = None,
    relation_heads: Annotated[
        int | None,
        typer.Option(
            help="Relation heads of the q/k/v relations (default: the student's heads).",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    max_documents: Annotated[
        int | None,
        typer.Option(help="Read only this many documents of the corpus.", rich_help_panel=RECIPE_HELP),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Initialisation, data order and masking (default 0).", rich_help_panel=RECIPE_HELP),
    ] = None,
    set_fields: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Any other recipe field as FIELD=VALUE (repeat): beta, projection, mlm_weight, mlm_probability, "
            "warmup_ratio, weight_decay, dropout, tokenizer, options (docs/pretrain.md).",
            rich_help_panel=RECIPE_HELP,
        ),
    ] = None,
    micro_batch: Annotated[
        int, typer.Option(help="Sequences per forward pass on one process.", rich_help_panel=RUN_HELP)
    ] = 32,
    checkpoint_every: Annotated[
        int, typer.Option(help="Write a step checkpoint every this many steps.", rich_help_panel=RUN_HELP)
    ] = 1000,
    stop_after: Annotated[
        int | None,
        typer.Option(
            help="Stop after this many steps of this run, with a checkpoint; run again to resume.",
            rich_help_panel=RUN_HELP,
        ),
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder of the step checkpoints (default: beside the artifact).", rich_help_panel=RUN_HELP
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.", rich_help_panel=RUN_HELP)] = "auto",
    nproc_per_node: Annotated[
        int | None,
        typer.Option(
            help="Start this many processes on this node through torchrun (one per GPU).",
            rich_help_panel=RUN_HELP,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the recipe, its key, its folder and whether it exists; train nothing.",
            rich_help_panel=RUN_HELP,
        ),
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.", rich_help_panel=RUN_HELP)] = True,
) -> None:
    """Pre-train a student (masked LM) or general-distil it from a teacher (masked LM + the teacher's knowledge)
    into a checkpoint that `init: pretrain` / `init: general_distillation` load.

    The checkpoint is named by the recipe's content key under the kdgrid cache (printed, with --dry-run too):
    the same recipe is trained once. Step checkpoints are written as it goes; running the same command again
    resumes where it stopped. Data-parallel: --nproc-per-node N here, or `torchrun --nproc_per_node N -m
    kdgrid.pretrain ...` (any torchrun launch, e.g. one task per GPU across nodes). See docs/pretrain.md.
    """
    fields: dict[str, Any] = read_recipe_file(recipe_file) if recipe_file is not None else {}
    given = {
        "student": student,
        "teacher": teacher,
        "corpus": corpus,
        "steps": steps,
        "global_batch": global_batch,
        "block_length": block_length,
        "lr": lr,
        "knowledge": knowledge or None,
        "strategy": strategy,
        "relation_heads": relation_heads,
        "max_documents": max_documents,
        "seed": seed,
    }
    fields.update(parse_set_fields(set_fields or []))
    fields.update({key: value for key, value in given.items() if value is not None})
    if "student" not in fields:
        raise ConfigError(
            "name the student: --student bert-tiny (or a shape w{width}-l{layers}), or --recipe FILE"
        )
    recipe = PretrainRecipe.from_dict(fields)
    if nproc_per_node is not None and process_place(os.environ).world_size == 1 and not dry_run:
        if nproc_per_node < 1:
            raise ConfigError(f"--nproc-per-node must be at least 1, got {nproc_per_node}")
        from kdgrid.pretrain.train import RunSettings, preflight  # torch: see the module docstring

        settings = RunSettings(micro_batch, checkpoint_every, stop_after, work_dir, device, progress)
        preflight(recipe, settings, world_size=nproc_per_node)  # refuse here, not in N processes at once
        run_options = [
            f"--micro-batch={micro_batch}",
            f"--checkpoint-every={checkpoint_every}",
            f"--device={device}",
        ]
        run_options += [f"--stop-after={stop_after}"] if stop_after is not None else []
        run_options += [f"--work-dir={work_dir}"] if work_dir is not None else []
        run_options += [] if progress else ["--no-progress"]
        _relaunch_with_torchrun(nproc_per_node, recipe, run_options)
    if dry_run:
        typer.echo(
            json.dumps(
                {
                    "key": recipe.key,
                    "path": str(artifacts.artifact_dir(recipe)),
                    "exists": artifacts.exists(recipe),
                    "recipe": recipe.to_dict(),
                },
                indent=1,
                sort_keys=True,
            )
        )
        return
    from kdgrid.pretrain.train import RunSettings, run_pretrain  # torch: see the module docstring

    settings = RunSettings(
        micro_batch=micro_batch,
        checkpoint_every=checkpoint_every,
        stop_after=stop_after,
        work_dir=work_dir,
        device=device,
        progress=progress,
    )
    outcome = run_pretrain(recipe, settings)
    if process_place(os.environ).rank == 0:
        typer.echo(
            json.dumps(
                {
                    "key": recipe.key,
                    "path": str(outcome.path) if outcome.path else None,
                    "steps": outcome.steps_done,
                    "finished": outcome.finished,
                },
                sort_keys=True,
            )
        )


def register(app: typer.Typer) -> None:
    app.command()(pretrain)
