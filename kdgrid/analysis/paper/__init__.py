"""The paper's published numbers: ``table{1..8}.csv`` (data), ``NOTES.md`` (how they were read) (written by ``tools/transcribe_paper.py``)."""
