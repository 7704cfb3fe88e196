"""The `p2pfl` command: the parser and dispatch (`main`), the commands on analysis (`analysis`:
analyze, study, data describe) and the console entry point (`entry`)."""

from p2pfl.cli.main import EXIT_CONFIG, EXIT_DIVERGED, EXIT_PEER_LOST, main

__all__ = ["EXIT_CONFIG", "EXIT_DIVERGED", "EXIT_PEER_LOST", "main"]
