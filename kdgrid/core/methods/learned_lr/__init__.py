"""A separate learning rate for the parameters a method learns beside the student (kdgrid's)."""
