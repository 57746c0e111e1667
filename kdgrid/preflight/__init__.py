"""The pre-flight: every check a command makes before anything runs or is written, in three named tiers.

- **static** (`kdgrid.core.trial_rules`: `trial_problems`, `combination_problems`): each trial's own values and
  the combinations that cannot run, found without weights, data or the network. Applied wherever a trial is
  made from a configuration (`kdgrid.grid.expand`: sweep files and trial files), so ``plan``, ``run``,
  ``resume`` and ``trial`` refuse the same trials with the same messages. Its home is the core because the
  trainer applies the same rules to each job it starts. A pre-training recipe's static checks are its own
  (`kdgrid.core.pretrained.recipe.PretrainRecipe.problems`, applied when a recipe is built).
- **local** (`kdgrid.preflight.local`, no torch; `kdgrid.preflight.jobs`): what this machine must have:
  ``init_from`` and recipe checkpoints, the Hugging Face caches of a sweep that must run offline, a writable
  store (`local`); each job validated by the core against its teacher's config and its checkpoints' shapes
  (`jobs`). ``plan`` checks the hand-made checkpoints, ``run`` / ``resume`` all of it; ``trial`` the jobs;
  ``pretrain`` its recipe's work folder and teacher (`kdgrid.pretrain.train.preflight`, through `jobs`).
- **gate** (`kdgrid.preflight.gate`): the teacher gate, run here once per distinct teacher and task where jobs
  run on this machine, else its cached verdicts read.

Each tier raises `kdgrid.errors.ConfigError` (exit status 2) with every problem it found, before the next tier
runs; the store is created only after all of them (`kdgrid.preflight.local.create_store`), so a refused run leaves
nothing. This package's ``__init__`` imports nothing: `local` is torch-free (``kdgrid plan`` imports it), `jobs`
and `gate` import the core.
"""
