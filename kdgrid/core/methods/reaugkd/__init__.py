"""ReAugKD: retrieval-augmented knowledge distillation (Zhang et al., "Retrieval-Augmented Knowledge Distillation
for Pre-trained Language Models", ACL 2023, short paper).

The method is a system, not a loss (docs/reaugkd.md has every formula and convention):

- `supcon`: the supervised contrastive loss (Khosla et al., NeurIPS 2020) that trains the teacher's head;
- `projection_head`: the linear head on the frozen teacher's sentence vector (teacher width -> student width),
  trained once per (teacher, task, head settings) and cached by content hash;
- `knowledge_base`: the training set's projected teacher embeddings and soft labels, an HNSW index (faiss) and an
  exact search for checking, cached beside the teacher's cache and refused when built for something else;
- `retrieval`: the prediction mix at inference (k neighbours, beta, similarity temperature) and its timing;
- `spec`: the trial options that switch it on, their rules and the registration (torch-free);
- `pipeline`: what a job does for a ReAugKD trial (its head, its saved student, its evaluation with retrieval,
  evaluation-only trials).

This package's ``__init__`` imports nothing, so the torch-free option declarations load without torch.
"""
