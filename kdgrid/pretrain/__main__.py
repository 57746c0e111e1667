"""``python -m kdgrid.pretrain ARGS`` = ``kdgrid pretrain ARGS``: the module torchrun starts in each process
(``torchrun --nproc_per_node N -m kdgrid.pretrain --student ...``)."""

import sys

from kdgrid.cli import main

main(["pretrain", *sys.argv[1:]])
