"""The pre-trained checkpoints kdgrid can start a student from, without torch: pre-training recipes
(`recipe`, `recipe_names`, the bundled `recipes/*.yaml`), corpus spellings (`corpus_spec`), the checkpoint
catalogue (`artifacts`) and which checkpoints a set of trials needs (`needed`). Making a checkpoint is
`kdgrid.pretrain`'s job, a client of the core."""
