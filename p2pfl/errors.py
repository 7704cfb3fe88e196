"""The errors the `p2pfl` command turns into one line and an exit status, in a module that
imports nothing: the command loads the engine (torch) only for the commands that run it."""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid configuration; `str(err)` is one line that names the field."""

    def __init__(self, field_name: str, message: str) -> None:
        shown = field_name if field_name.isprintable() else repr(field_name)
        super().__init__(f"{shown}: {' '.join(str(message).splitlines())}")
        self.field, self.message = field_name, str(message)


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss or parameters; the message (one line) names the round,
    the nodes and the last finite loss. `histories`: from `run_compare`, every variant's records
    ({label: list of dicts}, a diverged variant's as far as it got); None otherwise."""

    histories: dict | None = None


class UserCodeError(RuntimeError):
    """Code handed to the engine as an object (a schedule or schedule function, a partition
    function, a model's forward) raised. The message (one line) names the object, the round
    (1-based, as the metrics' "round"; none before round 1) and the original error, which is
    chained as __cause__. The run stopped before writing that round: its metrics so far and
    its last checkpoint are intact."""

    def __init__(self, what: str, error: BaseException, round: int | None = None) -> None:
        first = " ".join(str(error).splitlines()[:1])
        where = f" in round {round}" if round is not None else ""
        super().__init__(f"{what} failed{where}: {type(error).__name__}: {first}")
        self.what, self.error, self.round = what, error, round

    def in_round(self, round: int) -> UserCodeError:
        """The same failure, named in `round` (1-based)."""
        return UserCodeError(self.what, self.error, round)


class CallbackError(RuntimeError):
    """A round callback raised; the message (one line) names the callback, the round and its
    error (chained as __cause__). The run stopped before writing that round."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run at the end of a round, after writing a checkpoint. `stopped` says
    where, `advice` how to go on; `str(err)` is both, on one line."""

    def __init__(self, stopped: str, advice: str) -> None:
        super().__init__(f"{stopped}; {advice}")
        self.stopped = stopped

    def rerun(self, command: str) -> RunInterrupted:
        """The same stop inside `command` (a study, a comparison), which goes on when run
        again."""
        return RunInterrupted(self.stopped, f"continue the {command} by running the same "
                              "command again (finished runs are kept)")


class PeerLost(RuntimeError):
    """A rank of a distributed run stopped answering (it died, or a collective timed out); the
    message (one line) names the rank and, from the run loop, the last checkpoint."""
