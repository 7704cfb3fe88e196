"""Exact windows (p2pfl/engine/windows.py): processing a window's events together, level by
level, gives bit for bit (float64) what processing them one instant at a time gives, on every
asynchronous algorithm and both network models, with jitter, stragglers and slow links, and
across a resume; the lookahead is a lower bound of every phase and message.

The windows batch the local phases differently, so the comparison needs a trainer whose
numbers for a node do not depend on the other nodes of its batch: one intra-op thread (with
two, MKL splits the product of a batch of one node across the threads, docs/async.md)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from p2pfl.engine.builder import build
from p2pfl.engine.events import Simulation
from p2pfl.engine.windows import jitter_floor, levels, lookahead_s, message_floor_s, release_levels
from tests.conftest import small_config

TOPOLOGY = {"async_sgp": {"topology__name": "exponential", "topology__directed": True},
            "adpsgd": {"topology__name": "exponential", "topology__directed": False},
            "fedbuff": {"topology__name": "star", "algorithm__concurrency": 5,
                        "algorithm__buffer_size": 3}}
NETWORK = {"enabled": True, "step_s": 0.01, "latency_s": 0.004, "jitter": 0.05,
           "stragglers": 0.3, "slow_factor": 3.0, "slow_links": 0.2}


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread for each test of this module, restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(name: str, model: str, marks: int = 4, **network):
    return small_config(algorithm__name=name, **TOPOLOGY[name], algorithm__local_steps=1,
                        data__num_nodes=10, rounds=marks, network__model=model,
                        **{f"network__{k}": v for k, v in (NETWORK | network).items()})


def bits(params: dict) -> dict:
    return {k: v.clone().view(torch.int64) for k, v in params.items()}


def state_of(algorithm) -> list[torch.Tensor]:
    """What the algorithm holds besides the population (Push-Sum weights, a server)."""
    if hasattr(algorithm, "weights"):
        return [algorithm.weights.clone().view(torch.int64)]
    if hasattr(algorithm, "server"):
        return [v.clone().view(torch.int64) for v in algorithm.server.values()]
    return []


def marks(cfg, windows: bool, resume_at: int = 0) -> tuple[list, list, int]:
    """Run every mark: (models, algorithm and phase state, and row after each, batches); with
    `resume_at`, the simulation continues from its state at that mark in a new run."""
    ctx, algorithm = build(cfg)
    sim = Simulation(ctx, algorithm, windows=windows)
    nominal = ctx.clock.nominal_s(algorithm.transfers)
    out, rows, batches = [], [], 0
    for m in range(1, cfg.rounds + 1):
        sim.advance(m * nominal)
        algorithm.settle(ctx, sim)
        row = sim.record()
        batches += row.pop("batches")
        row.pop("windows")
        row |= algorithm.metrics(ctx)  # the Push-Sum weight in flight, the server's buffer
        rows.append({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in row.items()})
        computed = [torch.from_numpy(sim.phases.computed.copy()),  # the phases computed by
                    torch.from_numpy(sim.phases.loss.copy()).view(torch.int64)]  # the mark
        out.append((bits(ctx.population.params), state_of(algorithm) + computed))
        if m == resume_at:
            state = sim.state_dict()
            ctx2, algorithm2 = build(cfg)
            ctx2.population.load_state_dict(ctx.population.state_dict())
            algorithm2.load_state_dict(algorithm.state_dict())
            ctx, algorithm = ctx2, algorithm2
            sim = Simulation(ctx, algorithm, windows=windows)
            sim.load_state_dict(state)
    return out, rows, batches


@pytest.mark.parametrize("model", ["flow", "ideal"])
@pytest.mark.parametrize("name", ["async_sgp", "adpsgd", "fedbuff"])
def test_windows_equal_one_instant_at_a_time_bit_for_bit(name: str, model: str) -> None:
    """Jitter, stragglers and slow links: no two events coincide. The windowed run (resumed
    from its checkpoint at mark 2, a window cut there) equals the instant-by-instant run after
    every mark: models, Push-Sum weights or server model, which phases have been computed and
    their losses, and every row metric. The windows did batch: fewer batched updates than
    events."""
    cfg = config(name, model)
    reference, ref_rows, _ = marks(cfg, windows=False)
    windowed, rows, batches = marks(cfg, windows=True, resume_at=2)
    events = sum(r["events"] for r in rows)
    np.testing.assert_equal(rows, ref_rows)  # NaN (a node without data) equal to NaN
    assert events > 20 and batches < events
    for (params, state), (ref_params, ref_state) in zip(windowed, reference, strict=True):
        for k, v in params.items():
            assert torch.equal(v, ref_params[k]), k
        assert all(torch.equal(a, b) for a, b in zip(state, ref_state, strict=True))


@pytest.mark.parametrize("name", ["adpsgd", "async_sgp"])
def test_windows_equal_one_instant_at_a_time_when_events_coincide(name: str) -> None:
    """No jitter, equal links, two speeds of nodes (stragglers 3x): many events share an
    instant, so one instant's events at different nodes fall in different levels (pairs of
    nodes that pick each other send two exchanges through one connection at once). The flow
    model, bit for bit as above."""
    cfg = config(name, "flow", marks=6, jitter=0.0, slow_links=0.0)
    reference, ref_rows, _ = marks(cfg, windows=False)
    windowed, rows, batches = marks(cfg, windows=True)
    np.testing.assert_equal(rows, ref_rows)
    assert sum(r["instants"] for r in rows) < sum(r["events"] for r in rows)  # shared instants
    for (params, state), (ref_params, ref_state) in zip(windowed, reference, strict=True):
        for k, v in params.items():
            assert torch.equal(v, ref_params[k]), k
        assert all(torch.equal(a, b) for a, b in zip(state, ref_state, strict=True))


def test_the_lookahead_is_below_every_phase_and_message() -> None:
    """Every phase and every message's transfer (ideal) or latency (flow) drawn over 200 rounds
    of every pair is at least the bound, and the bound is the jitter's own floor: the clipped
    uniform gives exactly it."""
    cfg = config("async_sgp", "ideal")
    ctx, algorithm = build(cfg)
    clock = ctx.clock
    n, k = clock.n, np.repeat(np.arange(200), clock.n * clock.n)
    src, dst = (np.tile(a.ravel(), 200) for a in np.meshgrid(np.arange(n), np.arange(n)))
    phases = clock.phase_s(k[:200 * n], np.tile(np.arange(n), 200))
    latency = clock.routes(k, src, dst)[0]
    assert lookahead_s(clock, False, 0) <= min(phases.min(), clock.transfer(k, src, dst).min())
    assert lookahead_s(clock, True, 0) <= min(phases.min(), latency.min())
    assert message_floor_s(clock, True) > 0.9 * 0.004 * jitter_floor(0.05)
    assert jitter_floor(0.05) == pytest.approx(np.exp(0.05 * -7.034483825), rel=1e-9)


def test_a_windows_flows_join_in_one_order_whatever_order_they_were_sent_in() -> None:
    """Nodes 1 and 2 pick each other at one instant: both exchanges put a flow 1 -> 2 and one
    2 -> 1 in the same connections. Sent in either order (the levels of a window may put node
    2's phase end first), the network gets them in one order, node 1's exchange first."""
    from p2pfl.engine.transport import Transport

    ctx, _ = build(config("adpsgd", "flow"))
    orders = []
    for pairs in ([(1, 2), (2, 1)], [(2, 1), (1, 2)]):
        transport = Transport(ctx, lambda: np.zeros(ctx.num_nodes, dtype=np.int64))
        owner = {}
        for i, j in pairs:
            _, group = transport.time(np.array([i]), np.array([j]), np.array([0]),
                                      np.array([0.5]), both_ways=True)
            owner[int(group[0])] = i
        transport.flush()
        flows = transport.network
        orders.append([(int(q), owner[int(g)]) for q, g in zip(flows.queue, flows.group,
                                                               strict=True)])
    assert orders[0] == orders[1] and orders[0][0][1] == 1


def test_levels_keep_each_node_in_order_and_pairs_apart() -> None:
    """Pairs that share a node go to successive levels in canonical order; disjoint ones share
    a level; a node's later event goes after its earlier one."""
    time = np.array([1.0, 1.0, 1.5, 2.0, 2.5])
    kind = np.array([1, 1, 1, 0, 0])
    first, second = np.array([0, 2, 1, 3, 0]), np.array([1, 3, 2, -1, -1])
    assert levels(time, kind, first, second).tolist() == [0, 0, 1, 1, 1]


def test_levels_of_one_node_events_and_release_levels_equal_going_event_by_event() -> None:
    """Events of one node each (the array path of `levels`) get the levels of going through
    them one by one (one past the node's last event, or the same at the same instant and
    kind), as when a pair is among them (the loop); `release_levels` gives each (node, time)
    its last level, and none for a pair not among the events."""
    rng = np.random.default_rng(3)
    time = np.sort(rng.choice([0.5, 1.0, 1.25, 2.0], 300))
    kind = rng.integers(0, 2, 300)
    order = np.lexsort((kind, time))  # canonical: by time, phase ends first
    time, kind, first = time[order], kind[order], rng.integers(0, 12, 300)
    alone = levels(time, kind, first, np.full(300, -1))
    with_pair = levels(np.append(time, 9.0), np.append(kind, 1), np.append(first, 0),
                       np.append(np.full(300, -1), 1))
    expected, last = [], {}
    for t, k, a in zip(time.tolist(), kind.tolist(), first.tolist(), strict=True):
        seen = last.get(a)
        level = 0 if seen is None else seen[0] if seen[1:] == (t, k) else seen[0] + 1
        expected.append(level)
        last[a] = (level, t, k)
    assert alone.tolist() == expected == with_pair[:300].tolist()
    table = release_levels(alone, time, first, np.full(300, -1))
    ids, at = np.repeat(np.arange(13), 5), np.tile([0.5, 1.0, 1.25, 2.0, 3.0], 13)
    got = table.get(ids, at, -7)
    for i, t, g in zip(ids.tolist(), at.tolist(), got.tolist(), strict=True):
        mine = (first == i) & (time == t)
        assert g == (alone[mine].max() if mine.any() else -7)
