"""`python -m p2pfl ...` is the `p2pfl` command (what `torchrun -m p2pfl run CONFIG` starts)."""

import sys

from p2pfl.cli.entry import main

sys.exit(main())
