"""Masked distillation: the teacher or the student sees its training inputs with tokens masked."""
