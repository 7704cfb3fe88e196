"""The `p2pfl` command: a Ctrl-C while it starts (a command that trains first imports the engine:
torch takes seconds) ends with one line and status 130, as one during a run does."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def interrupted_while_starting() -> int:
    """The line for a Ctrl-C before the command did anything; returns the exit status."""
    print("p2pfl: interrupted while starting; nothing was written", file=sys.stderr)
    return EXIT_INTERRUPTED


def main() -> int:
    try:
        from p2pfl.cli import main as cli_main
    except KeyboardInterrupt:
        return interrupted_while_starting()
    return cli_main()
