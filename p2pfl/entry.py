"""The `p2pfl` command: a Ctrl-C while the engine is still being imported (torch takes seconds)
ends with one line and status 130, as one during a run does."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main() -> int:
    try:
        from p2pfl.cli import main as cli_main
    except KeyboardInterrupt:
        print("p2pfl: interrupted while starting; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    return cli_main()
