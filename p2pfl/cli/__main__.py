"""`python -m p2pfl.cli ...` is the `p2pfl` command."""

import sys

from p2pfl.cli.entry import main

sys.exit(main())
