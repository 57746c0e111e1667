"""Distillation methods that are more than one loss: each a folder with its torch-free options and rules and its
torch parts (`kdgrid.core.methods.mohawk`: MOHAWK's three stages into an SSM student)."""
