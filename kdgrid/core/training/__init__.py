"""Training a job's students: the job's loop (train.py), one student's step (student.py), the objective, the optimiser, epoch checkpoints, the finiteness guard, degenerate runs."""
