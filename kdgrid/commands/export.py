"""`kdgrid export ...`: the store's trials in other tools (`kdgrid export mlflow`, `kdgrid export tensorboard`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# The exporters import pyarrow, pandas and the optional MLflow (seconds): imported inside the commands so that
# `kdgrid --help` stays fast and works without the `mlflow` extra.

export_app = typer.Typer(
    help="Export the store's trials to other tools (MLflow, TensorBoard).", no_args_is_help=True
)


@export_app.command("mlflow")
def mlflow_export(
    tracking_uri: Annotated[
        str,
        typer.Option(
            "--tracking-uri",
            envvar="MLFLOW_TRACKING_URI",
            help="The MLflow tracking server or store: http://host:5000, sqlite:///mlflow.db, databricks, ...",
        ),
    ],
    store: Annotated[Path, typer.Option("--store", help="The results store (only read).")] = Path("results"),
    experiment: Annotated[
        str, typer.Option("--experiment", help="The MLflow experiment (created when missing).")
    ] = "kdgrid",
    sweep: Annotated[
        list[str] | None,
        typer.Option("--sweep", help="Export only the trials with a row of this sweep (repeatable)."),
    ] = None,
) -> None:
    # `\[` keeps the help's Rich markup from reading "[mlflow]" as a style tag.
    r"""One MLflow run per trial of the store: its parameters, final scores, per-epoch curves of each loss term
    and dev metric, and tags (trial id, sweep, study, git commit, device); failed trials as FAILED runs.
    Idempotent: a trial already exported is left as it is; one trained again since is replaced. Needs the
    `mlflow` extra (pip install 'kdgrid\[mlflow]').

    Example: kdgrid export mlflow --store results --tracking-uri sqlite:///mlflow.db --experiment my_study"""
    from kdgrid.export.mlflow import DEFAULT_EXPERIMENT, export_to_mlflow

    report = export_to_mlflow(
        store, tracking_uri, experiment=experiment or DEFAULT_EXPERIMENT, sweeps=sweep or ()
    )
    typer.echo(report.summary())


@export_app.command("tensorboard")
def tensorboard_export(
    out: Annotated[Path, typer.Option("--out", help="The folder of the event files (tensorboard --logdir).")],
    store: Annotated[Path, typer.Option("--store", help="The results store (only read).")] = Path("results"),
    sweep: Annotated[
        list[str] | None,
        typer.Option("--sweep", help="Export only the trials with a row of this sweep (repeatable)."),
    ] = None,
) -> None:
    r"""One TensorBoard run per trial of the store: its step curves (each loss term unweighted and weighted, the
    total, learning rate, gradient norm, gradient cosine, a learned gate's weights; step = optimizer step) and its
    dev metrics per epoch. A trial exported before is written again. Needs the tensorboard package
    (pip install 'kdgrid\[tensorboard]').

    Example: kdgrid export tensorboard --store results --out tb, then tensorboard --logdir tb"""
    from kdgrid.export.tensorboard import export_to_tensorboard

    typer.echo(export_to_tensorboard(store, out, sweeps=sweep or ()).summary())


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
