"""A Ctrl-C while the `p2pfl` command starts (a command that trains first imports the engine:
torch takes seconds) ends with one line and status 130, as one during a run does."""

from __future__ import annotations

import sys

from p2pfl.scale.launch import prints

EXIT_INTERRUPTED = 130


def interrupted_while_starting() -> int:
    """The line for a Ctrl-C before the command did anything.

    Printed once: from rank 0 of a distributed run.

    Returns
    -------
    int, the exit status of an interruption.
    """
    if prints():
        print("p2pfl: interrupted while starting; nothing was written", file=sys.stderr)
    return EXIT_INTERRUPTED
