"""Student model families beyond the transformers BERT (`kdgrid.core.model.ssm`: state-space students)."""
