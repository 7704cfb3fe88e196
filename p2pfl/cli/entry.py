"""The `p2pfl` command's entry point: the command's module is imported here, so that a Ctrl-C
while it loads is one line (p2pfl.cli.starting)."""

from __future__ import annotations

from p2pfl.cli.starting import interrupted_while_starting


def main() -> int:
    """The `p2pfl` command: the command's module imported here, so that a Ctrl-C while it loads is
    one line.

    Returns
    -------
    int, the exit status.
    """
    try:
        from p2pfl.cli.main import main as cli_main
    except KeyboardInterrupt:
        return interrupted_while_starting()
    return cli_main()
