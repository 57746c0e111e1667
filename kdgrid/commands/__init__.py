"""The CLI's commands, one module per area. Modules import heavy libraries inside the commands, not at the top."""
