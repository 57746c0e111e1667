"""The distillation core: the registries (knowledge, strategies, options, rules, example weights, schedules,
methods) at the top, and the rooms (`model`, `data`, `teacher`, `losses`, `pretrained`, `job`, `training`,
`methods`); docs/design.md draws them and what each may import.

Importing any core module first loads the built-in methods (`kdgrid.core.methods.load_builtin_methods`: each
registers its options, rules and parts), so every process that reads a registry knows them, as it knows the
plugins it loads.
"""

from kdgrid.core.methods import load_builtin_methods

load_builtin_methods()
