"""The teacher's own work: fine-tuning a task teacher (`finetune`), checking its class order (`check`), the gate
that scores it before students train (`gate`), the per-batch teacher-side targets a job's students share
(`targets`), the cost ledger of those shared passes (`share`), the teacher's trial options (`options`: its
declared class order, whether the gate applies) and its label alignment (`label_order`). Where a teacher comes
from (the cache of fine-tuned teachers, a trained student as a teacher) is a fact about models:
`kdgrid.core.model.teacher_cache`, `kdgrid.core.model.trained_teacher`."""
