"""MOHAWK (Bick, Li, Xing, Kolter, Gu, "Transformers to SSMs: Distilling Quadratic Knowledge to Subquadratic
Models", NeurIPS 2024, arXiv 2408.10189): a Transformer distilled into an SSM student in three stages, each a
trial whose trained student the next starts from (docs/ssm.md).

`spec` (torch-free) declares the option ``mohawk_stage``, the rules a stage's trial must follow and the method's
registration; `losses` holds the stage-1 and stage-2 losses; `objective` the teacher-forced objective of those
stages; `transfer` the stage-3 weight transfer; `hooks` what a stage changes in the student's training. Importing
this package imports neither torch nor its modules.
"""
