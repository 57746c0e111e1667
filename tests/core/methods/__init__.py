"""Tests of the distillation methods that are more than one loss."""
