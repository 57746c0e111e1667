"""`kdgrid pretrain`: pre-train or general-distil a student shape into a content-addressed checkpoint.

The command builds two values from its options, once: the recipe (`recipe_from_command_line`: a ``--recipe``
file, ``--set`` fields, then the recipe options) and how it runs (`PretrainRun`), and hands both to one body
(`run_recipe`). The training modules (torch, transformers) are imported inside the command: `kdgrid --help` stays
fast.

Exit status: 0 once the run is done (or stopped by ``--stop-after``); 2 for a refusal, also one that only the
processes started through ``--nproc-per-node`` met (an empty corpus: they hand their message back through the
file `REFUSAL_FILE_ENV` names, and this process prints it once); 128 + N for a run stopped by signal N (SIGUSR2,
SIGTERM: a SLURM time limit or preemption) after its step checkpoint (`kdgrid.pretrain.preemption`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import EXIT_USER_ERROR, ConfigError, KdgridError
from kdgrid.plugins import plugin_environment
from kdgrid.pretrain.child import run_child, run_options, write_recipe
from kdgrid.pretrain.preemption import signal_name, stopped_exit_status
from kdgrid.pretrain.processes import process_place
from kdgrid.pretrain.run_settings import RunSettings

RECIPE_HELP = "Recipe"
RUN_HELP = "How it runs (not part of the recipe's key)"
# Set for the processes `--nproc-per-node` starts: where the first of them to refuse writes its message.
REFUSAL_FILE_ENV = "KDGRID_PRETRAIN_REFUSAL_FILE"


@dataclass(frozen=True)
class PretrainRun:
    """How `kdgrid pretrain` runs a recipe (the options of its "How it runs" panel; none of it is part of the
    recipe's key): one value, built once from the command line and passed down to the local run, the torchrun
    relaunch and the SLURM submission, as `kdgrid.sweep_run.RunOptions` is for ``kdgrid run``.

    Attributes:
        settings: each process's `kdgrid.pretrain.run_settings.RunSettings` (micro-batch, checkpoint interval,
            stop after, work folder, device, progress bar).
        nproc_per_node: start this many processes on this node through torchrun (None: this process only).
        slurm, nodes, tasks_per_node, wait: submit as one SLURM job through this profile, of ``nodes`` x
            ``tasks_per_node`` tasks, and wait for it (`kdgrid.pretrain.slurm`).
        dry_run: describe the recipe (key, folder, whether it exists); train nothing.
    """

    settings: RunSettings = field(default_factory=RunSettings)
    nproc_per_node: int | None = None
    slurm: str | None = None
    nodes: int = 1
    tasks_per_node: int | None = None
    wait: bool = True
    dry_run: bool = False

    def run_settings(self, *, progress: bool | None = None) -> RunSettings:
        """Each process's `RunSettings` (``progress`` given: instead of the option)."""
        return self.settings if progress is None else replace(self.settings, progress=progress)


def read_recipe_file(path: Path) -> dict[str, Any]:
    """The recipe fields of a YAML/JSON file (one mapping)."""
    if not path.is_file():
        raise ConfigError(f"recipe file {path} does not exist")
    from kdgrid.grid.expand import raise_problems  # here: `kdgrid --help` stays light
    from kdgrid.grid.spec import Problems, load_yaml

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


def _relaunch_with_torchrun(processes: int, recipe: PretrainRecipe, settings: RunSettings) -> None:
    """Run this recipe under torchrun with ``processes`` processes on this node (the recipe handed over as a
    JSON file, so every process reads exactly the recipe checked here). A refusal met in the processes is raised
    here (`ConfigError`, exit status 2); otherwise exits with torchrun's status. A stop signal (`STOP_SIGNALS`)
    sent to this process is passed on to torchrun, which passes it on to the processes (`run_child`)."""
    with tempfile.TemporaryDirectory(prefix="kdgrid-pretrain-") as folder:
        recipe_path = write_recipe(recipe, Path(folder) / "recipe.json")
        refusal = Path(folder) / "refusal.txt"
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
        ]
        command += ["-m", "kdgrid.pretrain", "--recipe", str(recipe_path), *run_options(settings)]
        # Each process starts as `kdgrid` does and loads the plugins (`kdgrid.plugins`) this one has loaded.
        outcome = run_child(command, {**os.environ, **plugin_environment(), REFUSAL_FILE_ENV: str(refusal)})
        message = refusal.read_text() if refusal.is_file() else ""
    if message:
        raise ConfigError(message)
    raise typer.Exit(outcome.status)


def _record_refusal(path: Path, message: str) -> None:
    """Write ``message`` to ``path`` unless another process wrote its own first."""
    try:
        with open(path, "x") as handle:
            handle.write(message)
    except FileExistsError:
        pass


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
            "generated, vocabulary, a local text file / folder of *.txt, or several joined with + "
            "(polarity+vocabulary). Default: wikibooks.",
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
    slurm: Annotated[
        str | None,
        typer.Option(
            help="Submit the run as one SLURM job through this profile (a name, or a YAML path, as for trials): "
            "one task per GPU across --nodes nodes; requeued at its time limit or preemption, resuming from its "
            "step checkpoint.",
            rich_help_panel=RUN_HELP,
        ),
    ] = None,
    nodes: Annotated[int, typer.Option(help="Nodes of the --slurm job.", rich_help_panel=RUN_HELP)] = 1,
    tasks_per_node: Annotated[
        int | None,
        typer.Option(
            help="Tasks (processes) per node of the --slurm job; default: the profile's GPUs per node, else 1.",
            rich_help_panel=RUN_HELP,
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            help="Wait for the --slurm job (through its requeues) and print its outcome.",
            rich_help_panel=RUN_HELP,
        ),
    ] = True,
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
    resumes where it stopped. Data-parallel: --nproc-per-node N here, `torchrun --nproc_per_node N -m
    kdgrid.pretrain ...`, or one SLURM job of one task per GPU across nodes: --slurm PROFILE --nodes N. A time
    limit or preemption (SIGUSR2, SIGTERM) stops the run after its step with a checkpoint; a --slurm job is then
    requeued and resumes. See docs/pretrain.md.

    Example: kdgrid pretrain --student bert-mini --teacher bert-base-uncased --steps 1000
    """
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
    recipe = recipe_from_command_line(recipe_file, given, set_fields or [])
    settings = RunSettings(
        micro_batch=micro_batch,
        checkpoint_every=checkpoint_every,
        stop_after=stop_after,
        work_dir=work_dir,
        device=device,
        progress=progress,
    )
    run = PretrainRun(
        settings=settings,
        nproc_per_node=nproc_per_node,
        slurm=slurm,
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        wait=wait,
        dry_run=dry_run,
    )
    run_recipe(recipe, run)


def recipe_from_command_line(
    recipe_file: Path | None, given: dict[str, Any], set_fields: list[str]
) -> PretrainRecipe:
    """The recipe of a `kdgrid pretrain` command line: the ``--recipe`` file's fields, then ``--set FIELD=VALUE``,
    then the recipe options given (``given``: field -> value, None where not given); validated as it is built
    (`PretrainRecipe`: the static tier of the pre-flight for a recipe).

    Raises:
        ConfigError: no student named, or a field the recipe refuses.
    """
    fields: dict[str, Any] = read_recipe_file(recipe_file) if recipe_file is not None else {}
    fields.update(parse_set_fields(set_fields))
    fields.update({key: value for key, value in given.items() if value is not None})
    if "student" not in fields:
        raise ConfigError(
            "name the student: --student bert-tiny (or a shape w{width}-l{layers}), or --recipe FILE"
        )
    return PretrainRecipe.from_dict(fields)


def run_recipe(recipe: PretrainRecipe, run: PretrainRun) -> None:
    """The body of `kdgrid pretrain`: ``recipe`` run as ``run`` says: submitted as one SLURM job, relaunched under
    torchrun (checked here first, not in N processes at once), described (``--dry-run``), or run in this
    process (one of those torchrun started, or the only one), printing its outcome as one JSON line."""
    if run.slurm is not None and not run.dry_run:
        if run.nproc_per_node is not None:
            raise ConfigError(
                "--slurm and --nproc-per-node: choose one (a --slurm job runs one task per GPU)"
            )
        _submit_to_slurm(recipe, run)
        return
    if run.nproc_per_node is not None and process_place(os.environ).world_size == 1 and not run.dry_run:
        if run.nproc_per_node < 1:
            raise ConfigError(f"--nproc-per-node must be at least 1, got {run.nproc_per_node}")
        from kdgrid.preflight.jobs import check_recipe  # torch: see the module docstring

        settings = run.run_settings()
        check_recipe(recipe, settings, world_size=run.nproc_per_node)  # refuse here, not in N processes at once
        _relaunch_with_torchrun(run.nproc_per_node, recipe, settings)
    if run.dry_run:
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
    from kdgrid.pretrain.train import run_pretrain  # torch: see the module docstring

    refusal_file = os.environ.get(REFUSAL_FILE_ENV)
    try:
        outcome = run_pretrain(recipe, run.run_settings())
    except KdgridError as error:
        if not refusal_file:
            raise
        # One of the processes `--nproc-per-node` started: the starting process prints the message once.
        _record_refusal(Path(refusal_file), str(error))
        raise typer.Exit(EXIT_USER_ERROR) from None
    if process_place(os.environ).rank == 0:
        typer.echo(
            json.dumps(
                {
                    "key": recipe.key,
                    "path": str(outcome.path) if outcome.path else None,
                    "steps": outcome.steps_done,
                    "finished": outcome.finished,
                    "stopped_by": signal_name(outcome.stopped_by),
                },
                sort_keys=True,
            )
        )
    if outcome.stopped_by is not None:
        raise typer.Exit(stopped_exit_status(outcome.stopped_by))


def _submit_to_slurm(recipe: PretrainRecipe, run: PretrainRun) -> None:
    """Submit ``recipe`` as one SLURM job through ``run.slurm``'s profile (`kdgrid.pretrain.slurm`); with
    ``run.wait``, print its outcome as the local run does."""
    from kdgrid.pretrain import slurm as pretrain_slurm  # torch, submitit: see the module docstring

    settings = run.run_settings(progress=False)  # a job's log is no terminal: no progress bar
    assert run.slurm is not None
    job = pretrain_slurm.submit(recipe, settings, run.slurm, nodes=run.nodes, tasks_per_node=run.tasks_per_node)
    if not run.wait:
        typer.echo(json.dumps({"key": recipe.key, "slurm_job": str(job.job_id)}, sort_keys=True))
        return
    summary = pretrain_slurm.wait(job)
    summary["stopped_by"] = signal_name(summary.get("stopped_by"))
    typer.echo(json.dumps({**summary, "slurm_job": str(job.job_id)}, sort_keys=True))


def register(app: typer.Typer) -> None:
    app.command()(pretrain)
