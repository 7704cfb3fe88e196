"""The event-driven run of an asynchronous algorithm on the simulated clock.

Each node runs its own local phases (p2pfl/engine/phases.py); messages are in flight in a
`Mailbox` (p2pfl/scale/mailbox.py). The simulation goes in simulated-time order, one exact
window at a time (p2pfl/engine/windows.py): from the earliest pending event T, every event
before T + L (L the lookahead: the shortest phase or message) is known when the window opens
and none of them can change an event of another node except through the nodes it touches (a
receiver; both nodes of a pairwise averaging), so the window's events are split into levels of
events at different nodes, each level one batched update. The result is that of processing the
instants one at a time, in order; at an instant T:

1. every node whose phase ends at T: `Asynchronous.phase_end` (the offsets computed in batches);
2. every message due at T, sorted by (sender, receiver, order of sending): `Asynchronous.arrive`;
   messages sent at T with no delay arrive in the same instant, so this repeats until none is due
   at T;
3. the phases asked for at T begin, each reading its node's model as the instant left it.

A message is due after its transfer time alone on its link (`network.model = "ideal"`), or
(`"flow"`) when its flows have ended in a `Flows` network (p2pfl/scale/flows.py) that every
message in flight shares: its sender's uplink, its receiver's downlink, the underlay; a message
that goes both ways (a pairwise exchange) is due when both flows have ended. The network's
events run in time order up to each window, and a window's new flows join the network at its
end, in a fixed order (send time, sender, receiver, message sender), as they start taking
bandwidth only after it.

Times are compared exactly: two events are one instant only when their times are equal floats.
Nothing is random here: the algorithm's draws are functions of (seed, stream, keys), so a run is
a function of its seed.

The state (the time, the phases, the messages and their payloads, the interval's counts) is a
checkpoint's, through `EventClock`, the round callback that also writes each row's event
metrics. It holds each model row once: a payload shared by the messages of one send is one
row, and a phase's snapshot or a payload that is still its node's model is the population's
row (restored before the callbacks).
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import torch

from algorithms.asynchronous import Asynchronous
from p2pfl.callbacks import Callback, RoundEnd
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.engine.phases import Phases
from p2pfl.engine.transport import Transport
from p2pfl.engine.windows import Window, levels, lookahead_s
from p2pfl.scale.mailbox import Delivery, Mailbox

MARK_TOLERANCE = 1e-9  # an event within this relative distance after a mark belongs to it


class Simulation:
    """The state of an event-driven run and its instants (module docstring); the `Instant` an
    asynchronous algorithm sees.

    Parameters
    ----------
    ctx : the run (its clock is the network's).
    algorithm : the asynchronous algorithm.
    windows : process exact windows (False: one instant at a time, the reference the windows
        equal bit for bit).
    """

    def __init__(self, ctx: RunContext, algorithm: Asynchronous, windows: bool = True) -> None:
        self.ctx, self.algorithm = ctx, algorithm
        self.offset = 1 if algorithm.mixing == "server" else 0  # the star's server is node 0
        self.mailbox = Mailbox(ctx.population.params)
        self.phases = Phases(ctx, algorithm, self.offset, self.mailbox)
        self.transport = Transport(ctx, lambda: self.phases.phase)
        self.network = self.transport.network
        self.now, self.started = 0.0, False  # now: the current window's first instant
        self.lookahead = lookahead_s(ctx.clock, self.network is not None, self.offset) \
            if windows else 0.0
        self.clock = np.zeros(ctx.clock.n)  # each graph node's instant (its latest event's)
        self.window = Window(ctx.clock.n)
        self._last_instant = -np.inf
        self._reset_interval()
        algorithm.bind(self)

    def _reset_interval(self) -> None:
        self.instants, self.events, self.copies, self.scalars = 0, 0, 0, 0
        self.windows, self.batches = 0, 0
        self.trained: list[float] = []  # [node, loss, node, loss, ...] of the ended phases
        self.ages: list[float] = []

    # -- what the algorithm sees (algorithms.asynchronous.Instant) --

    def time(self, ids: np.ndarray) -> np.ndarray:
        return self.clock[ids]

    def phase(self, nodes: np.ndarray) -> np.ndarray:
        return self.phases.phase[nodes]

    def offsets(self, nodes: np.ndarray) -> Params:
        return self.phases.offsets(nodes)

    def result_slots(self, nodes: np.ndarray) -> np.ndarray:
        return self.phases.result_slots(nodes)

    def read_s(self, nodes: np.ndarray) -> np.ndarray:
        return self.phases.read[nodes]

    def all_computed(self) -> bool:
        return bool(self.phases.computed.all())

    def begin(self, nodes: np.ndarray, models: Params | None = None) -> None:
        # models copied now: a payload row may be released and reused before the instant ends
        kept = None if models is None else {k: v.clone() for k, v in models.items()}
        nodes = np.asarray(nodes, dtype=np.int64)
        times = self.clock[nodes + self.offset]
        self.window.ask(nodes, kept, times, self.window.release(nodes + self.offset, times))

    def graph(self, k: int) -> nx.Graph:
        return self.transport.graph(k)[0]

    def send(self, src: np.ndarray, dst: np.ndarray, k: np.ndarray,
             share: np.ndarray | None = None, payload: Params | None = None,
             owner: np.ndarray | None = None, scalar: np.ndarray | None = None,
             tag: np.ndarray | None = None, read: np.ndarray | None = None,
             copies: int = 1, scalars: int = 0, snapshot: np.ndarray | None = None,
             both_ways: bool = False, slots: np.ndarray | None = None) -> None:
        m = len(src)
        slot = np.full(m, -1, dtype=np.int64)
        sent = self.clock[src]
        if payload is not None or snapshot is not None or slots is not None:
            u = len(next(iter(payload.values()))) if payload is not None else len(
                snapshot if slots is None else slots)
            owner = np.arange(m) if owner is None else owner
            if read is None:
                read = np.zeros(u)
                read[owner] = sent
            about = (np.zeros(u) if scalar is None else scalar, read,
                     np.zeros(u, dtype=np.int64) if tag is None else tag,
                     np.bincount(owner, minlength=u))
            if slots is None:
                slots = self.mailbox.store(
                    payload if snapshot is None else self.ctx.population.params, *about,
                    rows=snapshot)
            else:
                self.mailbox.label(slots, *about, rows=snapshot)
            slot = slots[owner]
        k = np.broadcast_to(np.asarray(k, dtype=np.int64), (m,))
        due, group = self.transport.time(src, dst, k, sent, both_ways)
        self.mailbox.post(due, src, dst, np.ones(m) if share is None else share, sent,
                          slot, group)
        self.copies += copies * m
        self.scalars += scalars * m

    def sending(self, nodes: np.ndarray) -> np.ndarray:
        return np.isin(nodes, self.mailbox.src) | (self.window.last_due[nodes]
                                                   >= self.clock[nodes])

    def payload(self, slots: np.ndarray) -> Params:
        return self.mailbox.payload(slots)

    def add_payloads(self, out: Params, rows: np.ndarray, slots: np.ndarray,
                     weights: np.ndarray) -> None:
        self.mailbox.add_payloads(out, rows, slots, weights)

    def sums(self, count: int, rows: np.ndarray, slots: np.ndarray, weights: np.ndarray,
             start: Params | None = None) -> np.ndarray:
        return self.mailbox.sums(count, rows, slots, weights, start)

    def copy_out(self, out: Params, rows: torch.Tensor, slots: np.ndarray) -> None:
        self.mailbox.copy_out(out, rows, slots)

    def slot_info(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        box = self.mailbox
        return box.scalar[slots], box.tag[slots], box.read[slots]

    def hold(self, slots: np.ndarray) -> None:
        np.add.at(self.mailbox.refs, slots, 1)

    def drop(self, slots: np.ndarray) -> None:
        self.mailbox.release_slots(slots)

    def mixed(self, ages_s: np.ndarray) -> None:
        self.ages += np.asarray(ages_s, dtype=np.float64).tolist()

    def carried(self) -> float:
        return self.mailbox.carried()

    # -- the simulation --

    def next_time(self) -> float:
        """When the next instant is (inf when nothing is pending).

        With a flow-level network, its events run up to that instant first: flows become
        active and end there, and the messages whose flows have all ended become due.
        """
        phase = float(self.phases.due.min(initial=np.inf))
        self.transport.run(self.mailbox, phase)
        return min(phase, self.mailbox.next_due())

    def step(self, until: float = np.inf) -> None:
        """Time 0 (the algorithm's start) if not yet done, else the next window: the events
        from the next instant T up to T + lookahead (excluded) and `until` (included).

        Parameters
        ----------
        until : seconds.
        """
        if not self.started:
            self.started, self._last_instant = True, 0.0
            self.algorithm.start(self.ctx, self)
            self.instants += 1
            self._close(0.0)
            return
        self.now = start = self.next_time()
        lookahead = self.transport.lookahead(self.lookahead)
        limit = max(min(np.nextafter(start + lookahead, -np.inf), until), start) \
            if lookahead > 0 else start
        self.transport.run(self.mailbox, limit, whole=True)
        ended = np.flatnonzero(self.phases.due <= limit)
        ended = ended[np.lexsort((ended, self.phases.due[ended]))]
        self._process(ended, self.mailbox.take(limit), limit > start)
        self._close(start)

    def _process(self, ended: np.ndarray, messages: Delivery, wide: bool) -> None:
        """The window's phase ends (rows, by time) and messages, level by level; the phases
        asked for begin after each level if the window is `wide` (later than its start, so
        nothing it sends can arrive at an instant of it), else when it closes."""
        count = len(ended)
        time = np.concatenate([self.phases.due[ended], messages.due])
        kind = np.repeat(np.array([0, 1]), [count, len(messages)])
        first = np.concatenate([ended + self.offset, messages.dst])
        second = np.concatenate([np.full(count, -1), messages.src if
                                 self.algorithm.couples_sender else np.full(len(messages), -1)])
        order = np.lexsort((np.arange(len(time)), kind, time))
        level = np.empty(len(time), dtype=np.int64)
        level[order] = levels(time[order], kind[order], first[order], second[order])
        self.window.open(level, time, first, second, messages.src, messages.due)
        instants = np.unique(time)
        self.instants += len(instants) - int(instants[0] == self._last_instant)
        self._last_instant = float(instants[-1])
        self.windows += 1
        self.events += len(time)
        for at in range(int(level.max()) + 1):
            self.window.level = at
            nodes = np.sort(ended[level[:count] == at])
            if len(nodes):
                self.clock[nodes + self.offset] = self.phases.due[nodes]
                self.phases.end(nodes)
                self.trained += np.stack([nodes, self.phases.loss[nodes]], 1).ravel().tolist()
                self.algorithm.phase_end(self.ctx, self, nodes)
            these = np.flatnonzero(level[count:] == at)
            if len(these):
                part = messages.subset(these)
                self.clock[part.dst] = part.due
                if self.algorithm.couples_sender:
                    self.clock[part.src] = part.due
                self.algorithm.arrive(self.ctx, self, part)
                self.mailbox.release(part)
            if wide:
                self._run_begins(at)
            self.batches += 1

    def _run_begins(self, level: float) -> None:
        """Begin the phases asked for that may begin once `level` is done (`Window.ready`)."""
        for nodes, models, times in self.window.ready(level):
            self.phases.begin(nodes, times, models)

    def _close(self, start: float) -> None:
        """End a window: its flows join the network (`Transport.flush`), and the phases asked
        for begin, unless messages sent without delay are due at this same instant (a window of
        one instant: they come first)."""
        self.window.close()
        self.transport.flush()
        if self.window.pending:
            self.transport.run(self.mailbox, start)
            if self.mailbox.next_due() <= start:
                self.window.hold()
                return
        self._run_begins(np.inf)

    def advance(self, until: float) -> None:
        """Every instant up to `until` (and within MARK_TOLERANCE after it); then every phase
        begun is computed, so that which phases have been computed at a mark (their losses, the
        divergence guard's checks) does not depend on how the events were batched."""
        if not self.started:
            self.step()
        limit = until * (1 + MARK_TOLERANCE)
        while self.next_time() <= limit:
            self.step(limit)
        self.phases.compute()

    def record(self) -> dict[str, Any]:
        """The metrics of the interval since the last record; starts the next interval.

        Returns
        -------
        dict: steps per node so far (min, mean, max), the staleness (s) of what was mixed in
        the interval (mean, max; left out when nothing was: no age to report), the events
        (phase ends and message arrivals), the instants simulated, the exact windows and the
        batched updates (levels) they were processed in, and for the runner: the
        ended phases' nodes and losses, the copies and scalars sent.
        """
        steps, ages = self.phases.steps, np.sort(self.ages)  # sorted: means of any order equal
        trained = np.asarray(self.trained).reshape(-1, 2)
        trained = trained[np.lexsort((trained[:, 0], trained[:, 1]))]
        stale = {"staleness_s_mean": float(np.mean(ages)),
                 "staleness_s_max": float(np.max(ages))} if len(ages) else {}
        out = {"steps_min": int(steps.min()), "steps_mean": float(steps.mean()),
               "steps_max": int(steps.max()), **stale,
               "events": self.events, "instants": self.instants, "windows": self.windows,
               "batches": self.batches,
               "_nodes": trained[:, 0].astype(np.int64), "_losses": trained[:, 1],
               "_copies": self.copies, "_scalars": self.scalars}
        self._reset_interval()
        return out

    def state_dict(self) -> dict[str, Any]:
        return self.transport.state_dict() | {"now": self.now, "started": self.started,
                "phases": self.phases.state_dict(),
                "mailbox": self.mailbox.state_dict(self.ctx.population.params),
                "instants": self.instants, "events": self.events, "windows": self.windows,
                "batches": self.batches, "last_instant": self._last_instant,
                "copies": self.copies, "scalars": self.scalars, "trained": list(self.trained),
                "ages": list(self.ages)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a `state_dict` back, once the population is restored (the phases' snapshots and
        the payloads that were still its rows are read from it).

        Parameters
        ----------
        state : what `state_dict` returned.
        """
        self.now, self.started = float(state["now"]), bool(state["started"])
        self.mailbox.load_state_dict(state["mailbox"], self.ctx.population.params)
        self.phases.load_state_dict(state["phases"])  # its results may be in the mailbox
        self.instants, self.copies = int(state["instants"]), int(state["copies"])
        self.events = int(state["events"])
        self.windows, self.batches = int(state.get("windows", 0)), int(state.get("batches", 0))
        self._last_instant = float(state.get("last_instant", self.now))
        self.scalars, self.trained = int(state["scalars"]), list(state["trained"])
        self.ages = list(state["ages"])
        self.transport.load_state_dict(state)


class EventClock(Callback):
    """The simulation's state in a checkpoint (as `NetworkTime` keeps the synchronous clock's);
    the runner writes the event metrics itself."""

    def __init__(self, simulation: Simulation) -> None:
        self.simulation = simulation

    def after_round(self, end: RoundEnd) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return self.simulation.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.simulation.load_state_dict(state)
