"""Rows to the paper's tables and figures: the tidy format, intervals and tests, table views, rendering, the paper's
conclusions recomputed, any sweep's own table and two sweeps side by side (docs/tables.md), tidy pandas frames of a
store (docs/python.md)."""
