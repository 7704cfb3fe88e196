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
from p2pfl.config import ConfigError
from p2pfl.engine import run
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


@pytest.mark.parametrize("limit", [2**31, 40])
def test_payloads_added_by_a_sparse_product_equal_a_loop_over_messages(monkeypatch, limit):
    """Mailbox.add_payloads against the messages added one by one (float64), also with a pool
    over the 32-bit limit of CPU sparse kernels (here lowered: the slots gathered, in tiles)."""
    import p2pfl.scale.mailbox as mailbox

    monkeypatch.setattr(mailbox, "INT32_ELEMENTS", limit)
    g = torch.Generator().manual_seed(1)
    box = mailbox.Mailbox({"w": torch.zeros(5, 3, 4, dtype=torch.float64)})
    rows = torch.randn(5, 3, 4, generator=g, dtype=torch.float64)
    slots = box.store({"w": rows}, np.zeros(5), np.zeros(5), np.zeros(5, dtype=np.int64),
                      np.ones(5, dtype=np.int64))
    dst, src = np.array([2, 0, 2, 1, 0, 2]), np.array([4, 1, 0, 3, 0, 1])
    weights = np.array([0.5, 0.25, 2.0, -1.0, 3.0, 0.125])
    out = {"w": torch.randn(3, 3, 4, generator=g, dtype=torch.float64)}
    expected = out["w"].clone()
    for j, i, c in zip(dst, src, weights, strict=True):
        expected[j] += c * rows[i]
    box.add_payloads(out, dst, slots[src], weights)
    assert (out["w"] - expected).abs().max() < 1e-15


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
