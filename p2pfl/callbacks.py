"""Round callbacks: per-round hooks that add metrics to a round's record or stop the run.

    class GradNorm(p2pfl.Callback):
        def after_round(self, end):
            if end.evaluating:
                return {"avg_norm": sum(v.norm() ** 2 for v in end.average_model().values()).item()}

    p2pfl.run(cfg, out, callbacks=[GradNorm()])

After each round the engine calls every callback in order: the built-in evaluation first, then
the algorithm's own (`Algorithm.callbacks`, e.g. FedFSA's personal accuracy), then the ones
passed to `run`. Each sees the record built so far and returns new metric keys (a key the record
already has is refused). Raising `StopRun` ends the run after this round with its record kept,
a checkpoint and a summary. A callback with state across rounds keeps it in
`state_dict`/`load_state_dict` (tensors and plain values), saved in the checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import torch

import topologies as T
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.errors import CallbackError, UserCodeError


class StopRun(Exception):  # noqa: N818 (a request, not an error)
    """Raised by a callback to end the run after the current round; the message says why."""


@dataclass(frozen=True)
class RoundEnd:
    """What a callback sees at the end of round t (0-based)."""

    t: int
    record: Mapping[str, Any]  # the round's metrics so far (read only)
    history: list[dict[str, Any]]  # the records of the rounds before
    ctx: RunContext
    algorithm: Any  # the run's algorithms.Algorithm
    graph: nx.Graph | None = None  # the round's graph as run (links of frozen nodes cut)
    faults: T.Faults | None = None  # its lost messages and offline nodes
    report: Any = None  # the algorithm's algorithms.RoundReport (who trained, their losses)
    cfg: Any = None  # the run's p2pfl.config.Config (rounds, eval, everything it was run with)

    @property
    def evaluating(self) -> bool:
        """Whether round t is an evaluation round (every `eval.every` rounds, and the last: the
        run's `rounds`, or the round that reaches [network] horizon_s)."""
        done = self.t + 1
        return done % self.cfg.eval.every == 0 or done == self.cfg.rounds or \
            horizon_reached(self.cfg, self.record)

    def average_model(self) -> Params:
        """The model whose accuracy is `test_acc`: name -> [*shape]."""
        return self.algorithm.average_model(self.ctx)

    def local_models(self) -> Params:
        """The nodes' own models: name -> [m, *shape]; in a distributed run, those of this
        rank's nodes only (docs/distributed.md, "Callbacks of one's own")."""
        return self.algorithm.local_models(self.ctx)


def horizon_reached(cfg: Any, record: Mapping[str, Any]) -> bool:
    """Whether a round's record reaches the run's simulated-time horizon ([network] horizon_s).

    Parameters
    ----------
    cfg : the run's Config.
    record : the round's metrics (its `sim_time_s`, once the clock has added it).

    Returns
    -------
    bool.
    """
    net = cfg.network
    return bool(net.enabled and net.horizon_s > 0
                and record.get("sim_time_s", 0.0) >= net.horizon_s)


class Callback:
    """A per-round hook (see the module docstring)."""

    def after_round(self, end: RoundEnd) -> Mapping[str, float] | None:
        """Metrics to add to round `end.t`'s record (None: none)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


def call_all(callbacks: list[Callback], end: RoundEnd, record: dict[str, Any]) -> str | None:
    """Run `callbacks` after a round, adding their metrics to `record`.

    A StopRun does not stop the callbacks after it: they still run.

    Parameters
    ----------
    callbacks : the run's round callbacks, in order.
    end : what the round left (`RoundEnd`).
    record : the round's metrics, updated in place with what each callback returns.

    Returns
    -------
    str, the reason of the first StopRun (its message, else the callback's class name), or None.

    Raises
    ------
    CallbackError
        when a callback fails (naming it and the round) or returns anything but a mapping or None.
    ValueError
        when a callback returns a metric the round's record already has.
    """
    reason = None
    for callback in callbacks:
        name = type(callback).__name__
        try:
            added = callback.after_round(end) or {}
        except StopRun as stop:
            reason = reason or str(stop) or name
            continue
        except UserCodeError:  # the model's forward inside an evaluation: named as the model's
            raise
        except Exception as err:
            first = " ".join(str(err).splitlines()[:1])
            raise CallbackError(f"callback {name} failed in round {end.t + 1}: "
                                f"{type(err).__name__}: {first}") from err
        if not isinstance(added, Mapping):
            raise CallbackError(f"callback {name} returned a {type(added).__name__} in round "
                                f"{end.t + 1}; after_round returns a dict of metrics or None")
        taken = sorted(set(added) & set(record))
        if taken:
            raise ValueError(f"{name} returned {taken[0]!r}, which the "
                             "round's record already has: give the metric its own name")
        record.update(added)
    return reason


PLAIN = (bool, int, float, str, type(None), torch.Tensor)


def check_state(callback: Callback) -> dict[str, Any]:
    """Refuse a callback whose state_dict() a checkpoint could write but a resume could not load;
    return the state checked (a checkpoint writes it as it is: state_dict() is called once).

    Checkpoints load without running code, so the state may hold only tensors, numbers, strings,
    None and lists, tuples and str-keyed dicts of them.

    Parameters
    ----------
    callback : the callback.

    Returns
    -------
    dict, its state_dict().

    Raises
    ------
    CallbackError
        naming the callback and the first value of another kind (or a state that is not a dict).
    """

    def bad(value: Any, where: str) -> str | None:
        if isinstance(value, PLAIN):
            return None
        if isinstance(value, list | tuple):
            return next((b for i, v in enumerate(value) if (b := bad(v, f"{where}[{i}]"))), None)
        if isinstance(value, dict):
            return next((b for k, v in value.items()
                         if (b := f"{where} key {k!r}" if not isinstance(k, str)
                             else bad(v, f"{where}[{k!r}]"))), None)
        return f"{where} = {type(value).__name__}"

    state = callback.state_dict()
    problem = "its state_dict() is not a dict" if not isinstance(state, dict) else bad(state, "")
    if problem:
        raise CallbackError(f"callback {type(callback).__name__}: {problem.strip()}: a checkpoint "
                            "keeps tensors, numbers, strings, None and lists and dicts of them")
    return state
