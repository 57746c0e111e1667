"""Tests of the student model families."""
