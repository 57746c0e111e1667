"""Task-agnostic training of a student shape: pre-training (masked LM) and general distillation (masked LM plus
a teacher's knowledge), data-parallel on torch.distributed. docs/pretrain.md explains the recipe and its sources.

Light on import: the recipe, the corpus spellings and the artifact locations need neither torch nor datasets.
"""
