"""The HTML report of a store (`kdgrid report`): pages built from the rows, never from the core."""
