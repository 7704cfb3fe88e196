"""The event engine on the flow-level network: a message's arrival is its flows' end in one
network that every message in flight shares (p2pfl/engine/events.py)."""

from __future__ import annotations

import numpy as np
import pytest

from p2pfl.engine.builder import build
from p2pfl.engine.events import Simulation
from p2pfl.scale.flows import Flows, drain
from p2pfl.scale.mailbox import Delivery, Mailbox
from tests.conftest import small_config


class RecordingMailbox(Mailbox):
    """A mailbox that keeps when each message (sender, receiver, send time) arrived."""

    def __init__(self, like) -> None:
        super().__init__(like)
        self.taken: dict[tuple[int, int, float], float] = {}

    def take(self, until: float) -> Delivery:
        out = super().take(until)
        for i, j, s, due in zip(out.src, out.dst, out.sent, out.due, strict=True):
            self.taken[int(i), int(j), float(s)] = float(due)
        return out


class RecordingSimulation(Simulation):
    """A simulation that keeps every message sent: (sender, receiver, send time, round)."""

    posted: list[tuple[int, int, float, int]]

    def send(self, src, dst, k, *args, **kwargs) -> None:
        k = np.broadcast_to(k, src.shape)
        self.posted += [(int(i), int(j), float(self.clock[i]), int(r))
                        for i, j, r in zip(src, dst, k, strict=True)]
        super().send(src, dst, k, *args, **kwargs)


def simulate(name: str, steps: int, **network) -> tuple[Simulation, RecordingMailbox]:
    network = {"enabled": True, "model": "flow", "step_s": 0.005, "latency_s": 0.001} | network
    topology = {"fedbuff": {"topology__name": "star", "algorithm__concurrency": 4},
                "adpsgd": {"topology__name": "exponential", "topology__directed": False}}.get(
        name, {"topology__name": "exponential", "topology__directed": True})
    cfg = small_config(algorithm__name=name, **topology, algorithm__local_steps=1,
                       **{f"network__{k}": v for k, v in network.items()})
    ctx, algorithm = build(cfg)
    sim = RecordingSimulation(ctx, algorithm)
    sim.posted = []
    sim.mailbox = sim.phases.pool = box = RecordingMailbox(ctx.population.params)
    for _ in range(steps):
        sim.step()
        usage, capacity = sim.network.usage[:-1], sim.network.capacity[:-1]
        assert (usage <= capacity * (1 + 1e-9)).all()  # no link carries more than it has
    return sim, box


def test_every_message_sent_at_once_shares_the_uplink_of_its_sender() -> None:
    """Equal speeds, no jitter: every node pushes to its 3 out-neighbours (+1, +2, +4 on the
    directed exponential graph of 6 nodes) at 1 s, alone on the network; each message gets a
    third of its sender's uplink (and of its receiver's downlink): 1 ms of latency, then three
    times the model's size over 1 Gbit/s (the "ideal" model: once)."""
    sim, box = simulate("async_sgp", 3, step_s=1.0)
    message_s = sim.ctx.clock.message_bytes * 8 / 1e9
    arrivals = [box.taken[key[:3]] for key in sim.posted if key[:3] in box.taken]
    assert len(sim.posted) == 18 and len(arrivals) == 18
    np.testing.assert_allclose(arrivals, 1.0 + 0.001 + 3 * message_s, rtol=1e-12)


@pytest.mark.parametrize("name", ["async_sgp", "adpsgd", "fedbuff"])
def test_arrivals_equal_one_network_of_every_message_sent(name: str) -> None:
    """Stragglers, jitter, slow links: messages start and end while others are in flight. The
    arrival of every message delivered equals the end of its flows (both, for an exchange) in
    one network simulated afterwards with every message at its send time (one queue for each
    sender and receiver)."""
    sim, box = simulate(name, 120, step_s=0.1, stragglers=0.3, jitter=0.3, slow_links=0.3,
                        bandwidth_gbps=0.5)
    clock, both = sim.ctx.clock, name == "adpsgd"
    src, dst, sent, k = (np.array(a) for a in zip(*sim.posted, strict=True))
    legs = [(src, dst), (dst, src)] if both else [(src, dst)]
    a, b = (np.stack(ends, axis=1).ravel() for ends in zip(*legs, strict=True))  # in a row
    flows = Flows(clock.resources(sim.ctx.schedule.at(0)))
    ways = len(legs)
    flows.add(np.repeat(sent, ways), *clock.routes(np.repeat(k, ways), a, b),
              queue=a * clock.n + b)
    ends = drain(flows, len(a)).reshape(-1, ways).max(axis=1)
    taken = np.array([box.taken.get(key[:3], np.nan) for key in sim.posted])
    delivered = ~np.isnan(taken)
    assert delivered.sum() > 50 and len(sim.mailbox) > 0
    np.testing.assert_allclose(taken[delivered], ends[delivered], rtol=1e-12)
    alone = sent + np.max([clock.transfer(k, a, b) for a, b in legs], axis=0)
    assert (taken[delivered] > alone[delivered] * 1.001).mean() > 0.2  # links were shared
