"""kdgrid: knowledge-distillation experiment grids on transformers.

Import is light on purpose: sub-modules bring in torch, Ray or submitit only when they are used.
"""

import time as _time

__version__ = "0.1.0"
LOADED_AT = _time.perf_counter()  # when this process began loading kdgrid (`kdgrid.command_clock`)
