"""Exporting the store to other tools: `run_content` (a store row -> what a tracking-server run holds, no
third-party import) and `mlflow` (`kdgrid export mlflow`: those runs written with MLflow's client)."""
