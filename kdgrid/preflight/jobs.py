"""The local tier of the pre-flight that needs the core: each job validated on this machine as the core will
validate it when it starts (`kdgrid.core.training.trial_setup.validate_trials`: its teacher's config against the task, each
trial's shapes, layer pairs, init checkpoint shapes and loss terms), and a pre-training recipe checked against
its work folder and teacher (`kdgrid.pretrain.train.preflight`). Nothing is loaded but config.json files.

``kdgrid run`` / ``resume`` check every job of the trials to run (`check_jobs_here`, every problem in one
message); ``kdgrid trial`` checks its one job (`check_job`); ``kdgrid pretrain`` its recipe (`check_recipe`).
"""

from __future__ import annotations

from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.core.training.trial_setup import TrialSetup, validate_trials
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.preflight.local import check_init_checkpoints
from kdgrid.pretrain.train import Preflight, RunSettings, preflight
from kdgrid.sweep_plan import plan_sweep_jobs
from kdgrid.trial import Trial


def check_job(trials: list[Trial]) -> list[TrialSetup]:
    """One job (trials sharing one teacher pass, as ``kdgrid trial`` reads them) validated by the core; the
    plans. Raises the core's `ConfigError` as it is (one message naming every invalid trial)."""
    return validate_trials(trials)


def check_jobs_here(trials: list[Trial]) -> None:
    """Every init checkpoint the trials need present (`check_init_checkpoints`, one message naming every missing
    one, before any teacher is read), then every job they plan into validated by the core; every job checked
    before any problem is reported.

    Raises:
        ConfigError: the missing checkpoints; or every trial that cannot run here, one line each (jobs of one
            teacher and task share one message).
    """
    check_init_checkpoints(trials)
    problems: list[str] = []
    for job in plan_sweep_jobs(trials, 0, None):
        try:
            check_job(job)
        except KdgridError as error:
            problems.append(str(error))
    if problems:
        problems = list(dict.fromkeys(problems))
        raise ConfigError("pre-flight found trials that cannot run on this machine:\n" + "\n".join(problems))


def check_recipe(recipe: PretrainRecipe, settings: RunSettings, world_size: int) -> Preflight:
    """A pre-training run refused before any process starts: its settings, a global batch that
    ``world_size x micro_batch`` does not divide, a work folder of another recipe, a student the teacher cannot
    be matched to (`kdgrid.pretrain.train.preflight`)."""
    return preflight(recipe, settings, world_size=world_size)
