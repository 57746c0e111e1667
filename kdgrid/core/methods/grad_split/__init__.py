"""The task and distillation gradients of a step taken apart (DOT, the gradient cosine)."""
