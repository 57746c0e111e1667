"""Flex-KD (Saadi & Wang, arXiv 2507.10155): parameter-free feature distillation into a narrower student.

- `spec` (torch-free): the knowledge ``flex_kd`` (declared from `loss` without importing it), the option
  ``flex_kd_examples``, the rules, the registration.
- `loss`: the correlation loss between the student's hidden state and the teacher dimensions kept for it.
- `importance`: the teacher's gradient-based importance score of each hidden dimension on the task's training
  data, cached by content under ``$KDGRID_CACHE/flex_kd/``, and the selection of the top d_S dimensions.
- `hooks`: a student's set-up makes (or reads) the selection, records it in the row and hands each ``flex_kd``
  term its teacher dimensions (`kdgrid.core.step_hooks.StepHooks.teacher_features`).

kdgrid's reading of the paper's equations is in `spec`'s docstring and in docs/methods.md ("Flex-KD").
"""
