"""Rows to the paper's tables and figures: the tidy format, intervals and tests, table views, rendering, the paper's
conclusions recomputed, any sweep's own table (docs/tables.md)."""
