"""Simulated network time: how long each round takes on a network of links and nodes.

The `[network]` table (`NetworkConfig`) describes the network: a local step takes `step_s`
seconds on a node, `slow_factor` times longer on a straggler (a `stragglers` fraction of the
nodes, fixed for the run); a message waits `latency_s`, then its bits go over the links it
crosses: on the "flow" model (the default) shared by max-min fairness with every other message
in progress on its sender's uplink, its receiver's downlink and an underlay's links
(p2pfl/scale/flows.py), on the "ideal" model alone at `bandwidth_gbps`; a slow link (a
`slow_links` fraction of the ordered node pairs, fixed for the run) is `slow_factor` times
slower; `jitter` > 0 multiplies every compute time (per node and round) and transfer
(per message) by a lognormal factor exp(jitter * N(0, 1)). Edge attributes `latency_s` and
`bandwidth_gbps` of a round's graph replace the configured values for that link. A message
carries one model (num_params values of the run's dtype) plus, for Push-Sum, its float64 weight.
Every draw is a function of (seed, node or link, round), so times never depend on what ran before.

`Clock` keeps, per node, the time at which it starts its next round (seconds since the start).
- Synchronous (default): node i starts round t + 1 when it has finished its local phase and
  every message sent to it in round t has arrived:
  start_i(t+1) = max(done_i, max_{j -> i} done_j + transfer_{j -> i}), done_i = start_i(t) +
  compute_i(t). A lost message or an offline sender is not waited for; an offline node idles.
- Centralized: the server sends the model to each sampled client, the client trains and sends
  its update back; the round ends when the last one arrives.
- Overlap (`overlap = true`, Push-Sum only): nodes never wait. Rounds become slots of one
  normal local phase (the mean K_i * step_s); a node's phases follow one another, and it
  trains, sends and receives in the slot its current phase ends in (nearest slot end), so a
  straggler takes part in one slot of every slow_factor and is offline in the others. A message
  sent at the end of slot t is added to its receiver at the end of the first slot that ends
  after it has arrived (`delays = "clock"`, at most `max_delay` slots; on the flow model its
  transfer shares the links with the messages still in flight, and a node whose earlier push
  is still in flight does not push), or t + a uniform 0..max_delay (`delays = "random"`).
  The event engine's flows (p2pfl/engine/events.py) and overlap's take the nodes' link
  capacities from round 0's graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
from scipy.special import ndtri

import topologies as T
from p2pfl.core.seeding import stream_seed
from p2pfl.scale.flows import Flows, drain

if TYPE_CHECKING:
    from p2pfl.config import NetworkConfig

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def hash_uniform(seed: int, *keys: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) numbers as a fixed function of (seed, keys) (splitmix64).

    The same link or node gets the same number in every round and order.

    Parameters
    ----------
    seed : the run's seed.
    *keys : integer arrays, broadcast together.

    Returns
    -------
    float64 array of the broadcast shape.
    """
    z = np.full(np.broadcast(*keys).shape, np.uint64(seed & (2**64 - 1)), dtype=np.uint64)
    for key in keys:
        z = (z + np.asarray(key).astype(np.uint64) + _GOLDEN) * np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(31)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) / 2.0**53


class Underlay:
    """An underlay's directed links as resources and each overlay pair's path over them.

    Parameters
    ----------
    graph : the underlay (topologies/underlays.py): edges with capacity_gbps and latency_s.
    n : the overlay's nodes, at the underlay's nodes 0..n-1.
    """

    def __init__(self, graph: nx.Graph, n: int) -> None:
        directed = [(u, v) for a, b in graph.edges for u, v in ((a, b), (b, a))]
        index = {link: k for k, link in enumerate(directed)}
        self.bps = np.array([graph.edges[link].get("capacity_gbps", np.inf) * 1e9
                             for link in directed])
        self.paths: dict[tuple[int, int], np.ndarray] = {}
        self.latency = np.zeros((n, n))
        for (i, j), path in T.underlay_routes(graph, n).items():
            self.paths[i, j] = np.array([index[link] for link in path], dtype=np.int64)
            self.latency[i, j] = sum(graph.edges[link].get("latency_s", 0.0) for link in path)

    def routes(self, src: np.ndarray, dst: np.ndarray, pad: int) -> tuple[np.ndarray, np.ndarray]:
        """The underlay links each message src[e] -> dst[e] crosses, and its path latency.

        Parameters
        ----------
        src, dst : int arrays [E].
        pad : the index that fills a shorter path's row.

        Returns
        -------
        (int64 [E, longest path], link indices padded with `pad`; float64 [E], seconds).
        """
        paths = [self.paths[int(i), int(j)] for i, j in zip(src, dst, strict=True)]
        lengths = np.array([len(path) for path in paths], dtype=np.int64)
        out = np.full((len(paths), max(int(lengths.max(initial=0)), 1)), pad, dtype=np.int64)
        if len(paths):
            out[np.arange(out.shape[1]) < lengths[:, None]] = np.concatenate(paths)
        return out, self.latency[src, dst]


@dataclass(frozen=True)
class Links:
    """What the messages of a round cross, one entry per message [E]."""

    latency: np.ndarray  # seconds to the first byte
    bps: np.ndarray  # the link's bandwidth, bit/s
    slow: np.ndarray  # how many times longer the whole transfer takes (a slow link), else 1
    own: np.ndarray  # bool: the link has a bandwidth of its own (a flow's private resource)
    jitter: np.ndarray  # the message's lognormal factor


@dataclass(frozen=True)
class RoundTime:
    """The simulated timing of one round on n graph nodes."""

    start: np.ndarray  # float64 [n], when each node starts its next round (s)
    done: np.ndarray  # float64 [n], when each node finished its local phase (s)
    delays: tuple[np.ndarray, np.ndarray, np.ndarray]  # (src, dst, rounds late) per message
    late: int  # messages that would arrive after max_delay rounds (taken at max_delay)
    ready: np.ndarray | None = None  # overlap: when each node's current local phase ends (s)
    # overlap on the flow model, where a message's delay is known only when it arrives:
    sent: tuple[np.ndarray, np.ndarray] | None = None  # (src, dst) of the round's messages
    arrived: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (src, dst, round sent)
    network: Flows | None = None  # the messages still in flight after the round

    def record(self) -> dict[str, float]:
        """Metrics of the round: when the last node finished it, the spread over nodes, and the
        mean time a node spent waiting for messages."""
        ahead = self.start if self.ready is None else self.ready  # overlap: phases in progress
        record = {"sim_time_s": float(self.start.max()),
                  "sim_spread_s": float(ahead.max() - ahead.min()),
                  "sim_wait_s": float((self.start - self.done).mean())}
        if self.late:
            record["messages_late"] = self.late
        return record


class Clock:
    """Per-node simulated time of a run (see the module docstring); `plan` is pure, `commit`
    advances the clock, so a round the divergence guard re-runs is timed once."""

    def __init__(self, net: NetworkConfig, n: int, seed: int, steps: np.ndarray | int,
                 message_bytes: int, exchanges: int = 1, underlay: nx.Graph | None = None
                 ) -> None:
        self.net, self.n, self.seed = net, n, seed
        self.underlay = Underlay(underlay, n) if underlay is not None else None
        self.steps, self.message_bytes, self.exchanges = steps, message_bytes, exchanges
        self._key = stream_seed(seed, "network")
        slow = hash_uniform(self._key, np.arange(n), 0) < net.stragglers
        self.step_s = net.step_s * np.where(slow, net.straggler_factor or net.slow_factor, 1.0)
        self.link_factor = net.slow_link_factor or net.slow_factor
        self.start = np.zeros(n)
        self.network: Flows | None = None  # overlap on the flow model: the flows in flight
        # Overlap: rounds are slots of one normal local phase; a node's phases follow each other
        # (`ready`: when its current one ends) and it takes part in the slot its phase ends in.
        self.slot_s = float(np.mean(steps)) * net.step_s
        self.ready = self.compute(0, np.ones(n, dtype=bool)) if net.overlap else self.start

    def _jitter(self, t: int | np.ndarray, *keys: np.ndarray) -> np.ndarray:
        if self.net.jitter == 0:
            return np.ones(np.broadcast(np.asarray(t), *keys).shape)
        u = hash_uniform(self._key, np.asarray(t, dtype=np.int64) + 1, *keys).clip(1e-12, 1 - 1e-12)
        return np.exp(self.net.jitter * ndtri(u))  # ndtri: the normal quantile

    def compute(self, t: int, active: np.ndarray) -> np.ndarray:
        """Seconds of round t's local phase per node [n] (0 for a node that does not train)."""
        seconds = self.steps * self.step_s * self._jitter(t, np.arange(self.n), 1)
        return np.where(active, seconds, 0.0)

    def phase_s(self, k: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Seconds of local phase k[e] of node nodes[e] (its phase k is its round k's).

        An event-driven run has each node at its own phase; the draw is `compute`'s for that
        node and round, so equal phases take equal times in either run.

        Parameters
        ----------
        k : int array [m], each node's phase index, from 0.
        nodes : int array [m], graph node ids.

        Returns
        -------
        float64 array [m].
        """
        steps = np.broadcast_to(np.asarray(self.steps), (self.n,))[nodes]
        return steps * self.step_s[nodes] * self._jitter(np.asarray(k), nodes, 1)

    def nominal_s(self, transfers: int = 1) -> float:
        """A nominal round: a node at nominal speed does its mean local steps and its messages
        take `transfers` plain transfers (latency plus size over bandwidth, no jitter).

        Parameters
        ----------
        transfers : messages one after the other (the star: down, then up).

        Returns
        -------
        float, seconds.
        """
        steps = np.broadcast_to(np.asarray(self.steps), (self.n,))
        training = steps[steps > 0] if (steps > 0).any() else steps  # the star's server: none
        net = self.net
        one = (net.latency_s + self.message_bytes * 8 / (net.bandwidth_gbps * 1e9)) * self.exchanges
        return float(np.mean(training)) * net.step_s + transfers * one

    def transfer(self, t: int | np.ndarray, src: np.ndarray, dst: np.ndarray,
                 graph: nx.Graph | None = None) -> np.ndarray:
        """Seconds from send to arrival of each message src[e] -> dst[e] of round t, alone on
        its link (the "ideal" model: latency plus size over the link's bandwidth).

        Parameters
        ----------
        t : round, from 0 (or an int array [E]: each message's round, an event-driven run's
            sender phase).
        src, dst : int arrays [E], the messages' senders and receivers.
        graph : the round's graph, whose edges may carry latency_s and bandwidth_gbps; None: the
            [network] values.

        Returns
        -------
        float64 array [E].
        """
        link = self.links(t, src, dst, graph)
        return (link.latency + self.message_bytes * 8 / link.bps) * link.slow * link.jitter \
            * self.exchanges

    def links(self, t: int | np.ndarray, src: np.ndarray, dst: np.ndarray,
              graph: nx.Graph | None = None) -> Links:
        """What each message src[e] -> dst[e] of round t crosses: its link's latency and
        bandwidth (the [network] values, an edge's own latency_s and bandwidth_gbps, a slow
        link's), and its jitter.

        Parameters
        ----------
        t : round, from 0 (or an int array [E]).
        src, dst : int arrays [E].
        graph : the round's graph, or None.

        Returns
        -------
        Links.
        """
        net = self.net
        latency = np.full(len(src), net.latency_s)
        gbps = np.full(len(src), np.nan)
        if graph is not None:
            _edge_values(graph, src, dst, "latency_s", latency)
            _edge_values(graph, src, dst, "bandwidth_gbps", gbps)
        own = ~np.isnan(gbps)  # the edge gives its own bandwidth
        gbps[~own] = net.bandwidth_gbps
        slow = hash_uniform(self._key, src, dst, 2) < net.slow_links
        factor = np.ones(len(src))
        if net.slow_link_latency_s or net.slow_link_gbps:  # a slow link's own values
            latency = np.where(slow, net.slow_link_latency_s or latency * self.link_factor,
                               latency)
            gbps = np.where(slow, net.slow_link_gbps or gbps / self.link_factor, gbps)
        else:  # a slow link takes link_factor times longer: latency and size alike
            factor = np.where(slow, self.link_factor, 1.0)
        return Links(latency, gbps * 1e9, factor, own | slow, self._jitter(t, src, dst, 3))

    def flows(self, t: int, src: np.ndarray, dst: np.ndarray, sent: np.ndarray,
              graph: nx.Graph | None = None) -> np.ndarray:
        """When each message src[e] -> dst[e], sent at sent[e], has arrived in the "flow"
        model, with no other message in progress (`routes`, p2pfl/scale/flows.py).

        Parameters
        ----------
        t : round, from 0.
        src, dst : int arrays [E].
        sent : float64 [E], seconds since the start.
        graph : the round's graph (edge latency_s and bandwidth_gbps, node uplink_gbps and
            downlink_gbps), or None.

        Returns
        -------
        float64 [E], seconds since the start.
        """
        flows = Flows(self.resources(graph))
        flows.add(sent, *self.routes(t, src, dst, graph))
        return drain(flows, len(src))

    def resources(self, graph: nx.Graph | None = None) -> np.ndarray:
        """The shared resources of the "flow" model: each node's uplink (0..n-1) and downlink
        (n..2n-1), then the underlay's directed links.

        Parameters
        ----------
        graph : a graph whose nodes may carry uplink_gbps and downlink_gbps, or None.

        Returns
        -------
        float64 [2n + underlay links], bit/s.
        """
        up, down = self.access(graph)
        underlay = self.underlay.bps if self.underlay is not None else np.zeros(0)
        return np.concatenate([up, down, underlay])

    def routes(self, t: int | np.ndarray, src: np.ndarray, dst: np.ndarray,
               graph: nx.Graph | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each message src[e] -> dst[e] as a flow of the "flow" model: it shares its sender's
        uplink, its receiver's downlink and the underlay links of its path (`resources`), and a
        link with a bandwidth of its own (an edge's bandwidth_gbps, a slow link) caps its rate.
        Q gossip exchanges are one message of Q times the size and the latency, as in the
        "ideal" model; jitter multiplies a message's latency and size.

        Parameters
        ----------
        t : round, from 0 (or an int array [E]).
        src, dst : int arrays [E].
        graph : the round's graph, or None.

        Returns
        -------
        (latency float64 [E] s, bits float64 [E], routes int64 [E, w] indices of `resources`
        padded with their count, own capacity float64 [E] bit/s, inf: none).
        """
        link = self.links(t, src, dst, graph)
        n = self.n
        routes = [src[:, None], n + dst[:, None]]
        latency = link.latency.copy()
        if self.underlay is not None:  # the path's links, after the access links
            path, path_latency = self.underlay.routes(src, dst, len(self.underlay.bps))
            routes.append(2 * n + path)
            latency += path_latency
        cap = np.where(link.own, link.bps / link.slow, np.inf)
        scale = link.slow * link.jitter * self.exchanges
        bits = self.message_bytes * 8.0 * scale / link.slow
        return latency * scale, bits, np.concatenate(routes, axis=1), cap

    def access(self, graph: nx.Graph | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each node's uplink and downlink capacity in bit/s ([network] uplink_gbps and
        downlink_gbps, 0: bandwidth_gbps; a graph node's uplink_gbps and downlink_gbps).

        Parameters
        ----------
        graph : the round's graph, or None.

        Returns
        -------
        (float64 [n], float64 [n]).
        """
        net = self.net
        out = []
        for name, value in (("uplink_gbps", net.uplink_gbps), ("downlink_gbps",
                                                                  net.downlink_gbps)):
            gbps = np.full(self.n, value or net.bandwidth_gbps)
            if graph is not None:
                for node, v in nx.get_node_attributes(graph, name).items():
                    gbps[node] = float(v)
            out.append(gbps * 1e9)
        return out[0], out[1]

    def arrivals(self, t: int, src: np.ndarray, dst: np.ndarray, sent: np.ndarray,
                 graph: nx.Graph | None = None) -> np.ndarray:
        """When each message of round t, sent at sent[e], arrives, in the run's model.

        Parameters
        ----------
        t : round, from 0.
        src, dst : int arrays [E].
        sent : float64 [E], seconds since the start.
        graph : the round's graph, or None.

        Returns
        -------
        float64 [E], seconds since the start.
        """
        if self.net.model == "flow":
            return self.flows(t, src, dst, sent, graph)
        return sent + self.transfer(t, src, dst, graph)

    def plan(self, t: int, src: np.ndarray, dst: np.ndarray, active: np.ndarray,
             graph: nx.Graph | None = None) -> RoundTime:
        """The timing of decentralized round t, synchronous or overlapped.

        Parameters
        ----------
        t : round, from 0.
        src, dst : int arrays [E], the delivered messages src -> dst.
        active : bool [n], the training nodes.
        graph : the round's graph (per-edge latency and bandwidth), or None.

        Returns
        -------
        RoundTime.
        """
        if self.net.overlap:  # sent at the slot's end, taken at the end of a later slot
            ready = np.where(active, self.ready + self.compute(t + 1, active), self.ready)
            end = np.full(self.n, (t + 1) * self.slot_s)
            if self.net.model == "flow" and self.net.delays == "clock":
                arrived, late, network = self._overlap_flows(t, src, dst, graph)
                empty = np.zeros(0, dtype=np.int64)
                return RoundTime(end, end, (empty, empty, empty), late, ready=ready,
                                 sent=(src, dst), arrived=arrived, network=network)
            late_by = self.transfer(t, src, dst, graph)
            return RoundTime(end, end, *self._delays(t, src, dst, late_by), ready=ready)
        done = self.start + self.compute(t, active)
        arrival = self.arrivals(t, src, dst, done[src], graph)
        start = done.copy()
        np.maximum.at(start, dst, arrival)
        empty = np.zeros(0, dtype=np.int64)
        return RoundTime(start, done, (empty, empty, empty), 0)

    def _overlap_flows(self, t: int, src: np.ndarray, dst: np.ndarray, graph: nx.Graph | None
                       ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int, Flows]:
        """Overlapped round t on the flow model: its messages, sent at the slot's end, join the
        flows still in flight from earlier slots; every message whose flow has ended by then is
        taken at the end of the slot, and one sent max_delay or more slots ago is taken now
        whatever it has left (its flow ends: the others get its share).

        Returns
        -------
        ((src, dst, round sent) of the messages taken, int64 arrays; how many were taken
        unfinished; the flows in flight afterwards).
        """
        n, end = self.n, (t + 1) * self.slot_s
        network = self.network.copy() if self.network is not None else \
            Flows(self.resources(graph))
        network.add(np.full(len(src), end), *self.routes(t, src, dst, graph),
                    group=(t * n + src) * n + dst,  # the message, by its round and its nodes
                    queue=src * n + dst)  # one connection from a node to another
        groups = []
        while (event := network.advance(end)) is not None:
            groups.append(event[2])
        flying = network.in_flight()
        overdue = flying[flying // (n * n) <= t - self.net.max_delay]
        if len(overdue):
            groups.append(overdue)
            network.finish(overdue, end)
        taken = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
        return (taken // n % n, taken % n, taken // (n * n)), len(overdue), network

    def _delays(self, t: int, src: np.ndarray, dst: np.ndarray, late_by: np.ndarray
                ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int]:
        """((src, dst, rounds late), messages capped at max_delay) of overlapped round t: a
        message that arrives `late_by` seconds after its receiver finished the round waits for
        the end of the receiver's first round that ends after it arrives ("clock"), or is late a
        uniform 0..max_delay rounds ("random")."""
        cap = self.net.max_delay
        if self.net.delays == "random":
            u = hash_uniform(self._key, np.int64(t) + 1, src, dst, 4)
            return (src, dst, np.floor(u * (cap + 1)).astype(np.int64)), 0
        rounds = np.where(late_by > 0, np.ceil(late_by / max(self.slot_s, 1e-300)), 0)
        return (src, dst, np.minimum(rounds, cap).astype(np.int64)), int((rounds > cap).sum())

    def sending(self, t: int) -> np.ndarray:
        """Overlap on the flow model: bool [n], the nodes whose earlier messages are still in
        flight at the end of slot t, so that they do not push in round t (they keep their
        shares): one push in flight per node, as the authors' SGP code gossips one exchange at
        a time. All False otherwise."""
        held = np.zeros(self.n, dtype=bool)
        if self.network is None or not len(self.network):
            return held
        network = self.network.copy()
        while network.advance((t + 1) * self.slot_s) is not None:
            pass
        held[network.in_flight() // self.n % self.n] = True
        return held

    def busy(self, t: int) -> np.ndarray:
        """Overlap: bool [n], the nodes whose local phase does not end in slot t (nearest slot
        end), so that they neither train nor send nor receive in round t."""
        return self.ready > (t + 1.5) * self.slot_s

    def plan_round(self, t: int, graph: nx.Graph, faults: T.Faults) -> RoundTime:
        """`plan` for the messages of `graph` that `faults` let through.

        An offline node neither trains nor sends nor receives.

        Parameters
        ----------
        t : round, from 0.
        graph : the round's graph.
        faults : the round's faults.

        Returns
        -------
        RoundTime.
        """
        src, dst, _ = T.messages(graph)
        kept = ~faults.lost(src, dst)
        return self.plan(t, src[kept], dst[kept], ~faults.nodes, graph)

    def plan_server(self, t: int, clients: np.ndarray) -> RoundTime:
        """The timing of centralized round t (graph node 0 the server) with sampled `clients`.

        Down, local phase, up; every node then starts at the server's time.

        Parameters
        ----------
        t : round, from 0.
        clients : graph node ids of the sampled clients.

        Returns
        -------
        RoundTime.
        """
        active = np.zeros(self.n, dtype=bool)
        active[clients] = True
        server = np.zeros_like(clients)
        at_client = self.arrivals(t, server, clients, np.full(len(clients), self.start[0]))
        back = self.arrivals(t, clients, server, at_client + self.compute(t, active)[clients])
        end = max(self.start[0], float(back.max(initial=self.start[0])))
        done = np.full(self.n, self.start[0])
        done[clients] = back
        empty = np.zeros(0, dtype=np.int64)
        return RoundTime(np.full(self.n, end), done, (empty, empty, empty), 0)

    def commit(self, timing: RoundTime) -> dict[str, float]:
        """Advance the clock by a planned round; its metrics."""
        record = timing.record()
        self.start = timing.start.copy()
        if timing.ready is not None:
            self.ready = timing.ready.copy()
        if timing.network is not None:
            self.network = timing.network
        return record

    def state_dict(self) -> dict[str, Any]:
        flows = {"network": self.network.state_dict()} if self.network is not None else {}
        return flows | {"start": self.start.tolist(), "ready": self.ready.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.start = np.asarray(state["start"], dtype=np.float64)
        self.ready = np.asarray(state["ready"], dtype=np.float64)
        if "network" in state:
            self.network = Flows(np.zeros(0))
            self.network.load_state_dict(state["network"])


def _edge_values(graph: nx.Graph, src: np.ndarray, dst: np.ndarray, name: str,
                 out: np.ndarray) -> None:
    """Overwrite out[e] with attribute `name` of the edge src[e] -> dst[e] where it has one."""
    values = nx.get_edge_attributes(graph, name)
    if not values:
        return
    for e, (u, v) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        value = values.get((u, v), values.get((v, u)) if not graph.is_directed() else None)
        if value is not None:
            out[e] = float(value)
