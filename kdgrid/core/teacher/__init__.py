"""The teacher's own work: fine-tuning a task teacher (`finetune`), checking its class order (`check`), the gate
that scores it before students train (`gate`), the per-batch teacher-side targets a job's students share
(`targets`) and the cost ledger of those shared passes (`share`). The light facts every layer reads stay
beside this package, below it: its cache (`kdgrid.core.teacher_cache`), its trial options
(`kdgrid.core.teacher_options`) and a trained student as a teacher (`kdgrid.core.trained_teacher`)."""
