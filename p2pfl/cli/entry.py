"""The `p2pfl` command's entry point: a Ctrl-C while it starts (a command that trains first imports
the engine: torch takes seconds) ends with one line and status 130, as one during a run does."""

from __future__ import annotations

import sys

from p2pfl.scale.launch import prints

EXIT_INTERRUPTED = 130


def interrupted_while_starting() -> int:
    """The line for a Ctrl-C before the command did anything (once: from rank 0 of a
    distributed run); returns the exit status."""
    if prints():
        print("p2pfl: interrupted while starting; nothing was written", file=sys.stderr)
    return EXIT_INTERRUPTED


def main() -> int:
    try:
        from p2pfl.cli.main import main as cli_main
    except KeyboardInterrupt:
        return interrupted_while_starting()
    return cli_main()
