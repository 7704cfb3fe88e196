"""The flow-level network (p2pfl/scale/flows.py): max-min rates by hand, and completion times
against SimGrid's on the fixture's scenarios (bench/simgrid_flows.py wrote it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from p2pfl.scale.flows import Flows, Transfers, drain, finish_times, max_min_rates

FIXTURE = Path(__file__).parent / "fixtures" / "simgrid_flows.json"


def test_max_min_rates_by_hand() -> None:
    """Resources 0 (10), 1 (4), 2 (inf); flows {0}, {0, 1}, {1}, {1, 0}, {2}: resource 1 fills
    first at 4/3 for its three flows, then flow 0 takes what is left of resource 0."""
    A = sp.csr_array(np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]]))
    rates = max_min_rates(A, np.array([10.0, 4.0, np.inf]))
    np.testing.assert_allclose(rates, [10 - 8 / 3, 4 / 3, 4 / 3, 4 / 3, np.inf])
    idle = max_min_rates(A, np.array([10.0, 4.0, np.inf]), np.array([1, 0, 1, 0, 0], bool))
    np.testing.assert_allclose(idle, [10, 0, 4, 0, 0])


def test_a_late_transfer_takes_half_the_link_from_then_on() -> None:
    A = sp.csr_array(np.ones((2, 1)))
    t = Transfers(np.array([0.0, 0.5]), np.array([0.1, 0.1]), np.array([10.0, 10.0]), A,
                  np.array([10.0]))
    np.testing.assert_allclose(finish_times(t), [1.6, 2.1])  # 1 bit/s each once both run


def test_a_joining_transfer_takes_from_a_faster_one_bottlenecked_elsewhere() -> None:
    """c crosses r (10 bit/s) and b (8 bit/s) and runs at 8, limited by b; s joins r at 0.5 s:
    max-min gives each 5 (c is re-solved though its own bottleneck b did not change):
    c has 6 bits left, ends at 1.7 s; s has 4 left then and takes r alone, ending at 2.1 s."""
    A = sp.csr_array(np.array([[1, 1], [1, 0]]))
    t = Transfers(np.array([0.0, 0.5]), np.zeros(2), np.array([10.0, 10.0]), A,
                  np.array([10.0, 8.0]))
    np.testing.assert_allclose(finish_times(t), [1.7, 2.1])


def test_empty_and_unlimited_transfers_arrive_after_their_latency() -> None:
    A = sp.csr_array(np.array([[1.0], [0.0]]))
    t = Transfers(np.array([1.0, 2.0]), np.array([0.5, 0.25]), np.array([0.0, 5.0]), A,
                  np.array([1.0]))
    np.testing.assert_allclose(finish_times(t), [1.5, 2.25])


def test_flows_of_one_queue_go_one_after_the_other() -> None:
    """Two 1-bit messages over a 1 bit/s link, sent at 0 and 0.1 s. In one queue (one
    connection) the second starts when the first ends: 1.0 and 2.0 s. In two, they share the
    link from 0.1 s: the first ends at 1.9 s, the second (0.9 bits by then) at 2.0 s."""
    for queue, ends in (([7, 7], [1.0, 2.0]), ([-1, -1], [1.9, 2.0]), ([7, 8], [1.9, 2.0])):
        flows = Flows(np.array([1.0]))
        flows.add(np.array([0.0, 0.1]), np.zeros(2), np.ones(2), np.zeros((2, 1), np.int64),
                  queue=np.array(queue))
        np.testing.assert_allclose(drain(flows, 2), ends, rtol=1e-12)


def test_a_checkpoint_of_flows_in_progress_continues_them_exactly() -> None:
    """Run to 0.5 s, save, load into a fresh Flows, run to the end: the same finish times, to
    the bit, as one run."""
    rng = np.random.default_rng(0)
    flows = Flows(np.array([1.0, 2.0, 0.5]))
    flows.add(rng.random(30), rng.random(30) * 0.1, rng.random(30), rng.integers(0, 4, (30, 2)),
              queue=rng.integers(-1, 3, 30))
    whole = drain(flows.copy(), 30)
    first = np.full(30, np.nan)
    while (event := flows.advance(0.5)) is not None:
        first[event[1]] = event[0]
    again = Flows(np.zeros(0))
    again.load_state_dict(flows.state_dict())
    rest = drain(again, 30)
    assert 0 < np.isnan(rest).sum() < 30
    assert np.where(np.isnan(first), rest, first).tolist() == whole.tolist()


def test_the_active_flows_on_each_resource_are_counted_at_every_event() -> None:
    """Flows.on, kept as flows become active and stop (the lowest level a joining flow can move
    reads it), equals counting the active flows' resources afresh after every event, with
    queues, finishes taken early and flows of 0 bits."""
    rng = np.random.default_rng(3)
    flows = Flows(np.array([1.0, 2.0, 0.5, 4.0]))
    flows.add(rng.random(40), rng.random(40) * 0.1, rng.random(40) * (rng.random(40) > 0.1),
              rng.integers(0, 5, (40, 2)), queue=rng.integers(-1, 4, 40))
    events = 0
    while (event := flows.advance()) is not None:
        events += 1
        if events == 5:
            flows.finish(flows.in_flight()[:3], event[0])
        fresh = np.bincount(flows.routes[flows.active].ravel(), minlength=len(flows.on))
        assert flows.on[:-1].tolist() == fresh[:-1].tolist()  # the pad limits nothing
    assert events > 10


def fixture_scenarios() -> list[dict]:
    return json.loads(FIXTURE.read_text())["scenarios"]


@pytest.mark.parametrize("spec", fixture_scenarios(), ids=lambda s: s["name"])
def test_completion_times_match_simgrid(spec: dict) -> None:
    names = list(spec["capacity_bps"])
    index = {name: r for r, name in enumerate(names)}
    flows = spec["flows"]
    rows = [f for f, flow in enumerate(flows) for _ in flow["route"]]
    cols = [index[r] for flow in flows for r in flow["route"]]
    incidence = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(len(flows), len(names)))
    transfers = Transfers(np.array([f["start_s"] for f in flows]),
                          np.full(len(flows), spec["latency_s"]),
                          np.array([8 * f["bytes"] for f in flows]), incidence,
                          np.array([spec["capacity_bps"][r] for r in names]))
    np.testing.assert_allclose(finish_times(transfers), spec["finish_s"], rtol=0.01)


def test_the_fixture_covers_the_cases_it_claims() -> None:
    specs = fixture_scenarios()
    assert len(specs) >= 20
    names = " ".join(s["name"] for s in specs)
    for kind in ("fan-out", "all-to-all", "incast", "underlay", "ring", "staggered"):
        assert kind in names


def reference_finish_times(t: Transfers) -> np.ndarray:
    """Every event re-solves every active flow from scratch (no levels kept, no lazy bits)."""
    ready = t.start + t.latency
    left, finish = t.bits.astype(float).copy(), np.full(len(ready), np.nan)
    active = np.zeros(len(ready), dtype=bool)
    now = ready.min()
    while np.isnan(finish).any():
        active |= (ready <= now) & np.isnan(finish)
        done = active & (left <= 1e-9 * t.bits)
        finish[done], active[done] = now, False
        if not active.any():
            if np.isnan(finish).any():
                now = ready[np.isnan(finish)].min()
            continue
        rate = max_min_rates(t.incidence, t.capacity, active)
        waiting = ready[np.isnan(finish) & ~active]
        step = min((left[active] / rate[active]).min(), waiting.min() - now if len(waiting)
                   else np.inf)
        left[active] -= rate[active] * step
        left[active & (left <= 1e-9 * t.bits)] = 0.0
        now += step
    return finish


def test_the_event_loop_equals_re_solving_every_flow_at_every_event() -> None:
    """Random access links, private links and staggered sizes and starts: keeping the levels
    below an event's lowest moved level and each flow's bits since its last rate change gives
    the from-scratch event loop's times."""
    rng = np.random.default_rng(55)
    for case in range(20):
        n = int(rng.integers(3, 12))
        src = rng.integers(0, n, 30)
        dst = (src + rng.integers(1, n, 30)) % n
        own = rng.random(30) < 0.3
        rows = np.concatenate([np.arange(30), np.arange(30), np.flatnonzero(own)])
        cols = np.concatenate([src, n + dst, 2 * n + np.arange(own.sum())])
        incidence = sp.csr_array((np.ones(len(rows)), (rows, cols)),
                                 shape=(30, 2 * n + own.sum()))
        capacity = np.concatenate([rng.choice([1.0, 2.0, 5.0], 2 * n),
                                   rng.uniform(0.5, 3.0, own.sum())])
        start = rng.choice([0.0, 0.5, 1.0, rng.uniform(0, 2)], 30)
        t = Transfers(start, np.full(30, 0.1), rng.choice([1.0, 2.0, 3.5], 30), incidence,
                      capacity)
        np.testing.assert_allclose(finish_times(t), reference_finish_times(t), rtol=1e-9,
                                   err_msg=f"case {case}")


def test_near_equal_levels_re_solved_where_they_change_equal_re_solving_every_flow() -> None:
    """Many senders of equal uplinks, each fanning out to 4 receivers of mixed downlinks, sizes
    and starts jittered by a few percent (every level near every other): the event loop, which
    re-solves only the flows without a bottleneck around an event (`Flows._resolve`), gives
    the times of re-solving every flow at every event."""
    rng = np.random.default_rng(7)
    n, fan = 16, 4
    src = np.repeat(np.arange(n), fan)
    dst = (src + rng.permuted(np.tile(np.arange(1, n), (n, 1)), axis=1)[:, :fan].ravel()) % n
    m = len(src)
    incidence = sp.csr_array((np.ones(2 * m), (np.tile(np.arange(m), 2),
                                                np.concatenate([src, n + dst]))),
                             shape=(m, 2 * n))
    capacity = np.concatenate([np.full(n, 10.0), rng.choice([3.0, 6.0, 30.0], n)])
    t = Transfers(rng.uniform(0, 0.05, m), np.full(m, 0.01), rng.uniform(0.97, 1.03, m),
                  incidence, capacity)
    np.testing.assert_allclose(finish_times(t), reference_finish_times(t), rtol=1e-9)
