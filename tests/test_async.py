"""Asynchronous algorithms on the event engine: the synchronous limits (equal speeds, no jitter,
zero latency), Push-Sum mass at every event, FedBuff's staleness weighting by hand, each node on
its own clock, the settings refused, and sync against async on simulated seconds. (Exact resume
with messages in flight: tests/test_reliability.py, every algorithm.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from algorithms.adpsgd import random_neighbours, successive_matchings
from algorithms.weight_collapse import WeightCollapseWarning
from p2pfl.config import ConfigError
from p2pfl.engine import DivergenceError, run
from p2pfl.engine.builder import build, check_variants
from p2pfl.engine.events import Simulation
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import play, small_config

# Phases of 1 s, no transfer time (1e290 Gbit/s: ~1e-290 s, lost in any later time), no jitter.
INSTANT = {"network__enabled": True, "network__step_s": 1.0, "network__latency_s": 0.0,
           "network__bandwidth_gbps": 1e290, "algorithm__local_steps": 1}


def randomized(ctx) -> None:
    """Give every node its own model (float64), so that mixing is visible."""
    rng = torch.Generator().manual_seed(5)
    for v in ctx.population.params.values():
        v.copy_(torch.randn(v.shape, generator=rng, dtype=v.dtype) * 0.1)


def assert_close(a: dict, b: dict, tol: float = 1e-12) -> None:
    for k in a:
        assert (a[k] - b[k]).abs().max().item() < tol, k


def test_async_sgp_with_equal_speeds_is_synchronous_sgp():
    """Every node pushes at the same instants and hears everything before its next phase: the
    event engine's numerators and weights are SGP's, float64, on a time-varying graph."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="random_out",
                       topology__k=2, **INSTANT)
    ctx, algorithm = build(cfg)
    randomized(ctx)
    sim = Simulation(ctx, algorithm)
    sim.advance(4.0)  # four pushes of every node
    sync_ctx, sgp = build(small_config(algorithm__name="sgp", topology__name="random_out",
                                       topology__k=2, **INSTANT))
    randomized(sync_ctx)
    for t in range(4):
        play(sgp, sync_ctx, t, sync_ctx.schedule.at(t))
    algorithm.settle(ctx, sim)
    assert sim.phases.phase.tolist() == [4] * 6 and algorithm.mass_in_flight() == 0
    assert_close(ctx.population.params, sync_ctx.population.params)
    assert (algorithm.weights - sgp.weights).abs().max() < 1e-12
    assert (sgp.weights - 1).abs().max() > 0.1  # the weights did move


def test_adpsgd_with_equal_speeds_is_gossip_over_the_same_matchings():
    """Each round every node takes its gradient at the same instant, then the averagings are
    applied one pair at a time in the initiators' order (here an independent loop over pairs),
    each initiator adding its gradient after its own averaging."""
    cfg = small_config(algorithm__name="adpsgd", topology__name="random_regular",
                       topology__d=3, **INSTANT)
    ctx, algorithm = build(cfg)
    randomized(ctx)
    reference = {k: v.clone() for k, v in ctx.population.params.items()}
    sim = Simulation(ctx, algorithm)
    sim.advance(3.0)
    nodes = torch.arange(6)
    for t in range(3):
        start = {k: v.clone() for k, v in reference.items()}
        trained = {k: v.clone() for k, v in start.items()}
        lr = torch.full((6,), algorithm.lr(t), dtype=torch.float64)
        ctx.trainer.train(trained, nodes, algorithm.plan(ctx, t), algorithm.solver, lr)
        partner = algorithm.partners(ctx, sim, np.arange(6), np.full(6, t))
        assert (partner >= 0).all()
        for i, j in enumerate(partner.tolist()):
            for k, x in reference.items():
                mean = (x[i] + x[j]) * 0.5
                x[j] = mean
                x[i] = mean + (trained[k][i] - start[k][i])
    assert_close(ctx.population.params, reference)
    assert len(set(partner.tolist())) < 6  # some node was in two pairs: several matchings


def test_fedbuff_with_equal_speeds_and_the_whole_buffer_is_fedavg(tmp_path):
    """K = C = N clients, all back at the same instant with staleness 0: FedAvg with every
    client and uniform weights, round by round (float64): the server model's metrics, and the
    step size decayed per server step as FedAvg's per round."""
    common = INSTANT | {"topology__name": "star", "rounds": 3, "algorithm__server_lr": 1.0,
                        "algorithm__lr_decay": 0.5}
    buffered = run(small_config(algorithm__name="fedbuff", algorithm__buffer_size=6,
                                algorithm__concurrency=6, **common), tmp_path / "fedbuff",
                   figures=False)
    fedavg = run(small_config(algorithm__name="fedavg", algorithm__participation=1.0,
                              algorithm__weights="uniform", **common), tmp_path / "fedavg",
                 figures=False)
    for a, b in zip(buffered, fedavg, strict=True):
        assert a["sim_time_s"] == b["sim_time_s"] and a["server_version"] == a["round"]
        assert a["lr"] == b["lr"] == 0.1 * 0.5 ** (a["round"] - 1)
        for key in ("test_loss", "test_acc", "train_loss"):
            assert a[key] == pytest.approx(b[key], abs=1e-12), key


def test_fedbuff_weights_stale_updates_by_hand():
    """N = C = 4, K = 2: the four updates arrive together; clients 0, 1 fill the buffer (tau 0),
    the server steps, then clients 2, 3 are one step stale: weight (1 + 1)^-1/2. (Latency
    keeps the next downloads from overwriting the clients' rows in the same instant.)"""
    ctx, algorithm = build(small_config(algorithm__name="fedbuff", topology__name="star",
                                        data__num_nodes=4, algorithm__buffer_size=2,
                                        algorithm__concurrency=4, algorithm__server_lr=1.0,
                                        **INSTANT | {"network__latency_s": 0.5}))
    start = {k: v.clone() for k, v in algorithm.server.items()}
    sim = Simulation(ctx, algorithm)
    while algorithm.version < 2:
        sim.step()
    rows = ctx.population.params  # each client's trained model
    for k, s in start.items():
        delta = rows[k] - s
        expected = s + (delta[0] + delta[1]) / 2 + (delta[2] + delta[3]) / (2 * math.sqrt(2))
        assert (algorithm.server[k] - expected).abs().max() < 1e-12
    assert algorithm.metrics(ctx) | {"server_version": 2} == {
        "server_version": 2, "buffered": 0, "staleness_mean": 0.5, "staleness_max": 1}


def test_fedbuff_step_size_decays_per_server_step_not_per_participation():
    """N = 6, K = C = 2, lr_decay = 1/2, equal speeds: each version's two clients train from it
    with lr / 2^v, whatever their own participation count; the server model is replayed by hand
    from independent local steps, and the row's lr is that of the updates added."""
    ctx, algorithm = build(small_config(algorithm__name="fedbuff", topology__name="star",
                                        algorithm__buffer_size=2, algorithm__concurrency=2,
                                        algorithm__server_lr=1.0, algorithm__lr_decay=0.5,
                                        **INSTANT))
    start = {k: v.clone() for k, v in algorithm.server.items()}
    sim = Simulation(ctx, algorithm)
    began = []  # (client, its phase index, the version it downloaded)
    while algorithm.version < 4:
        before = sim.phases.phase.copy()
        sim.step()
        for c in np.flatnonzero(sim.phases.phase > before).tolist():
            began.append((c, int(sim.phases.phase[c]), int(algorithm.read_version[c])))
            assert sim.phases.lr[c] == 0.1 * 0.5 ** algorithm.read_version[c]
    assert any(k != v for _, k, v in began)  # a decay per participation would differ
    server = start
    for version in range(4):
        deltas = []
        for c, k, _ in (b for b in began if b[2] == version):
            rows = {name: w.unsqueeze(0).clone() for name, w in server.items()}
            lr = torch.tensor([0.1 * 0.5 ** version], dtype=torch.float64)
            ctx.trainer.train(rows, torch.tensor([c]), algorithm.plan(ctx, k),
                              algorithm.solver, lr)
            deltas.append({name: rows[name][0] - server[name] for name in rows})
        assert len(deltas) == 2
        server = {name: w + (deltas[0][name] + deltas[1][name]) / 2 for name, w in server.items()}
    assert_close(algorithm.server, server)
    assert algorithm.mark_lr(0) == pytest.approx(0.1 * (1 + 0.5 + 0.25 + 0.125) / 4, abs=1e-15)
    algorithm.metrics(ctx)  # a new interval: no update added yet, a download's step size
    assert algorithm.mark_lr(1) == 0.1 * 0.5 ** 4


def test_a_phase_begun_from_a_payload_reads_it_when_asked():
    """`begin` with models copies them: a payload slot released and reused before the instant
    ends cannot change what the phase reads."""
    ctx, algorithm = build(small_config(algorithm__name="fedbuff", topology__name="star",
                                        algorithm__concurrency=2, **INSTANT))
    sim = Simulation(ctx, algorithm)
    sim.step()  # time 0: two downloads in flight
    model = {k: torch.full((1, *v.shape[1:]), 0.25, dtype=v.dtype)
             for k, v in ctx.population.params.items()}
    idle = int(np.flatnonzero(~algorithm.busy)[0])
    sim.begin(np.array([idle]), models=model)
    for v in model.values():
        v.fill_(7.0)  # the slot reused
    sim.step()
    for v in ctx.population.params.values():
        assert (v[idle] == 0.25).all()


def test_row_operations_by_index_in_blocks_equal_plain_indexing():
    """copy_rows and add_rows over several ROW_BLOCKs, and add_rows on one row (float64)."""
    from p2pfl.core.population import ROW_BLOCK, add_rows, copy_rows

    g = torch.Generator().manual_seed(0)
    n = 2 * ROW_BLOCK + 5
    a = {"w": torch.randn(n + 3, 4, 2, generator=g, dtype=torch.float64)}
    b = {"w": torch.randn(n, 4, 2, generator=g, dtype=torch.float64)}
    to, of = torch.randperm(n + 3, generator=g)[:n], torch.randperm(n, generator=g)
    coef = torch.rand(n, generator=g, dtype=torch.float64)
    expected = a["w"].clone()
    expected[to] = b["w"][of]
    copy_rows(a, to, b, of)
    assert torch.equal(a["w"], expected)
    for m in (1, n):
        expected[to[:m]] += coef[:m, None, None] * b["w"][of[:m]]
        add_rows(a, to[:m].numpy(), coef[:m], lambda part, m=m: {"w": b["w"][of[:m][part]]})
        assert (a["w"] - expected).abs().max() < 1e-15


@pytest.mark.parametrize("limit,tile", [(2**31, 2**20), (60, 2**20), (40, 5)])
def test_a_rows_payload_sum_is_the_same_in_any_batch(monkeypatch, limit, tile):
    """Mailbox.add_payloads gives a row, bit for bit (float64), what it gets alone: whatever the
    other rows of the batch, their messages, its position and the slots the payloads were stored
    in (the exact windows rely on it); and the sum of its messages to round-off. Also past the
    32-bit limit of CPU sparse kernels (here lowered: rows in chunks, the payloads read from a
    compact copy) and with a tensor in column tiles."""
    import p2pfl.scale.payload_sum as payload_sum
    from p2pfl.scale.mailbox import Mailbox

    monkeypatch.setattr(payload_sum, "INT32_ELEMENTS", limit)
    monkeypatch.setattr(payload_sum, "TILE_COLUMNS", tile)
    g = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(1)
    box = Mailbox({"w": torch.zeros(7, 3, 4, dtype=torch.float64)})
    rows = torch.randn(7, 3, 4, generator=g, dtype=torch.float64) * torch.logspace(
        -8, 8, 7, dtype=torch.float64)[:, None, None]  # magnitudes where order shows
    slots = box.store({"w": rows}, np.zeros(7), np.zeros(7), np.zeros(7, dtype=np.int64),
                      np.ones(7, dtype=np.int64))
    dst = rng.integers(0, 6, size=25)
    src = rng.integers(0, 7, size=25)
    weights = rng.normal(size=25)
    out = {"w": torch.randn(6, 3, 4, generator=g, dtype=torch.float64)}
    expected = out["w"].clone()
    for j, i, c in zip(dst, src, weights, strict=True):
        expected[j] += c * rows[i]
    batch = {"w": out["w"].clone()}
    box.add_payloads(batch, dst, slots[src], weights)
    assert (batch["w"] - expected).abs().max() <= 1e-14 * rows.abs().max()
    for j in range(6):
        mine = dst == j  # row j alone, then first of a batch of others, then last
        alone = {"w": out["w"][j:j + 1].clone()}
        box.add_payloads(alone, np.zeros(mine.sum(), dtype=np.int64), slots[src[mine]],
                         weights[mine])
        assert torch.equal(alone["w"][0], batch["w"][j])
        others = ~mine & (rng.random(25) < 0.5)
        moved = {"w": torch.cat([out["w"][j:j + 1], out["w"][dst[others]]])}
        place = np.concatenate([np.zeros(mine.sum(), dtype=np.int64),
                                1 + np.arange(others.sum())])
        box.add_payloads(moved, place, slots[np.concatenate([src[mine], src[others]])],
                         np.concatenate([weights[mine], weights[others]]))
        assert torch.equal(moved["w"][0], batch["w"][j])


@pytest.mark.parametrize("limit", [2**31 - 1, 40, 25])
def test_sums_written_into_new_slots_are_the_sums_in_any_slots(monkeypatch, limit):
    """`Mailbox.sums` writes each row's weighted sum of payloads into new slots: the same bits
    whether the claimed slots are consecutive (the product writes into the pool itself) or
    scattered (through a copy), whatever else was free and with a start added; each row equal
    to the sum computed by hand, to round-off, also with the products in chunks (40) and with
    rows longer than a chunk, whose second product adds to the first (25)."""
    import p2pfl.scale.payload_sum as payload_sum
    from p2pfl.scale.mailbox import Mailbox

    monkeypatch.setattr(payload_sum, "INT32_ELEMENTS", limit)
    g = torch.Generator().manual_seed(2)
    rows = torch.randn(6, 2, 5, generator=g, dtype=torch.float64)
    start = {"w": torch.randn(3, 2, 5, generator=g, dtype=torch.float64)}
    dst = np.array([0, 1, 2, 2, 0, 1, 2, 0])
    src = np.array([5, 0, 3, 1, 2, 2, 4, 0])
    weights = np.random.default_rng(2).normal(size=8)
    expected = torch.zeros(3, 2, 5, dtype=torch.float64)
    for j, i, c in zip(dst, src, weights, strict=True):
        expected[j] += c * rows[i]
    made = []
    for scattered in (False, True):
        box = Mailbox({"w": torch.zeros(6, 2, 5, dtype=torch.float64)})
        slots = box.store({"w": rows}, np.zeros(6), np.zeros(6), np.zeros(6, dtype=np.int64),
                          np.ones(6, dtype=np.int64))
        if scattered:  # free slots apart: 6, 8 and 10 of 12
            box.claim(6)
            box.release_slots(np.array([6, 8, 10]))
        new = box.sums(3, dst, slots[src], weights)
        assert (Mailbox.run_of(new) is None) == scattered
        assert (box.pool["w"][new] - expected).abs().max() < 1e-14
        assert torch.equal(box.pool["w"][slots], rows)  # the payloads read are untouched
        plus = box.sums(3, dst, slots[src], weights, start)
        assert (box.pool["w"][plus] - expected - start["w"]).abs().max() < 1e-14
        made.append((box.pool["w"][new], box.pool["w"][plus]))
    assert all(torch.equal(a, b) for a, b in zip(*made, strict=True))


def test_claimed_slots_are_a_run_where_one_is_free():
    """`Mailbox.claim` takes a run of free slots where one is long enough (small claims the
    first, large batches with `high` the last, so that the two stay apart), else the longest
    runs first; it grows the pool by half where too few are free, and `release_slots` frees."""
    from p2pfl.scale.mailbox import Mailbox

    box = Mailbox({"w": torch.zeros(10, 2)})
    assert box.claim(10).tolist() == list(range(10))  # the first capacity: the rows
    box.release_slots(np.array([1, 2, 5, 6, 7, 9]))  # free: 1-2, 5-7, 9
    assert box.claim(2).tolist() == [1, 2]
    box.release_slots(np.array([1, 2]))
    assert box.claim(2, high=True).tolist() == [6, 7]
    assert box.claim(3).tolist() == [1, 2, 5]  # no run of 3: the longest runs first
    assert box.claim(3).tolist() == [9, 10, 11] and len(box.refs) == 15  # grown by half
    assert box.refs.tolist() == [1] * 12 + [0] * 3


def test_rows_gathered_and_scaled_in_one_pass_equal_the_gather_then_the_product():
    """payload_sum.scaled_rows (a diagonal sparse product on the CPU) gives each row the one
    rounded product, as gathering and then multiplying does; no rows give empty tensors."""
    from p2pfl.scale.payload_sum import scaled_rows

    g = torch.Generator().manual_seed(3)
    source = {"w": torch.randn(9, 3, 4, generator=g), "b": torch.randn(9, 7, generator=g)}
    rows, scale = torch.tensor([4, 0, 4, 8]), torch.randn(4, generator=g)
    out = scaled_rows(source, rows, scale)
    for k, v in source.items():
        assert torch.equal(out[k], v[rows] * scale.view(-1, *[1] * (v.dim() - 1)))
    empty = scaled_rows(source, rows[:0], scale[:0])
    assert [tuple(v.shape) for v in empty.values()] == [(0, 3, 4), (0, 7)]


def test_push_sum_mass_is_conserved_at_every_event():
    """Stragglers, jitter and latency: no two events coincide, messages stay in flight; the
    weights on the nodes plus those in flight stay N after every instant."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="exponential",
                       topology__directed=True, algorithm__local_steps=1, network__enabled=True,
                       network__stragglers=0.3, network__jitter=0.2, network__step_s=0.01)
    ctx, algorithm = build(cfg)
    sim = Simulation(ctx, algorithm)
    most = 0.0
    for _ in range(150):
        sim.step()
        total = algorithm.weights.sum().item() + algorithm.mass_in_flight()
        assert total == pytest.approx(6, abs=1e-12)
        most = max(most, sim.carried())
    assert most > 1.0 and len(sim.mailbox) > 0


def test_settling_at_marks_moves_no_model():
    """A mark shows what has arrived in the rows (async_sgp's `settle`), with phases in
    progress whose ends then add the same messages again to their results: showing changes no
    bit of the run. With twelve marks, the phases in progress at the end hold the same results
    bit for bit (float64) whether each mark showed the messages or not, so they were trained
    from the same snapshots; the rows shown at the end equal those of settling once, to
    round-off (which phases are computed in one batch changes the last bits); the weights shown
    plus those in flight stay N at every mark."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="exponential",
                       topology__directed=True, algorithm__local_steps=1, network__enabled=True,
                       network__jitter=0.2, algorithm__lr=0.01)
    ends = []
    for marks, show in ((1, True), (12, False), (12, True)):
        ctx, algorithm = build(cfg)
        randomized(ctx)
        sim = Simulation(ctx, algorithm)
        end = ctx.clock.nominal_s() * 6
        shown = 0
        for t in np.linspace(end / marks, end, marks):
            sim.advance(t)
            if show:
                algorithm.settle(ctx, sim)
                shown += int(algorithm.inbox["shown"].sum())
                total = algorithm.weights.sum().item() + algorithm.mass_in_flight()
                assert total == pytest.approx(ctx.num_nodes, abs=1e-12)
        assert (shown > 0) == show  # shown at marks, then added again by the phase ends
        ends.append((ctx.population.params, algorithm.weights, sim.phases.steps,
                     phase_rows(sim)))
    (one, w_one, steps_one, _), (_, _, steps_hidden, y_hidden), (many, w_many, steps_many,
                                                                   y_many) = ends
    assert steps_one.tolist() == steps_many.tolist() == steps_hidden.tolist()
    assert steps_one.min() >= 5
    for k, v in y_hidden.items():
        assert torch.equal(y_many[k].view(torch.int64), v.view(torch.int64))
    assert (w_one - w_many).abs().max() < 1e-12
    assert_close(one, many)


def test_a_mark_adds_arrivals_to_the_weights_and_to_the_rows_once_read():
    """`mark` (what the engine calls at each mark) adds what has arrived to the weights, which
    the record reports, and leaves the rows as they were; a model read (`current`, as the
    evaluation does) shows the rest, one addition after the other as the marks made them. Over
    twelve marks, read at every mark, at two of them or only at the end, the weights at every
    mark, the phases' results and the rows read at the end are the same bit for bit
    (float64)."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="exponential",
                       topology__directed=True, algorithm__local_steps=1, network__enabled=True,
                       network__jitter=0.2, network__stragglers=0.3, algorithm__lr=0.01)
    runs = []
    for lazy, reads in ((False, ()), (True, (2, 7)), (True, ())):
        ctx, algorithm = build(cfg)
        randomized(ctx)
        sim = Simulation(ctx, algorithm)
        end, weights, deferred = ctx.clock.nominal_s() * 6, [], 0
        for i, t in enumerate(np.linspace(end / 12, end, 12)):
            sim.advance(t)
            sim.phases.compute()  # as the engine before a mark: every phase begun computed
            rows = {k: v.clone() for k, v in ctx.population.params.items()}
            (algorithm.mark if lazy else algorithm.settle)(ctx, sim)
            weights.append(algorithm.weights.clone())
            total = algorithm.weights.sum().item() + algorithm.mass_in_flight()
            assert total == pytest.approx(ctx.num_nodes, abs=1e-12)
            box = algorithm.inbox
            deferred += int((box["shown"] & ~box["in_row"]).sum())
            if lazy:
                for k, v in ctx.population.params.items():
                    assert torch.equal(v.view(torch.int64), rows[k].view(torch.int64))
            if i in reads:
                algorithm.current(ctx)
        assert (deferred > 0) == lazy
        assert (sim.phases.computed & (sim.phases.slot >= 0)).all()  # results, not rows
        results = phase_rows(sim)
        average = algorithm.average_model(ctx)
        assert not (algorithm.inbox["shown"] & ~algorithm.inbox["in_row"]).any()
        runs.append((weights, results, ctx.population.params, average))
    eager = runs[0]
    for lazy in runs[1:]:
        for a, b in zip(eager[0], lazy[0], strict=True):
            assert torch.equal(a.view(torch.int64), b.view(torch.int64))
        for one, two in zip(eager[1:], lazy[1:], strict=True):  # results, rows, average
            for k, v in one.items():
                assert torch.equal(two[k].view(torch.int64), v.view(torch.int64)), k


def test_push_sum_numerators_are_conserved_in_the_rows_read_after_marks():
    """Without a step (lr 1e-300: each phase's result is its snapshot, float64), asynchronous
    SGP is Push-Sum: the numerators sum_j w_j z_j of the rows read (`current`) plus those in
    flight, sum of P_ji w_i z_i, stay sum_j z_j at the start, with marks (`mark`) that left
    the rows in between."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="exponential",
                       topology__directed=True, algorithm__local_steps=1, network__enabled=True,
                       network__stragglers=0.3, network__jitter=0.2, algorithm__lr=1e-300)
    ctx, algorithm = build(cfg)
    randomized(ctx)
    start = {k: v.sum(0) for k, v in ctx.population.params.items()}
    sim = Simulation(ctx, algorithm)
    end = ctx.clock.nominal_s() * 6
    for i, t in enumerate(np.linspace(end / 12, end, 12)):
        sim.advance(t)
        sim.phases.compute()
        algorithm.mark(ctx, sim)
        if i % 3 != 2:
            continue
        algorithm.current(ctx)
        box = sim.mailbox
        has = np.flatnonzero(box.slot >= 0)
        assert len(has)
        mass = torch.as_tensor(box.share[has] * box.scalar[box.slot[has]])
        for k, v in ctx.population.params.items():
            shape = (-1, *[1] * (v.dim() - 1))
            flying = (mass.view(shape) * box.pool[k][torch.as_tensor(box.slot[has])]).sum(0)
            total = (algorithm.weights.view(shape) * v).sum(0) + flying
            assert (total - start[k]).abs().max().item() < 1e-12, k


def test_the_records_of_a_run_do_not_depend_on_which_marks_are_evaluated(tmp_path):
    """A run evaluated at every mark and one evaluated only at the last record the same losses
    and Push-Sum weights at every mark, and the same final evaluation, bit for bit."""
    records = []
    for every in (1, 6):
        cfg = small_config(algorithm__name="async_sgp", topology__name="exponential",
                           topology__directed=True, algorithm__local_steps=1, rounds=6,
                           network__enabled=True, network__jitter=0.2, eval__every=every)
        records.append(run(cfg, tmp_path / f"every{every}", figures=False))
    each, last = records
    keys = ("train_loss", "ps_weight_min", "ps_weight_max", "ps_weight_sum",
            "ps_weight_in_flight")
    for a, b in zip(each, last, strict=True):
        assert [a[k] for k in keys] == [b[k] for k in keys]
    assert "test_acc" in each[0] and "test_acc" not in last[0]
    evaluated = [k for k in each[-1] if k.startswith(("test_", "consensus"))]
    assert "consensus_dist" in evaluated
    assert [each[-1][k] for k in evaluated] == [last[-1][k] for k in evaluated]


def test_a_model_read_between_marks_is_refused():
    """Asynchronous SGP's phases read their snapshots from the rows until computed: a model
    read (which shows what has arrived in the rows) while some are not is refused, not
    silently written into their snapshots."""
    cfg, ctx, algorithm, sim = queued_pushes()
    assert not sim.all_computed()
    with pytest.raises(RuntimeError, match="read models at a mark"):
        algorithm.average_model(ctx)
    sim.phases.compute()
    algorithm.average_model(ctx)


def test_a_checkpoint_with_arrivals_not_yet_in_the_rows_resumes_bitwise():
    """A state saved after a mark that added arrivals to the weights only (the rows not yet
    read) loads with them so, and goes on bit for bit, the rows read at the end too."""
    cfg, ctx, algorithm, sim = queued_pushes()
    sim.phases.compute()
    algorithm.mark(ctx, sim)
    box = algorithm.inbox
    assert (box["shown"] & ~box["in_row"]).any()
    sim2 = loaded(cfg, ctx, algorithm, sim.state_dict())
    assert not torch.equal(sim2.algorithm.row_weights, sim2.algorithm.weights)
    for _ in range(20):
        sim.step()
        sim2.step()
    for one in (sim, sim2):
        one.algorithm.settle(one.ctx, one)
    for k, v in ctx.population.params.items():
        assert torch.equal(sim2.ctx.population.params[k].view(torch.int64), v.view(torch.int64))
    assert torch.equal(sim2.algorithm.weights, algorithm.weights)


def test_each_node_runs_on_its_own_clock():
    """Nodes of 1 s a phase and 10 s for a straggler, no transfer time: after 20 nominal
    rounds (20 s) a fast node did 20 local steps and a straggler 2, with no barrier (AD-PSGD)."""
    cfg = small_config(algorithm__name="adpsgd", topology__name="ring", network__stragglers=0.3,
                       network__slow_factor=10.0, **INSTANT)
    ctx, algorithm = build(cfg)
    sim = Simulation(ctx, algorithm)
    sim.advance(ctx.clock.nominal_s() * 20)
    slow = ctx.clock.step_s > cfg.network.step_s
    assert ctx.clock.nominal_s() == 1.0 and slow.any() and not slow.all()
    assert sim.phases.steps.tolist() == np.where(slow, 2, 20).tolist()


def queued_pushes():
    """async_sgp pushing at every phase end (queues of pushes), stragglers and jitter, after 60
    instants: (config, run, algorithm, simulation)."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="exponential",
                       topology__directed=True, algorithm__local_steps=1, network__enabled=True,
                       network__stragglers=0.3, network__jitter=0.2, algorithm__lr=0.001,
                       algorithm__one_push_in_flight=False)  # lr: finite though w collapses
    ctx, algorithm = build(cfg)
    sim = Simulation(ctx, algorithm)
    for _ in range(60):
        sim.step()
    return cfg, ctx, algorithm, sim


def loaded(cfg, ctx, algorithm, state: dict, algorithm_state: dict | None = None) -> Simulation:
    """A new run's simulation loaded from `state` (and the algorithm's, default its own), as a
    resume restores it (population first)."""
    ctx2, algorithm2 = build(cfg)
    ctx2.population.load_state_dict(ctx.population.state_dict())
    algorithm2.load_state_dict(algorithm.state_dict() if algorithm_state is None
                               else algorithm_state)
    sim = Simulation(ctx2, algorithm2)
    sim.load_state_dict(state)
    return sim


def assert_same_rows(sim: Simulation, sim2: Simulation, slots: np.ndarray) -> None:
    """The payloads of `slots` and what the phases hold (an offset, or a snapshot: the node's
    row where it is read there, `snapshot_in_row`), bit for bit (float64 runs)."""
    index = torch.as_tensor(slots)
    for k, v in sim.mailbox.pool.items():
        assert torch.equal(sim2.mailbox.pool[k][index].view(torch.int64),
                           v[index].view(torch.int64))
        assert torch.equal(phase_rows(sim2)[k].view(torch.int64),
                           phase_rows(sim)[k].view(torch.int64))


def phase_rows(sim: Simulation) -> dict[str, torch.Tensor]:
    """Each node's phase: what it holds once computed, else its snapshot (for an algorithm whose
    snapshots stay in the rows, its population row, and once computed its payload slot)."""
    phases = sim.phases
    if not phases.in_row:
        return {k: v.clone() for k, v in phases.buffer.items()}
    out = {k: v.clone() for k, v in sim.ctx.population.params.items()}
    done = torch.as_tensor(np.flatnonzero(phases.computed & (phases.slot >= 0)))
    for k, v in out.items():
        v[done] = sim.mailbox.pool[k][phases.slot[done.numpy()]]
    return out


def test_the_checkpoint_holds_each_payload_once_and_resumes_bitwise():
    """The saved payload table has one entry per distinct send still needed (in flight, or
    arrived and held), not one per message and none for the pool's free slots; a payload or a
    phase snapshot that is still its node's model is saved as the population's row, not again.
    A simulation loaded from the state holds the same payloads and snapshots bit for bit and
    goes on identically."""
    cfg, ctx, algorithm, sim = queued_pushes()
    state, box = sim.state_dict(), sim.mailbox
    table = state["mailbox"]
    sends = {(int(i), float(t)) for i, t in zip(box.src, box.sent, strict=True)}
    results = sim.phases.slot[sim.phases.slot >= 0]  # the computed phases' results
    used = np.unique(np.concatenate([box.slot, algorithm.inbox["slot"], results]))
    assert len(np.unique(box.slot)) == len(sends) < len(box)  # the messages of a send share
    assert table["payload_slots"].tolist() == used.tolist() and len(used) < len(box.refs)
    from_rows = table["payload_rows"] >= 0
    stored = next(iter(table["payloads"].values()))
    assert len(stored) == (~from_rows).sum() and from_rows.any()
    assert len(results) and "buffer" not in state["phases"]  # saved once, in the table

    sim2 = loaded(cfg, ctx, algorithm, state)
    assert_same_rows(sim, sim2, used)
    for _ in range(40):
        sim.step()
        sim2.step()
    for k, v in ctx.population.params.items():
        assert torch.equal(sim2.ctx.population.params[k].view(torch.int64), v.view(torch.int64))


def older_state(sim: Simulation, phases: dict, shown: np.ndarray) -> dict:
    """`sim`'s state as code before the payload table saved it: the whole payload pool, no
    slot rows, the phases' rows (`phases`) in a buffer, no result slots, and the inbox without
    the messages `shown` [inbox] (the code before marks kept them had added and released
    them)."""
    state = sim.state_dict()
    algorithm = sim.algorithm
    refs = state["mailbox"]["refs"].clone()
    results = sim.phases.slot[sim.phases.slot >= 0]
    gone = np.concatenate([results, algorithm.inbox["slot"][shown]])
    np.subtract.at(refs.numpy(), gone, 1)  # the results and the released messages
    state["mailbox"] = {k: v for k, v in state["mailbox"].items() if k not in (
        "payload_slots", "payload_rows", "payloads", "row", "refs")} | {
        "pool": {k: v.clone() for k, v in sim.mailbox.pool.items()}, "refs": refs}
    state["phases"] = {k: v for k, v in state["phases"].items() if k != "slot"} | {
        "buffer": phases}
    return state


def test_a_checkpoint_from_before_the_payload_table_loads():
    """States as earlier code saved them load and go on as the run does: (1) the whole payload
    pool and the phase buffer holding the computed phases' results (`offset_held` False): the
    same payloads and phases, bit for bit, and 20 more instants identical; (2) the phases'
    offsets y^K - x_read after a mark added messages to the rows and released them: the
    offsets become results (`results_of_offsets`) and the run goes on to round-off."""
    cfg, ctx, algorithm, sim = queued_pushes()
    hidden = np.zeros(len(algorithm.inbox["dst"]), dtype=bool)
    state = older_state(sim, phase_rows(sim), hidden)
    state["phases"]["offset_held"] = torch.zeros(ctx.num_nodes, dtype=torch.bool)
    sim2 = loaded(cfg, ctx, algorithm, state)
    assert_same_rows(sim, sim2, np.flatnonzero(state["mailbox"]["refs"].numpy()))
    for _ in range(20):
        sim.step()
        sim2.step()
    for k, v in ctx.population.params.items():
        assert torch.equal(sim2.ctx.population.params[k].view(torch.int64), v.view(torch.int64))

    cfg, ctx, algorithm, sim = queued_pushes()  # afresh: its weights collapse later on
    sim.phases.compute()  # as at a mark: every phase begun
    snapshots = {k: v.clone() for k, v in ctx.population.params.items()}
    algorithm.settle(ctx, sim)  # a mark: the rows change, the phases in progress
    shown = algorithm.inbox["shown"]
    assert shown.any()
    offsets = {k: v - snapshots[k] for k, v in phase_rows(sim).items()}
    before = algorithm.state_dict()  # the inbox as it was: without the shown messages
    before["inbox"] = {k: v[torch.as_tensor(~shown)] for k, v in before["inbox"].items()
                       if k != "shown"}
    sim2 = loaded(cfg, ctx, algorithm, older_state(sim, offsets, shown), before)
    assert not sim2.algorithm.inbox["shown"].any()
    for _ in range(20):
        sim.step()
        sim2.step()
    assert_close(ctx.population.params, sim2.ctx.population.params)


def test_offsets_become_results_by_the_row_read_where_no_mark_moved_the_weights():
    """Where no mark changed a row since its phase read it (w = w_read), asynchronous SGP's
    results from offsets, z + (w_read / w) offset, are the default's, x_read + offset, bit for
    bit; with the weights moved they are not."""
    from algorithms.asynchronous import Asynchronous

    cfg, ctx, algorithm, sim = queued_pushes()
    sim.phases.compute()
    going = np.flatnonzero(np.isfinite(sim.phases.due))
    assert torch.equal(algorithm.read_weights[going], algorithm.weights[going])
    offsets = {k: torch.randn(len(going), *v.shape[1:], dtype=v.dtype)
               for k, v in ctx.population.params.items()}
    mine = algorithm.results_of_offsets(ctx, going, offsets)
    default = Asynchronous.results_of_offsets(algorithm, ctx, going, offsets)
    assert all(torch.equal(mine[k], default[k]) for k in offsets)
    algorithm.weights[going] *= 2
    moved = algorithm.results_of_offsets(ctx, going, offsets)
    assert not any(torch.equal(moved[k], default[k]) for k in offsets)


def test_a_collapsing_push_sum_weight_is_warned_once_and_named_when_it_diverges(tmp_path):
    """A directed ring of 4 with one node 30x slower (stragglers 0.3 draws one), pushes at every
    phase end, no transfer time: the node after the straggler pushes every second, keeps half
    its weight each time and hears nothing for 30 s, so its weight is 2^-k after k pushes. The
    run warns once, at mark 7 (w = 2^-7 < 1e-2, read by its 8th phase), then diverges at
    mark 13, where its 14th phase, begun then with w = 2^-13, is computed (every phase begun
    by a mark is), and names that weight and its step lr(13) / w."""
    cfg = small_config(algorithm__name="async_sgp", topology__name="directed_ring", rounds=14,
                       data__num_nodes=4, eval__every=100, network__stragglers=0.3,
                       network__slow_factor=30.0, algorithm__one_push_in_flight=False, **INSTANT)
    ctx, _ = build(cfg)
    slow = np.flatnonzero(ctx.clock.step_s > 1.0)
    node = int(slow[0] + 1) % 4
    assert len(slow) == 1
    with pytest.warns(WeightCollapseWarning) as said, pytest.raises(DivergenceError) as err:
        run(cfg, tmp_path / "r", figures=False)
    collapses = [w for w in said if issubclass(w.category, WeightCollapseWarning)]
    assert len(collapses) == 1
    line = str(collapses[0].message)
    assert "\n" not in line and line.startswith(
        f"Push-Sum weight collapse: node {node} has w = {2**-7:.3g} at mark 7 (7 simulated "
        f"s, its phase 8)")
    assert "likely cause: its inbound messages are slow relative to its sends" in line
    message = str(err.value)
    assert message.startswith("mark 13: non-finite training loss in a local phase at nodes ")
    assert ("Push-Sum weights in their latest local phases: " in message
            and f"node {node} w = {2**-13:.3g}, lr / w = {0.1 * 0.998**13 * 2**13:.3g}"
            in message and f"the lowest any phase read: node {node} w = {2**-13:.3g}" in message)


@pytest.mark.parametrize("name", ["adpsgd", "async_sgp", "fedbuff"])
def test_a_mark_where_nothing_arrived_records_no_staleness(tmp_path, name):
    """Every node 10x slower (10 s phases, nominal rounds of 1 s, no transfer time): nothing is
    mixed in before the phases end at 10 s, so rows 1 to 9 have no staleness key (not 0.0, which
    reads as fresh updates) and row 10, where the first messages or updates arrive, has them:
    the age of a gradient read at 0 (adpsgd) or of an update downloaded at 0 (fedbuff, tau 0),
    and a real 0 for async_sgp's pushes, which take no time."""
    extra = {"algorithm__concurrency": 2, "algorithm__buffer_size": 2} if name == "fedbuff" \
        else {}
    cfg = small_config(algorithm__name=name, rounds=10, eval__every=10, data__num_nodes=4,
                       topology__name={"adpsgd": "ring", "async_sgp": "exponential",
                                       "fedbuff": "star"}[name],
                       network__stragglers=1.0, network__slow_factor=10.0, **INSTANT, **extra)
    rows = run(cfg, tmp_path / name, figures=False)
    keys = ["staleness_s_mean", "staleness_s_max"] + (
        ["staleness_mean", "staleness_max"] if name == "fedbuff" else [])
    assert [[k in row for k in keys] for row in rows] == [[False] * len(keys)] * 9 + [
        [True] * len(keys)]
    age = 0.0 if name == "async_sgp" else 10.0
    assert rows[-1]["staleness_s_mean"] == rows[-1]["staleness_s_max"] == age


def test_pairs_split_into_successive_matchings_and_neighbours_are_uniform():
    assert successive_matchings(np.array([0, 1, 2, 4]), np.array([3, 2, 0, 5])).tolist() == \
        [0, 0, 1, 0]
    import networkx as nx

    G = nx.star_graph(3)
    assert random_neighbours(G, [0, 0, 0, 1], np.array([0.0, 0.5, 0.99, 0.7])).tolist() == \
        [1, 2, 3, 0]


def test_asynchronous_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="^network.enabled: adpsgd is asynchronous"):
        build(small_config(algorithm__name="adpsgd", algorithm__local_steps=1))
    with pytest.raises(ConfigError, match=r"^compare\[1\] \(b\) network.enabled: adpsgd is"):
        check_variants([("compare[0] (a)", small_config()),
                        ("compare[1] (b)", small_config(algorithm__name="adpsgd",
                                                        algorithm__local_steps=1))])
    for name in ("adpsgd", "async_sgp"):  # zero-time phases: the clock would never advance
        cfg = small_config(algorithm__name=name, algorithm__local_steps=1, network__enabled=True,
                           network__step_s=0.0)
        with pytest.raises(ConfigError, match=f"^network.step_s: is 0, but {name} is async"):
            build(cfg)
        with pytest.raises(ConfigError, match=r"^compare\[0\] \(a\) network.step_s: is 0"):
            check_variants([("compare[0] (a)", cfg)])
    with pytest.raises(ConfigError, match="^algorithm.local_steps: adpsgd applies one"):
        small_config(algorithm__name="adpsgd", network__enabled=True)
    with pytest.raises(ConfigError, match="^network.overlap: async_sgp does not mix"):
        small_config(algorithm__name="async_sgp", network__enabled=True, network__overlap=True,
                     algorithm__local_steps=1)
    with pytest.raises(ConfigError, match="^algorithm.concurrency: is 9 but there are 6"):
        run(small_config(algorithm__name="fedbuff", topology__name="star",
                         network__enabled=True, algorithm__concurrency=9), tmp_path / "a")
    with pytest.raises(ConfigError, match="^topology.link_drop: adpsgd runs event by event"):
        run(small_config(algorithm__name="adpsgd", network__enabled=True,
                         algorithm__local_steps=1, topology__link_drop=0.1), tmp_path / "b")
    with pytest.raises(ConfigError, match="^engine.on_divergence: adpsgd runs event by event"):
        run(small_config(algorithm__name="adpsgd", network__enabled=True,
                         algorithm__local_steps=1, engine__on_divergence="skip_node"),
            tmp_path / "c")


def test_table_and_plot_compare_sync_and_async_runs_on_simulated_seconds(tmp_path, capsys):
    from p2pfl.cli import main

    common = {"network__enabled": True, "network__stragglers": 0.3, "algorithm__local_steps": 1,
              "rounds": 3}
    run(small_config(algorithm__name="dpsgd", **common), tmp_path / "dpsgd", figures=False)
    run(small_config(algorithm__name="adpsgd", **common), tmp_path / "adpsgd", figures=False)
    assert main(["table", str(tmp_path / "dpsgd"), str(tmp_path / "adpsgd"),
                 "--target", "0.01"]) == 0
    rows = {line.split("|")[1].strip(): line for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ")}
    for name in ("dpsgd", "adpsgd"):
        first = read_metrics(tmp_path / name / METRICS)[0]["sim_time_s"]
        assert f"| {first:.3g} |" in rows[name]
    assert main(["plot", str(tmp_path / "dpsgd"), str(tmp_path / "adpsgd"), "--x", "time",
                 "--out", str(tmp_path / "curves")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_the_study_table_reports_diverged_seeds_apart():
    from analysis.scripts.async_study import table

    def history(acc: float, diverged: bool = False) -> list[dict]:
        rows = [{"round": m, "sim_time_s": 0.1 * m, "test_acc": acc * m / 2} for m in (1, 2)]
        return rows[:-1] + [{**rows[-1], "diverged": True}] if diverged else rows

    results = {"16 nodes": {"D-PSGD": [history(0.8), history(0.8)],
                            "async SGP": [history(0.7), history(float("nan"), True)]}}
    lines = table(results, 0.65).splitlines()
    assert lines[2].startswith("| 16 nodes | D-PSGD | 0.20 ± 0.00 | 1.00 | 80.0 % |")
    assert lines[3].startswith("| 16 nodes | async SGP | 0.20 ± 0.00 (1 of 2 seeds diverged) | "
                               "1.00 | 70.0 % |")
