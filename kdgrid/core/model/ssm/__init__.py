"""State-space (SSD, Mamba-2 style) students in pure PyTorch, runnable on CPU and GPU alike.

`shape` names and sizes an SSM student without torch (``ssm-l6-h384-a12``); `scan` holds the chunked SSD scan and
the materialised mixing matrix; `mixer` the bidirectional (or causal) mixer that takes the place of a BERT
layer's self-attention; `model` the whole classifier (embeddings, post-LN blocks, pooling, head).
"""
