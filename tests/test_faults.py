"""Faults in centralized rounds (star: graph node 0 is the server, node i + 1 is client i), in the
consensus simulators, and Push-Sum mass conservation in real engine runs with faults."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import topologies as T
from algorithms import ALGORITHMS
from algorithms.server import Delivery
from p2pfl.core.seeding import stream_seed
from p2pfl.engine import build
from tests.conftest import option_names, play, small_config

N = 8


pytestmark = pytest.mark.usefixtures("one_thread")


def _config(name: str, link_drop: float = 0.0, node_drop: float = 0.0, **overrides):
    base = {"algorithm__name": name, "topology__name": "star", "data__num_nodes": N,
            "algorithm__participation": 1.0, "algorithm__local_steps": 2,
            "algorithm__batch_size": 8, "algorithm__lr": 0.05, "algorithm__server_lr": 0.7,
            "topology__link_drop": link_drop, "topology__node_drop": node_drop, "seed": 5}
    base.update(overrides)
    if "server_lr" not in option_names(ALGORITHMS[name]):  # FedDyn-type servers have no global lr
        del base["algorithm__server_lr"]
    return small_config(**base)


def _by_hand(cfg, t: int) -> tuple[np.ndarray, np.ndarray]:
    """(received the model, update arrived) per client, read off the raw fault draw."""
    ctx, _ = build(cfg)
    f = T.sample_faults(ctx.schedule.at(t), cfg.topology.link_drop, cfg.topology.node_drop,
                        seed=stream_seed(cfg.seed, "faults", t))
    clients = np.arange(1, N + 1)
    down = ~f.nodes[clients] & ~f.links[clients, 0]
    return down, down & ~f.links[0, clients]


def test_fedavg_aggregates_the_delivered_clients_only():
    cfg = _config("fedavg", link_drop=0.3, node_drop=0.2)
    down, up = _by_hand(cfg, 0)
    # The draw has every case: lost download, lost upload, delivered both ways.
    assert (~down).any() and (down & ~up).any() and up.any()
    ctx, alg = build(cfg)
    before = {k: v.clone() for k, v in ctx.population.params.items()}
    start = {k: v.clone() for k, v in alg.server.items()}
    report = play(alg, ctx, 0, ctx.schedule.at(0))

    ref_ctx, ref = build(_config("fedavg"))  # fault-free twin: the same local training
    trainers = torch.as_tensor(np.flatnonzero(down))
    r, _ = ref.train_clients(ref_ctx, trainers, ref.server, 0)
    arrived = up[down]
    for k, v in alg.server.items():
        mean = r.trained[k][torch.as_tensor(arrived)].mean(0)
        assert torch.allclose(v, start[k] + 0.7 * (mean - start[k]), atol=1e-12), k
    lost_down = torch.as_tensor(np.flatnonzero(~down))
    for k, v in ctx.population.params.items():
        assert torch.equal(v[lost_down], before[k][lost_down]), k  # never trained
        assert torch.allclose(v[trainers], r.trained[k], atol=1e-12), k  # lost uploads trained
    assert report.nodes.tolist() == trainers.tolist()
    assert report.copies_sent == int(down.sum()) + int(up.sum())


def test_lost_upload_leaves_the_server_and_client_state_alone():
    cfg = _config("scaffold", link_drop=0.3, node_drop=0.2)
    down, up = _by_hand(cfg, 0)
    ctx, alg = build(cfg)
    old = {k: v.clone() for k, v in alg.client_control.values.items()}
    report = play(alg, ctx, 0, ctx.schedule.at(0))
    for k, v in alg.client_control.values.items():
        changed = (v != old[k]).flatten(1).any(1).numpy()
        assert (changed == up).all(), k
    assert report.copies_sent == 2 * int(down.sum()) + 2 * int(up.sum())


@pytest.mark.parametrize("name", ["fedavg", "scaffold", "feddyn", "fedsmoo", "fedlesam",
                                  "fedfsa", "naive_fedgloss"])
def test_everything_delivered_is_bit_identical_to_no_faults(name, monkeypatch):
    kw = {"algorithm__rho": 0.2, "algorithm__server_rho": 0.2, "algorithm__participation": 0.5}
    kw = {k: v for k, v in kw.items() if k.split("__")[1] in option_names(ALGORITHMS[name])}
    ctx_a, a = build(_config(name, **kw))
    ctx_b, b = build(_config(name, **kw))
    assert a.delivery(ctx_a.faults(0, ctx_a.schedule.at(0)), ctx_a.all_nodes()) is None
    m = 4
    monkeypatch.setattr(b, "delivery", lambda *_: Delivery(torch.ones(m, dtype=torch.bool),
                                                           torch.ones(m, dtype=torch.bool)))
    for t in range(2):
        ra = play(a, ctx_a, t, ctx_a.schedule.at(t))
        rb = play(b, ctx_b, t, ctx_b.schedule.at(t))
        assert ra.copies_sent == rb.copies_sent
    assert torch.equal(ctx_a.population.flat, ctx_b.population.flat)
    for k, v in a.server.items():
        assert torch.equal(v, b.server[k]), k


def test_nothing_arrives_server_unchanged(monkeypatch):
    ctx, alg = build(_config("scaffold", algorithm__participation=0.5))
    monkeypatch.setattr(alg, "delivery", lambda *_: Delivery(
        torch.tensor([True, False, True, False]), torch.zeros(4, dtype=torch.bool)))
    server = {k: v.clone() for k, v in alg.server.items()}
    control = {k: v.clone() for k, v in alg.client_control.values.items()}
    report = play(alg, ctx, 0, ctx.schedule.at(0))
    for k, v in alg.server.items():
        assert torch.equal(v, server[k])
    for k, v in alg.client_control.values.items():
        assert torch.equal(v, control[k])
    assert report.copies_sent == 2 * 2 and len(report.nodes) == 2
    monkeypatch.setattr(alg, "delivery", lambda *_: Delivery(torch.zeros(4, dtype=torch.bool),
                                                             torch.zeros(4, dtype=torch.bool)))
    before = ctx.population.state_dict()["flat"]
    report = play(alg, ctx, 1, ctx.schedule.at(1))
    assert report.copies_sent == 0 and len(report.nodes) == 0
    assert torch.equal(ctx.population.flat, before)


@pytest.mark.parametrize("name", ["scaffold", "naive_fedgloss"])
def test_resume_with_faults(name):
    extra = {"algorithm__server_rho": 0.2} if "server_rho" in option_names(ALGORITHMS[name]) else {}
    cfg = _config(name, link_drop=0.3, node_drop=0.2, algorithm__participation=0.5, **extra)
    ctx, alg = build(cfg)
    play(alg, ctx, 0, ctx.schedule.at(0))
    saved = (ctx.population.state_dict(), alg.state_dict())
    play(alg, ctx, 1, ctx.schedule.at(1))
    fresh_ctx, fresh = build(cfg)
    fresh_ctx.population.load_state_dict(saved[0])
    fresh.load_state_dict(saved[1])
    play(fresh, fresh_ctx, 1, fresh_ctx.schedule.at(1))
    assert torch.equal(fresh_ctx.population.flat, ctx.population.flat)
    for k, v in fresh.server.items():
        assert torch.equal(v, alg.server[k]), k


def test_pushsum_consensus_reaches_the_exact_average_under_drops():
    from analysis.consensus import consensus_error, pushsum_consensus

    G = T.exponential(16)
    x0 = np.random.default_rng(0).normal(size=(16, 3))
    z, w = pushsum_consensus(G, x0, 300, return_weights=True, link_drop=0.5, node_drop=0.3,
                             seed=1)
    assert np.abs(w.sum(axis=1) - 16).max() < 1e-9  # every round
    assert consensus_error(z)[-1] < 1e-8
    z0 = pushsum_consensus(G, x0, 150)
    assert not np.allclose(z[5], z0[5])  # the faults did change the trajectory


def test_gossip_consensus_under_drops_keeps_the_average():
    from analysis.consensus import consensus_error, gossip_consensus

    G = T.random_regular(12, 4, seed=0)
    x0 = np.random.default_rng(2).normal(size=12)
    x = gossip_consensus(G, x0, 200, link_drop=0.3, node_drop=0.1, seed=3)
    assert np.abs(x.mean(axis=1) - x0.mean()).max() < 1e-12
    assert consensus_error(x)[-1] < 1e-8
    with pytest.raises(ValueError, match="link_drop"):
        gossip_consensus(None, x0, 2, matrices=lambda t: np.eye(12), link_drop=0.1)


@pytest.mark.parametrize(("name", "topology"), [("osgp", "random_out"), ("osgp", "exponential")])
def test_pushsum_runs_conserve_mass_and_learn_under_faults(name, topology):
    from p2pfl.engine import run

    kw = {"algorithm__name": name, "topology__name": topology, "data__num_nodes": 8,
          "rounds": 12, "algorithm__lr": 0.2, "algorithm__local_steps": 3,
          "topology__link_drop": 0.5, "topology__node_drop": 0.3, "eval__every": 4}
    if topology == "random_out":
        kw["topology__k"] = 2
    cfg = small_config(**kw)
    history = run(cfg)
    sums = np.array([r["ps_weight_sum"] for r in history])
    assert len(sums) == 12 and np.abs(sums - 8).max() < 1e-9  # every round
    assert min(r["ps_weight_min"] for r in history) < 0.9  # the faults did move the weights
    ctx, _ = build(cfg)
    chance = 1.0 / ctx.data.num_classes
    assert history[-1]["test_acc"] > chance + 0.15
