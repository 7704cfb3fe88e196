"""The `p2pfl` command: a Ctrl-C while it starts (a command that trains first imports the engine:
torch takes seconds) ends with one line and status 130, as one during a run does."""

from __future__ import annotations

import os
import sys

EXIT_INTERRUPTED = 130


def launched() -> bool:
    """Whether this process is one of several started by torchrun (or `--nproc`)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def prints() -> bool:
    """Whether this process prints what every process of a distributed run has alike: a single
    process, or rank 0 of a distributed run."""
    return not launched() or os.environ.get("RANK", "0") == "0"


def interrupted_while_starting() -> int:
    """The line for a Ctrl-C before the command did anything (once: from rank 0 of a
    distributed run); returns the exit status."""
    if prints():
        print("p2pfl: interrupted while starting; nothing was written", file=sys.stderr)
    return EXIT_INTERRUPTED


def main() -> int:
    try:
        from p2pfl.cli import main as cli_main
    except KeyboardInterrupt:
        return interrupted_while_starting()
    return cli_main()
