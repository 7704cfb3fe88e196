"""Asynchronous algorithms: no round barrier, each node on its own clock.

A node runs local phases one after another. A phase reads the node's model when it begins,
takes the node's local steps from it (on the simulated clock: `[network]` compute time), and
ends with its offset y^K - x_read; what happens then (averaging, pushing, sending to a server)
is the algorithm's, and happens at the simulated instant the phase ends or a message arrives.
The event engine (p2pfl/engine/events.py) drives an `Asynchronous` algorithm through an
`Instant`: it calls `start` at time 0, `phase_end` with nodes whose phases end, `arrive` with
messages that arrive, and begins the phases asked for (`begin`) once everything of that instant
at the node is done. One call may hold events of different instants at different nodes (an
exact window: p2pfl/engine/windows.py), never two of one node at different times; each node's
time is `Instant.time`. An algorithm sees the engine only through `Instant` and the
`RunContext`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, ClassVar, Protocol

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.base import Algorithm, RoundReport
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.errors import ConfigError

if TYPE_CHECKING:
    from p2pfl.scale.mailbox import Delivery


NEEDS_CLOCK = ("{name} is asynchronous and runs on the simulated clock: set network.enabled = "
               "true (docs/async.md)")
NEEDS_TIME = ("is 0, but {name} is asynchronous: a local phase must take simulated time, or the "
              "clock never advances; set network.step_s > 0")


class Instant(Protocol):
    """The event simulation at a batch of events, as an asynchronous algorithm drives it: each
    node concerned at its own instant (`time`).

    Nodes are population rows; messages go between graph node ids (the same, except on the
    star, whose server is graph node 0 and client i graph node i + 1).
    """

    def time(self, ids: np.ndarray) -> np.ndarray:
        """float64 [m]: the instant of each graph node's event being processed (simulated
        seconds since the start); what it sends is sent then, what it begins begins then."""

    def phase(self, nodes: np.ndarray) -> np.ndarray:
        """int64 [m]: the index (from 0) of each node's latest local phase."""

    def offsets(self, nodes: np.ndarray) -> Params:
        """The offsets y^K - x_read of the nodes' latest local phases: name -> [m, *shape]."""

    def result_slots(self, nodes: np.ndarray) -> np.ndarray:
        """With `snapshot_in_row`: the payload slots [m] holding the results y^K of the nodes'
        latest local phases; read them as payloads (`sums`) before the nodes begin again."""

    def read_s(self, nodes: np.ndarray) -> np.ndarray:
        """float64 [m]: when the nodes' latest local phases read their models."""

    def all_computed(self) -> bool:
        """Whether every local phase begun has been computed (as at a mark), so that a row may
        change without changing a phase's snapshot (`Asynchronous.snapshot_in_row`)."""

    def begin(self, nodes: np.ndarray, models: Params | None = None) -> None:
        """Begin the nodes' next local phases at their `time`, once every event of the node at
        that instant is done, from their rows as those events left them, or from `models`
        [m, *shape] (copied now, so a payload may be passed and released) written into their
        rows. Only nodes of the events being processed (receivers, and senders where
        `couples_sender`) may be begun: a node's instant is that of its own event."""

    def graph(self, k: int) -> nx.Graph:
        """The topology's graph of round k (a node's k-th exchange uses it)."""

    def send(self, src: np.ndarray, dst: np.ndarray, k: np.ndarray,
             share: np.ndarray | None = None, payload: Params | None = None,
             owner: np.ndarray | None = None, scalar: np.ndarray | None = None,
             tag: np.ndarray | None = None, read: np.ndarray | None = None,
             copies: int = 1, scalars: int = 0, snapshot: np.ndarray | None = None,
             both_ways: bool = False, slots: np.ndarray | None = None) -> None:
        """Put messages src -> dst [M] (graph node ids) in flight, each sent at its sender's
        `time`; the network times them, with the draws and edge values of rounds k [M] (an int:
        all of them).

        `payload` [u, *shape] holds snapshots (copied now), or `snapshot` [u] names the
        population rows to copy now, or `slots` [u] are payload slots written by `sums` (held,
        now carried by the messages; `snapshot` then names the rows they equal, or is None);
        message e carries row owner[e] (default: row e) and
        share[e] of it; `scalar`, `tag` and `read` [u] go with each row (`read` default: its
        sender's time). Each message counts
        `copies` model copies and `scalars` float64 scalars sent. `both_ways`: the message is
        an exchange, a transfer each way, due when both have arrived.
        """

    def sending(self, nodes: np.ndarray) -> np.ndarray:
        """bool [m]: whether a message that each node (graph node id) sent is still in flight
        at the node's `time` (one due then has not arrived yet: arrivals come after phase
        ends)."""

    def payload(self, slots: np.ndarray) -> Params:
        """The payload rows of slots [u]: name -> [u, *shape] (read them before the slots are
        released: at the end of `arrive`, or at `drop` of held ones)."""

    def add_payloads(self, out: Params, rows: np.ndarray, slots: np.ndarray,
                     weights: np.ndarray) -> None:
        """out[k][rows[e]] += weights[e] * the payload row of slots[e] for messages e [M] at
        once, each row adding its messages in the order given (O(M x model size); `out`
        [r, *shape])."""

    def sums(self, count: int, rows: np.ndarray, slots: np.ndarray, weights: np.ndarray,
             start: Params | None = None) -> np.ndarray:
        """Write `count` new payload rows: row r is start[r] [count, *shape] (None: 0) plus
        weights[e] times the payload of slots[e] for every e [M] with rows[e] = r, in the order
        given, each row from its own entries alone (O(M x model size)); without `start` every
        row must have one. Returns int64 [count], their slots, held once: `send` them, or
        `drop` them."""

    def copy_out(self, out: Params, rows: torch.Tensor, slots: np.ndarray) -> None:
        """out[k][rows[e]] = the payload row of slots[e] [m] (e.g. the population's rows)."""

    def slot_info(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(scalar [u], tag [u], read [u]) of payload slots [u]."""

    def hold(self, slots: np.ndarray) -> None:
        """Keep the payloads of delivered slots [u] (one per message) after `arrive`, until
        `drop`: an algorithm that adds a message later (when its receiver next reads its
        model) holds it."""

    def drop(self, slots: np.ndarray) -> None:
        """Release held slots [u] (one hold each: a message's, or a slot from `sums`)."""

    def mixed(self, ages_s: np.ndarray) -> None:
        """Record the staleness (s) of what was just mixed into models."""

    def carried(self) -> float:
        """Sum over the messages in flight of share * their payload's scalar (e.g. the Push-Sum
        weight in flight)."""


class Asynchronous(Algorithm):
    """An algorithm without rounds, driven event by event (see the module docstring)."""

    transfers: ClassVar[int] = 1  # messages one after the other in a nominal round
    couples_sender: ClassVar[bool] = False  # an arrival also changes its sender's row
    # True: the algorithm writes a node's row only when the node's phase ends (its result
    # asked for first, `result_slots`), before its next phase reads the row, and when a model
    # is read at a mark (`settle`, every begun phase computed by then; the phase end then does
    # not read the row); so a phase's snapshot stays its node's row until it is computed, and the
    # engine reads it there instead of copying it when the phase begins
    snapshot_in_row: ClassVar[bool] = False
    events: Instant | None = None  # the simulation, once the engine binds it

    def bind(self, ev: Instant) -> None:
        """Keep the simulation (for metrics of what is in flight); the engine binds it before
        the first instant, on a start and on a resume.

        Parameters
        ----------
        ev : the simulation.
        """
        self.events = ev

    def setup(self, ctx: RunContext) -> None:
        if ctx.clock is None:
            raise ConfigError("network.enabled", NEEDS_CLOCK.format(name=self.name))
        if ctx.clock.net.step_s == 0:
            raise ConfigError("network.step_s", NEEDS_TIME.format(name=self.name))
        if ctx.link_drop or ctx.node_drop:
            key = "link_drop" if ctx.link_drop else "node_drop"
            raise ConfigError(f"topology.{key}", f"{self.name} runs event by event, without the "
                              "per-round faults: leave it at 0")
        if ctx.comm.world > 1:
            raise ConfigError("engine", f"{self.name} is simulated event by event in one process")
        if ctx.schedule.needs_losses:
            raise ConfigError("topology.selection", f"{self.name} picks neighbours without "
                              "losses: use selection = 'random'")

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        """Not used: an asynchronous algorithm has no rounds (the event engine drives it)."""
        raise TypeError(f"{self.name} is asynchronous: it runs on the event engine "
                        "(p2pfl.engine.events), not round by round")

    def phase_lr(self, ctx: RunContext, nodes: np.ndarray, k: np.ndarray) -> torch.Tensor:
        """The step size of the local phases k [m] the nodes [m] begin.

        Called before the phases read the nodes' rows: an algorithm that keeps arrivals for
        later brings the rows up to date here.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m], rows.
        k : int64 [m], each one's phase index.

        Returns
        -------
        [m] tensor in the run's dtype; lr * lr_decay ** k by default.
        """
        return torch.as_tensor(self.cfg.lr * self.cfg.lr_decay ** k.astype(np.float64),
                               device=ctx.device, dtype=ctx.dtype)

    def mark_lr(self, t: int) -> float:
        """The `lr` of the row of mark t + 1: the step size of a node's (t + 1)-th phase.

        Parameters
        ----------
        t : the mark, from 0.

        Returns
        -------
        float, lr * lr_decay ** t (as `phase_lr` for phase index t).
        """
        return self.lr(t)

    def mark(self, ctx: RunContext, ev: Instant) -> None:
        """What a mark's record needs of the state (the engine calls it at each mark); by
        default `settle`. An algorithm whose rows cost a pass to bring up to date may leave
        them to `settle`, which `current` calls before a model is read.

        Parameters
        ----------
        ctx : the run.
        ev : the simulation.
        """
        self.settle(ctx, ev)

    def settle(self, ctx: RunContext, ev: Instant) -> None:
        """Bring every row up to date (what has arrived shown in it) before the models are
        read; nothing by default.

        Parameters
        ----------
        ctx : the run.
        ev : the simulation.
        """

    def current(self, ctx: RunContext) -> None:
        """`settle`, once the engine has bound the simulation: every model read (the average,
        the local and node models) is up to date.

        Raises
        ------
        RuntimeError
            with `snapshot_in_row`, when a phase begun is not computed yet (its snapshot is
            still its row, which settling would change): models are read at marks.
        """
        if self.events is None:
            return
        if self.snapshot_in_row and not self.events.all_computed():
            raise RuntimeError(f"{self.name}: a model read while local phases begun are not "
                               "computed (their snapshots are their rows); read models at a mark")
        self.settle(ctx, self.events)

    def results_of_offsets(self, ctx: RunContext, nodes: np.ndarray, offsets: Params) -> Params:
        """With `snapshot_in_row`, loading a checkpoint whose phases in progress held their
        offsets y^K - x_read (written before they held results): the results to hold instead,
        which end the phases as the offsets would have with the rows as they are now. By
        default x_read + offset, the row read being the node's row now (an algorithm whose
        marks change the rows, as asynchronous SGP's, says how it ends a phase instead).

        Parameters
        ----------
        ctx : the run (its state and the algorithm's loaded).
        nodes : int64 [m], rows.
        offsets : name -> [m, *shape].

        Returns
        -------
        name -> [m, *shape].
        """
        index = torch.as_tensor(nodes, device=ctx.device)
        return {k: ctx.population.params[k].index_select(0, index).add_(v)
                for k, v in offsets.items()}

    def left_undone(self, ctx: RunContext) -> str:
        """What the run's end leaves unapplied, as one line for the log ("" when nothing); the
        engine prints it when the run finishes.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        str.
        """
        return ""

    @abstractmethod
    def start(self, ctx: RunContext, ev: Instant) -> None:
        """What happens at time 0 (the first phases, the first messages).

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        """

    @abstractmethod
    def phase_end(self, ctx: RunContext, ev: Instant, nodes: np.ndarray) -> None:
        """The local phases of `nodes` end now.

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        nodes : int64 [m], rows, sorted.
        """

    @abstractmethod
    def arrive(self, ctx: RunContext, ev: Instant, messages: Delivery) -> None:
        """`messages` arrive, each at its `due` (its receiver's `time`, and its sender's where
        `couples_sender`: the arrival changes both rows).

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        messages : sorted by (arrival, sender, receiver); those of one instant to one receiver
            are all there (with `couples_sender`, one instant's pairs that share a node may
            come in successive calls, in this order).
        """

    def average_model(self, ctx: RunContext) -> Params:
        self.current(ctx)
        weights = torch.full((ctx.num_nodes,), 1.0 / ctx.num_nodes, device=ctx.device,
                             dtype=ctx.dtype)
        return ctx.comm.node_sum(ctx.population.params, weights)

    def local_models(self, ctx: RunContext) -> Params:
        self.current(ctx)
        return ctx.population.params

    def node_models(self, ctx: RunContext) -> Params:
        self.current(ctx)
        return ctx.population.params
