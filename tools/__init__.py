"""One-off tools kept beside the package and not installed with it (run from a checkout)."""
