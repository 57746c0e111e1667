"""State-space (SSD, Mamba-2 style) students in pure PyTorch, runnable on CPU and GPU alike (docs/ssm.md).

Their names and shapes are read without torch in `kdgrid.core.model.shapes` (``ssm-l6-h384-a12``: `SSMShape`);
`rules` holds what such a student combines with (torch-free, read by the trial rules); `scan` the chunked SSD scan
and the materialised mixing matrix; `mixer` the bidirectional (or causal) mixer that takes the place of a BERT
layer's self-attention; `model` the whole classifier (embeddings, post-LN blocks, pooling, head), its saving and
loading and the weight transfer from a BERT; `init` the student at a trial's start; `capture` its features as
`kdgrid.core.model.capture` gives a BERT's.
"""
