"""The event-driven run of an asynchronous algorithm on the simulated clock.

Each node runs its own local phases (p2pfl/engine/phases.py); messages are in flight in a
`Mailbox` (p2pfl/scale/mailbox.py). The simulation goes from instant to instant in simulated-time
order: the next instant is the earliest phase end or message arrival. At an instant T:

1. every node whose phase ends at T, all at once: `Asynchronous.phase_end` with the nodes sorted
   by id (the offsets computed in one batch);
2. every message due at T, all at once, sorted by (receiver, sender, order of sending):
   `Asynchronous.arrive`; messages sent at T with no delay arrive in the same instant, so this
   repeats until none is due at T;
3. the phases asked for at T begin, in the order they were asked for: each reads its node's
   model as the instant left it.

A message is due after its transfer time alone on its link (`network.model = "ideal"`), or
(`"flow"`) when its flows have ended in a `Flows` network (p2pfl/scale/flows.py) that every
message in flight shares: its sender's uplink, its receiver's downlink, the underlay; a message
that goes both ways (a pairwise exchange) is due when both flows have ended. The network's
events run in time order up to each instant, so a message's arrival moves whenever another one
starts or ends before it.

Times are compared exactly: two events are one instant only when their times are equal floats
(with equal speeds, no jitter and equal transfers they are). Everything at an instant is a
batched update of the nodes concerned, selected by index. Nothing is random here: the
algorithm's draws are functions of (seed, stream, keys), so a run is a function of its seed.

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

from algorithms.asynchronous import Asynchronous
from p2pfl.callbacks import Callback, RoundEnd
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.engine.phases import Phases
from p2pfl.scale.flows import Flows
from p2pfl.scale.mailbox import Delivery, Mailbox

MARK_TOLERANCE = 1e-9  # an event within this relative distance after a mark belongs to it


class Simulation:
    """The state of an event-driven run and its instants (module docstring); the `Instant` an
    asynchronous algorithm sees.

    Parameters
    ----------
    ctx : the run (its clock is the network's).
    algorithm : the asynchronous algorithm.
    """

    def __init__(self, ctx: RunContext, algorithm: Asynchronous) -> None:
        self.ctx, self.algorithm = ctx, algorithm
        self.offset = 1 if algorithm.mixing == "server" else 0  # the star's server is node 0
        self.phases = Phases(ctx, algorithm, self.offset)
        self.mailbox = Mailbox(ctx.population.params)
        self.network = Flows(ctx.clock.resources(ctx.schedule.at(0))) \
            if ctx.clock.net.model == "flow" else None
        self.next_group = 0  # the flow model's message groups
        self.now, self.started = 0.0, False
        self._begins: list[tuple[np.ndarray, Params | None]] = []
        self._graphs: dict[int, tuple[nx.Graph, bool]] = {}
        self._reset_interval()
        algorithm.bind(self)

    def _reset_interval(self) -> None:
        self.instants, self.events, self.copies, self.scalars = 0, 0, 0, 0
        self.trained: list[float] = []  # [node, loss, node, loss, ...] of the ended phases
        self.ages: list[float] = []

    # -- what the algorithm sees (algorithms.asynchronous.Instant) --

    def phase(self, nodes: np.ndarray) -> np.ndarray:
        return self.phases.phase[nodes]

    def offsets(self, nodes: np.ndarray) -> Params:
        return self.phases.offsets(nodes)

    def read_s(self, nodes: np.ndarray) -> np.ndarray:
        return self.phases.read[nodes]

    def begin(self, nodes: np.ndarray, models: Params | None = None) -> None:
        # models copied now: a payload row may be released and reused before the instant ends
        kept = None if models is None else {k: v.clone() for k, v in models.items()}
        self._begins.append((np.asarray(nodes, dtype=np.int64), kept))

    def graph(self, k: int) -> nx.Graph:
        return self._graph(k)[0]

    def _graph(self, k: int) -> tuple[nx.Graph, bool]:
        if k not in self._graphs:
            G = self.ctx.schedule.at(k)
            timed = any(name in data for _, _, data in G.edges(data=True)
                        for name in ("latency_s", "bandwidth_gbps"))
            self._graphs[k] = (G, timed)
            phase = self.phases.phase
            alive = phase[phase >= 0].min(initial=0)  # no dispatched node needs an older one
            self._graphs = {r: g for r, g in self._graphs.items() if r >= alive or r == k}
        return self._graphs[k]

    def _timed(self, k: int) -> nx.Graph | None:
        """Round k's graph where its edges carry latency_s or bandwidth_gbps, else None."""
        G, timed = self._graph(k)
        return G if timed else None

    def _transfer(self, k: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Seconds each message src -> dst of round k [M] takes alone on its link."""
        out = np.empty(len(src))
        for r in np.unique(k).tolist():
            at = k == r
            out[at] = self.ctx.clock.transfer(r, src[at], dst[at], self._timed(r))
        return out

    def _routes(self, k: np.ndarray, src: np.ndarray, dst: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`Clock.routes` of messages src -> dst of rounds k [M], in their order."""
        clock = self.ctx.clock
        rounds = np.unique(k).tolist()
        if len(rounds) == 1 or all(self._timed(r) is None for r in rounds):
            return clock.routes(k, src, dst, self._timed(rounds[0]) if rounds else None)
        parts = [(k == r, clock.routes(r, src[k == r], dst[k == r], self._timed(r)))
                 for r in rounds]
        width = max(part[2].shape[1] for _, part in parts)
        latency, bits, cap = np.empty(len(k)), np.empty(len(k)), np.empty(len(k))
        routes = np.full((len(k), width), len(clock.resources()), dtype=np.int64)
        for at, (lat, size, route, own) in parts:
            latency[at], bits[at], cap[at] = lat, size, own
            routes[at, :route.shape[1]] = route
        return latency, bits, routes, cap

    def send(self, src: np.ndarray, dst: np.ndarray, k: np.ndarray,
             share: np.ndarray | None = None, payload: Params | None = None,
             owner: np.ndarray | None = None, scalar: np.ndarray | None = None,
             tag: np.ndarray | None = None, read: np.ndarray | None = None,
             copies: int = 1, scalars: int = 0, snapshot: np.ndarray | None = None,
             both_ways: bool = False) -> None:
        m = len(src)
        slot = np.full(m, -1, dtype=np.int64)
        if payload is not None or snapshot is not None:
            u = len(snapshot) if snapshot is not None else len(next(iter(payload.values())))
            owner = np.arange(m) if owner is None else owner
            slots = self.mailbox.store(
                payload if snapshot is None else self.ctx.population.params,
                np.zeros(u) if scalar is None else scalar,
                np.full(u, self.now) if read is None else read,
                np.zeros(u, dtype=np.int64) if tag is None else tag,
                np.bincount(owner, minlength=u), rows=snapshot)
            slot = slots[owner]
        k = np.broadcast_to(np.asarray(k, dtype=np.int64), (m,))
        if self.network is None:  # ideal: each message alone on its link
            delay = self._transfer(k, src, dst)
            if both_ways:
                delay = np.maximum(delay, self._transfer(k, dst, src))
            due, group = self.now + delay, None
        else:  # flow: due when every flow of the message has arrived
            group = self.next_group + np.arange(m, dtype=np.int64)
            self.next_group += m
            legs = np.stack([src, dst] + ([dst, src] if both_ways else []), axis=1)
            a, b = legs[:, 0::2].ravel(), legs[:, 1::2].ravel()  # a message's legs in a row
            ways = 2 if both_ways else 1
            self.network.add(np.full(m * ways, self.now), *self._routes(np.repeat(k, ways), a, b),
                             group=np.repeat(group, ways), queue=a * self.ctx.clock.n + b)
            due = np.full(m, np.inf)
        self.mailbox.post(due, src, dst, np.ones(m) if share is None else share, self.now,
                          slot, group)
        self.copies += copies * m
        self.scalars += scalars * m

    def sending(self, nodes: np.ndarray) -> np.ndarray:
        return np.isin(nodes, self.mailbox.src)

    def payload(self, slots: np.ndarray) -> Params:
        return self.mailbox.payload(slots)

    def add_payloads(self, out: Params, rows: np.ndarray, slots: np.ndarray,
                     weights: np.ndarray) -> None:
        self.mailbox.add_payloads(out, rows, slots, weights)

    def slot_info(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        box = self.mailbox
        return box.scalar[slots], box.tag[slots], box.read[slots]

    def hold(self, slots: np.ndarray) -> None:
        np.add.at(self.mailbox.refs, slots, 1)

    def drop(self, slots: np.ndarray) -> None:
        np.subtract.at(self.mailbox.refs, slots, 1)

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
        self._run_flows(phase)
        return min(phase, self.mailbox.next_due())

    def _run_flows(self, until: float) -> None:
        """The flow-level network's events up to `until` or the next message due, whichever is
        first: a message whose flows have all ended becomes due when the last one ends."""
        while self.network is not None:
            event = self.network.advance(min(until, self.mailbox.next_due()))
            if event is None:
                return
            time, _, groups = event
            self.mailbox.deliver(groups[~np.isin(groups, self.network.in_flight())], time)

    def step(self) -> None:
        """Time 0 (the algorithm's start) if not yet done, else the next instant."""
        if not self.started:
            self.started = True
            self.algorithm.start(self.ctx, self)
        else:
            self.now = self.next_time()
            ended = np.flatnonzero(self.phases.due == self.now)
            if len(ended):
                self.events += len(ended)
                self.phases.end(ended)
                self.trained += np.stack([ended, self.phases.loss[ended]], 1).ravel().tolist()
                self.algorithm.phase_end(self.ctx, self, ended)
        while True:
            self._run_flows(self.now)
            if self.mailbox.next_due() != self.now:
                break
            messages: Delivery = self.mailbox.take(self.now)
            self.events += len(messages)
            self.algorithm.arrive(self.ctx, self, messages)
            self.mailbox.release(messages)
        begins, self._begins = self._begins, []
        for nodes, models in begins:
            self.phases.begin(nodes, self.now, models)
        self.instants += 1

    def advance(self, until: float) -> None:
        """Every instant up to `until` (and within MARK_TOLERANCE after it)."""
        if not self.started:
            self.step()
        while self.next_time() <= until * (1 + MARK_TOLERANCE):
            self.step()

    def record(self) -> dict[str, Any]:
        """The metrics of the interval since the last record; starts the next interval.

        Returns
        -------
        dict: steps per node so far (min, mean, max), the staleness (s) of what was mixed in
        the interval (mean, max; left out when nothing was: no age to report), the events
        (phase ends and message arrivals) and the instants simulated, and for the runner: the
        ended phases' nodes and losses, the copies and scalars sent.
        """
        steps, ages = self.phases.steps, self.ages
        trained = np.asarray(self.trained).reshape(-1, 2)
        stale = {"staleness_s_mean": float(np.mean(ages)),
                 "staleness_s_max": float(np.max(ages))} if ages else {}
        out = {"steps_min": int(steps.min()), "steps_mean": float(steps.mean()),
               "steps_max": int(steps.max()), **stale,
               "events": self.events, "instants": self.instants,
               "_nodes": trained[:, 0].astype(np.int64), "_losses": trained[:, 1],
               "_copies": self.copies, "_scalars": self.scalars}
        self._reset_interval()
        return out

    def state_dict(self) -> dict[str, Any]:
        flows = {"network": self.network.state_dict(), "next_group": self.next_group} \
            if self.network is not None else {}
        return flows | {"now": self.now, "started": self.started,
                "phases": self.phases.state_dict(),
                "mailbox": self.mailbox.state_dict(self.ctx.population.params),
                "instants": self.instants, "events": self.events,
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
        self.phases.load_state_dict(state["phases"])
        self.mailbox.load_state_dict(state["mailbox"], self.ctx.population.params)
        self.instants, self.copies = int(state["instants"]), int(state["copies"])
        self.events = int(state["events"])
        self.scalars, self.trained = int(state["scalars"]), list(state["trained"])
        self.ages = list(state["ages"])
        if self.network is not None:
            self.network.load_state_dict(state["network"])
            self.next_group = int(state["next_group"])


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
