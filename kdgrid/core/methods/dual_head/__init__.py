"""The dual-head student: a task head and a distillation head on one shared encoder."""
