"""The decentralized family against per-node references written from the papers (float64).

The references below loop over nodes with `torch.func.functional_call` on an `nn.Module`, build
the mixing matrices from the graph's edges by hand, and use the papers' own forms: heavy ball on
iterates for the symmetric family (DFedAvgM), numerators x and weights w with a momentum buffer
for the Push-Sum family (DFedSGPSM Algorithm 1).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

import topologies as T
from p2pfl.config import ConfigError
from p2pfl.core.models import build_model
from p2pfl.core.seeding import stream_seed
from p2pfl.engine import build
from tests.conftest import every_option, play, small_config

SYMMETRIC = ("dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam_mgs")
PUSH_SUM = ("sgp", "osgp", "dfedsgpm", "dfedsgpsm")
TOL = 1e-10


def _config(name: str, **overrides):
    """4 nodes; a ring (MH weights 1/3, zeros off the ring) or random 1-out digraphs."""
    topo = ({"topology__name": "ring"} if name in SYMMETRIC or "topology__name" in overrides
            else {"topology__name": "random_out", "topology__k": 1})
    base = {"algorithm__name": name, "data__num_nodes": 4, "rounds": 20, **topo,
            **({"algorithm__local_steps": 1} if name == "sgp" else {})}  # SGP: one step a round
    return small_config(**{**base, **overrides})


def _run(name: str, rounds: int = 2, **overrides):
    ctx, algorithm = build(_config(name, **overrides))
    reports = [play(algorithm, ctx, t, ctx.schedule.at(t)) for t in range(rounds)]
    return ctx, algorithm, reports


def _mh(graph: nx.Graph) -> torch.Tensor:
    """Metropolis-Hastings weights, by hand: 1 / (1 + max(d_i, d_j)) on edges."""
    n = graph.number_of_nodes()
    W = torch.zeros(n, n, dtype=torch.float64)
    for i, j in graph.edges:
        W[i, j] = W[j, i] = 1.0 / (1 + max(graph.degree[i], graph.degree[j]))
    return W + torch.diag(1 - W.sum(1))


def _push(graph: nx.DiGraph) -> torch.Tensor:
    """Uniform push rule, by hand: sender i keeps and sends 1 / (d_out(i) + 1)."""
    n = graph.number_of_nodes()
    P = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        share = 1.0 / (graph.out_degree[i] + 1)
        P[i, i] = share
        for j in graph.successors(i):
            P[j, i] = share
    return P


def _grad(model, params: dict, xb: torch.Tensor, yb: torch.Tensor) -> list[torch.Tensor]:
    leaves = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    loss = F.cross_entropy(functional_call(model, leaves, (xb,)), yb)
    return list(torch.autograd.grad(loss, list(leaves.values())))


def _sam_grad(model, params: dict, xb, yb, rho: float) -> list[torch.Tensor]:
    """Gradient at x + rho g / (||g|| + 1e-7), ||.|| over all tensors jointly, same batch."""
    g = _grad(model, params, xb, yb)
    if rho == 0:
        return g
    norm = torch.sqrt(sum((v**2).sum() for v in g))
    shifted = {k: v + rho * gk / (norm + 1e-7) for (k, v), gk in zip(params.items(), g)}
    return _grad(model, shifted, xb, yb)


class Reference:
    """The run's data, model and initial weights, read once; every node starts from them."""

    def __init__(self, name: str, **overrides) -> None:
        self.cfg = _config(name, **overrides)
        ctx, _ = build(self.cfg)
        self.ctx = ctx
        self.a = every_option(self.cfg.algorithm)
        self.model = build_model(self.cfg.model.name, ctx.data.input_shape,
                                 ctx.data.num_classes).to(dtype=torch.float64)
        self.n = ctx.num_nodes
        self.x = [{k: v[i].clone() for k, v in ctx.population.params.items()}
                  for i in range(self.n)]

    def batches(self, t: int, i: int):
        plan = self.ctx.data.plan(self.cfg.seed, t, self.a.batch_size, self.a.local_epochs,
                                  self.a.local_steps)
        for step in range(plan.steps):
            xb, yb = (batch := self.ctx.data.batch(plan, step, torch.tensor([i]))).x, batch.y
            yield xb[0], yb[0]

    def lr(self, t: int) -> float:
        return self.a.lr * self.a.lr_decay**t

    @property
    def damp(self) -> float:
        """Weight of the new gradient in the momentum: 1, or 1 - a when dampened."""
        return 1 - self.a.momentum if self.a.momentum_form == "dampened" else 1.0

    def heavy_ball(self, t: int, i: int, start: dict) -> dict:
        """DFedAvgM form: y^{k+1} = y^k - lr g(y^k) + theta (y^k - y^{k-1}), y^{-1} = y^0."""
        prev, y = dict(start), dict(start)
        for xb, yb in self.batches(t, i):
            g = _sam_grad(self.model, y, xb, yb, self.a.rho)
            nxt = {k: v - self.lr(t) * self.damp * gk + self.a.momentum * (v - prev[k])
                   for (k, v), gk in zip(y.items(), g)}
            prev, y = y, nxt
        return y

    def mix(self, M: torch.Tensor, rows: list[dict]) -> list[dict]:
        return [{k: sum(M[i, j] * rows[j][k] for j in range(self.n)) for k in rows[0]}
                for i in range(self.n)]

    def gossip_round(self, t: int) -> None:
        y = [self.heavy_ball(t, i, self.x[i]) for i in range(self.n)]
        W = _mh(self.ctx.schedule.at(t))
        for _ in range(self.a.gossip_steps):
            y = self.mix(W, y)
        self.x = y

    def dpsgd_cta_round(self, t: int) -> None:
        """Lian et al.: x_i <- sum_j W_ij x_j - lr g_i(x_i)."""
        W = _mh(self.ctx.schedule.at(t))
        mixed = self.mix(W, self.x)
        for i in range(self.n):
            (xb, yb), = self.batches(t, i)
            g = _grad(self.model, self.x[i], xb, yb)
            mixed[i] = {k: v - self.lr(t) * gk for (k, v), gk in zip(mixed[i].items(), g)}
        self.x = mixed

    def push_sum_round(self, t: int, w: torch.Tensor, P: torch.Tensor | None = None,
                       offline: np.ndarray | None = None) -> torch.Tensor:
        """DFedSGPSM Algorithm 1 on numerators; also checks its Eq. 3 closed form."""
        a, out = self.a, []
        for i in range(self.n):
            if offline is not None and offline[i]:
                out.append(dict(self.x[i]))
                continue
            x, m, g_tilde = dict(self.x[i]), None, []
            for xb, yb in self.batches(t, i):
                z = {k: v / w[i] for k, v in x.items()}
                g = _sam_grad(self.model, z, xb, yb, a.rho)
                g_tilde.append(g)
                m = [self.damp * gk + (0 if m is None else a.momentum * m[idx])
                     for idx, gk in enumerate(g)]
                x = {k: v - self.lr(t) * mk for (k, v), mk in zip(x.items(), m)}
            K = len(g_tilde)
            for idx, (k, v) in enumerate(x.items()):
                weights = [self.damp * sum(a.momentum**p for p in range(K - s))
                           for s in range(K)]
                offset = -self.lr(t) * sum(c * g[idx] for c, g in zip(weights, g_tilde))
                torch.testing.assert_close(v - self.x[i][k], offset, rtol=0, atol=1e-12)
            out.append(x)
        P = _push(self.ctx.schedule.at(t)) if P is None else P
        self.x = self.mix(P, out)
        return P @ w

    def assert_matches(self, ctx, w: torch.Tensor | None = None) -> None:
        for k, v in ctx.population.params.items():
            for i in range(self.n):
                expected = self.x[i][k] if w is None else self.x[i][k] / w[i]
                torch.testing.assert_close(v[i], expected, rtol=0, atol=TOL)


@pytest.mark.parametrize("name, overrides", [
    ("dfedavg", {}),
    ("dfedavgm", {"algorithm__momentum": 0.9, "algorithm__clip_norm": 0.0}),
    ("dfedavgm", {"algorithm__momentum": 0.5, "algorithm__momentum_form": "dampened",
                  "algorithm__clip_norm": 0.0}),
    ("dfedsam", {"algorithm__rho": 0.05}),
    ("dfedsam_mgs", {"algorithm__rho": 0.05, "algorithm__gossip_steps": 3}),
    ("dpsgd", {"algorithm__local_steps": 1, "algorithm__order": "atc"}),
])
def test_symmetric_family_matches_hand_computed_rounds(name, overrides):
    ref = Reference(name, **overrides)
    for t in range(2):
        ref.gossip_round(t)
    ctx, _, reports = _run(name, **overrides)
    ref.assert_matches(ctx)
    assert reports[0].copies_sent == 8 * ref.a.gossip_steps  # ring of 4: 8 directed messages


def test_dpsgd_combine_then_adapt_matches_lian():
    ref = Reference("dpsgd", algorithm__local_steps=1)
    for t in range(3):
        ref.dpsgd_cta_round(t)
    ctx, _, _ = _run("dpsgd", 3, algorithm__local_steps=1)
    ref.assert_matches(ctx)
    atc, _, _ = _run("dpsgd", 3, algorithm__local_steps=1, algorithm__order="atc")
    assert (atc.population.flat - ctx.population.flat).abs().max() > 1e-6


@pytest.mark.parametrize("name, overrides", [
    ("sgp", {"algorithm__local_steps": 1}),
    ("osgp", {}),
    ("dfedsgpm", {"algorithm__momentum": 0.9, "algorithm__clip_norm": 0.0}),
    ("dfedsgpsm", {"algorithm__momentum": 0.9, "algorithm__rho": 0.05,
                   "algorithm__clip_norm": 0.0}),
    ("dfedsgpsm", {"algorithm__momentum": 0.5, "algorithm__rho": 0.05,
                   "algorithm__momentum_form": "dampened", "algorithm__clip_norm": 0.0}),
])
def test_push_sum_family_matches_algorithm_1(name, overrides):
    ref = Reference(name, **overrides)
    w = torch.ones(4, dtype=torch.float64)
    for t in range(3):
        w = ref.push_sum_round(t, w)
    assert (w - 1).abs().max() > 0.05, "the test digraphs must make w non-uniform"
    ctx, algorithm, reports = _run(name, 3, **overrides)
    torch.testing.assert_close(algorithm.weights, w, rtol=0, atol=1e-14)
    ref.assert_matches(ctx, w)
    assert reports[0].copies_sent == reports[0].scalars_sent == 4


def _assert_same_models(ctx_a, ctx_b, atol: float = 1e-12) -> None:
    torch.testing.assert_close(ctx_a.population.flat, ctx_b.population.flat, rtol=0, atol=atol)


@pytest.mark.parametrize("push_sum, gossip", [
    (("osgp", {}), ("dfedavg", {})),
    (("dfedsgpm", {"algorithm__momentum": 0.9}), ("dfedavgm", {"algorithm__momentum": 0.9})),
    (("dfedsgpsm", {"algorithm__rho": 0.05, "algorithm__momentum": 0.0,
                    "algorithm__clip_norm": 0.0}), ("dfedsam", {"algorithm__rho": 0.05})),
])
def test_push_sum_on_a_ring_is_its_gossip_counterpart(push_sum, gossip):
    """On a ring of 4 the uniform push rule is the Metropolis-Hastings matrix (1/3 each), so the
    weights stay 1 and the Push-Sum round code (de-biasing, diag-scaled mixing) must give the
    Gossip round code's models: two code paths, one algorithm."""
    ctx_a, alg_a, _ = _run(push_sum[0], 3, topology__name="ring", **push_sum[1])
    torch.testing.assert_close(alg_a.weights, torch.ones(4, dtype=torch.float64), rtol=0,
                               atol=1e-15)
    ctx_b, _, _ = _run(gossip[0], 3, **gossip[1])
    _assert_same_models(ctx_a, ctx_b)


@pytest.mark.parametrize("sam, plain", [
    (("dfedsam", {}), ("dfedavg", {})),
    (("dfedsgpsm", {"algorithm__momentum": 0.9}), ("dfedsgpm", {"algorithm__momentum": 0.9})),
])
def test_sam_with_a_vanishing_radius_is_plain_sgd(sam, plain):
    """rho = 1e-9 runs the SAM branch (ascent, second gradient, restore) and must land within
    O(rho) of the branch-free SGD step; rho = 0.05 must not."""
    ctx_a, _, _ = _run(sam[0], 2, algorithm__rho=1e-9, **sam[1])
    ctx_b, _, _ = _run(plain[0], 2, **plain[1])
    _assert_same_models(ctx_a, ctx_b, atol=1e-7)
    ctx_c, _, _ = _run(sam[0], 2, algorithm__rho=0.05, **sam[1])
    assert (ctx_c.population.flat - ctx_b.population.flat).abs().max() > 1e-4


def test_multiple_gossip_steps_dense_power_equals_repeated_sparse_products():
    """DFedSAM-MGS mixes with W^Q: a dense matrix power, or Q products with the CSR matrix."""
    kw = {"algorithm__rho": 0.05, "algorithm__gossip_steps": 3}
    dense, _, _ = _run("dfedsam_mgs", 2, engine__mixing="dense", **kw)
    sparse, _, _ = _run("dfedsam_mgs", 2, engine__mixing="sparse", **kw)
    _assert_same_models(dense, sparse)


def test_sgp_on_doubly_stochastic_graph_is_dpsgd_adapt_then_combine():
    """On a ring the push rule gives the MH matrix (1/3): w stays 1 and SGP is D-PSGD (ATC)."""
    sgp, algorithm, _ = _run("sgp", 3, topology__name="ring", algorithm__local_steps=1)
    torch.testing.assert_close(algorithm.weights, torch.ones(4, dtype=torch.float64), rtol=0,
                               atol=1e-15)
    dpsgd, _, _ = _run("dpsgd", 3, algorithm__local_steps=1, algorithm__order="atc")
    torch.testing.assert_close(sgp.population.flat, dpsgd.population.flat, rtol=0, atol=1e-12)


def test_push_sum_conserves_mass_every_round():
    ctx, algorithm = build(_config("dfedsgpsm", algorithm__momentum=0.9, algorithm__rho=0.05,
                                   data__num_nodes=6))
    for t in range(6):
        algorithm.train(ctx, ctx.population.params, ctx.all_nodes(), t,
                        algorithm.node_lr(ctx, t))
        w = algorithm.weights.clone()
        mass = {k: (v * w.view(-1, *[1] * (v.dim() - 1))).sum(0) for k, v in
                ctx.population.params.items()}
        algorithm.mix(ctx, T.column_stochastic(ctx.schedule.at(t)))
        assert algorithm.weights.sum().item() == pytest.approx(6.0, abs=1e-12)
        w = algorithm.weights
        for k, v in ctx.population.params.items():
            after = (v * w.view(-1, *[1] * (v.dim() - 1))).sum(0)
            torch.testing.assert_close(after, mass[k], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", SYMMETRIC + PUSH_SUM)
def test_state_dict_round_trip_resumes_identically(name):
    ctx, algorithm = build(_config(name))
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    pop_state, alg_state = ctx.population.state_dict(), algorithm.state_dict()
    play(algorithm, ctx, 1, ctx.schedule.at(1))
    after = ctx.population.flat.clone()
    fresh_ctx, fresh = build(_config(name))
    fresh_ctx.population.load_state_dict(pop_state)
    fresh.load_state_dict(alg_state)
    play(fresh, fresh_ctx, 1, fresh_ctx.schedule.at(1))
    assert torch.equal(fresh_ctx.population.flat, after)


@pytest.mark.parametrize("name", SYMMETRIC)
def test_symmetric_algorithms_refuse_a_directed_topology(name):
    with pytest.raises(ConfigError, match=f"{name} needs doubly-stochastic mixing.*undirected"):
        build(small_config(algorithm__name=name, topology__name="random_out",
                           topology__k=2))


@pytest.mark.parametrize("name", PUSH_SUM)
def test_push_sum_algorithms_accept_directed_and_refuse_disconnected_graphs(name):
    build(_config(name, topology__name="random_out", topology__k=2, rounds=20))
    with pytest.raises(ConfigError, match="not strongly connected"):
        build(_config(name, topology__name="random_out", topology__k=1, data__num_nodes=40,
                      rounds=1))


@pytest.mark.parametrize("name, key, value", [
    ("dfedavg", "momentum", 0.9), ("dfedavgm", "rho", 0.05), ("dfedsam", "gossip_steps", 4),
    ("osgp", "momentum", 0.9), ("dfedsgpm", "rho", 0.05), ("sgp", "order", "atc"),
])
def test_an_option_the_algorithm_does_not_use_is_refused(name, key, value):
    with pytest.raises(ConfigError, match=f"algorithm.{key}: {name} does not use {key}"):
        build(_config(name, **{f"algorithm__{key}": value}))


# ---- faults and neighbour selection ----------------------------------------------------------

def _faulty(name: str, **overrides):
    return _config(name, topology__link_drop=0.3, topology__node_drop=0.25, data__num_nodes=6,
                   **({"topology__k": 2} if name in PUSH_SUM else {}), **overrides)


def _messages(graph: nx.Graph) -> tuple[np.ndarray, np.ndarray]:
    src, dst = map(np.array, zip(*graph.edges)) if graph.number_of_edges() else ([], [])
    if not graph.is_directed():
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


def test_push_sum_matches_algorithm_1_under_link_drops_and_offline_nodes():
    """Reference: offline nodes skip the local phase; a lost share stays with its sender."""
    overrides = {"algorithm__momentum": 0.9, "algorithm__rho": 0.05, "topology__k": 2,
                 "topology__link_drop": 0.3, "topology__node_drop": 0.25}
    ref = Reference("dfedsgpsm", **overrides)
    ctx, algorithm = build(_config("dfedsgpsm", **overrides))
    w = torch.ones(4, dtype=torch.float64)
    dropped = offline = 0
    for t in range(4):
        graph = ctx.schedule.at(t)
        faults = T.sample_faults(graph, 0.3, 0.25, seed=stream_seed(ref.cfg.seed, "faults", t))
        P = _push(graph)
        for i, j in graph.edges:
            if faults.links[j, i] or faults.nodes[i] or faults.nodes[j]:
                P[i, i] += P[j, i]
                P[j, i] = 0
                dropped += 1
        offline += int(faults.nodes.sum())
        w = ref.push_sum_round(t, w, P=P, offline=faults.nodes)
        report = play(algorithm, ctx, t, graph)
        assert report.copies_sent == graph.number_of_edges() - int(
            faults.lost(*_messages(graph)).sum())
        assert sorted(report.nodes.tolist()) == np.flatnonzero(~faults.nodes).tolist()
    assert dropped > 0 and offline > 0, "the seed must drop messages and nodes"
    torch.testing.assert_close(algorithm.weights, w, rtol=0, atol=1e-14)
    ref.assert_matches(ctx, w)


@pytest.mark.parametrize("name", ("dpsgd", "dfedavgm", "dfedsam_mgs", "dfedsgpsm"))
def test_offline_nodes_keep_their_model_and_push_sum_keeps_its_invariants(name):
    ctx, algorithm = build(_faulty(name))
    seen_offline = 0
    for t in range(5):
        graph = ctx.schedule.at(t)
        before = {k: v.clone() for k, v in ctx.population.params.items()}
        w_before = getattr(algorithm, "weights", None)
        play(algorithm, ctx, t, graph)
        offline = torch.as_tensor(ctx.faults(t, graph).nodes)
        seen_offline += int(offline.sum())
        for k, v in ctx.population.params.items():
            assert torch.equal(v[offline], before[k][offline])
        if w_before is not None:
            assert torch.equal(algorithm.weights[offline], w_before[offline])
            assert algorithm.weights.sum().item() == pytest.approx(6.0, abs=1e-9)
    assert seen_offline > 0


def test_push_sum_reaches_the_average_with_zero_gradients_despite_link_drops():
    ctx, algorithm = build(_config("sgp", data__num_nodes=8, topology__k=2,
                                   topology__link_drop=0.4))
    gen = torch.Generator().manual_seed(1)
    for v in ctx.population.params.values():
        v.copy_(torch.randn(v.shape, generator=gen, dtype=v.dtype))
    target = {k: v.mean(0) for k, v in ctx.population.params.items()}
    for t in range(200):
        graph = ctx.schedule.at(t)
        algorithm.mix(ctx, T.column_stochastic(graph, faults=ctx.faults(t, graph)))
        assert algorithm.weights.sum().item() == pytest.approx(8.0, abs=1e-9)
    for k, v in ctx.population.params.items():
        torch.testing.assert_close(v, target[k].expand_as(v), rtol=0, atol=1e-9)


def test_dfedsgpsm_s_picks_out_neighbours_by_loss():
    cfg = _config("dfedsgpsm_s", data__num_nodes=8, topology__k=1,
                  topology__selection="loss_based", algorithm__momentum=0.9)
    ctx, algorithm = build(cfg)
    assert algorithm.selection_losses() is None
    play(algorithm, ctx, 0, ctx.schedule.at(0, algorithm.selection_losses()))
    assert np.isfinite(algorithm.selection_losses()).all()
    algorithm.losses = torch.tensor([1.0] * 7 + [5.0], dtype=torch.float64)
    graph = ctx.schedule.at(1, algorithm.selection_losses())
    # |f_i - f_j| is zero except towards node 7: every other node must pick it
    assert all(list(graph.successors(i)) == [7] for i in range(7))
    assert _config("dfedsgpsm_s").topology.selection == "loss_softmax"  # implied by the name
    assert _config("dfedsgpsm").topology.selection == "random"
    soft = _config("dfedsgpsm_s", topology__selection="loss_softmax")
    assert soft.topology.selection == "loss_softmax"
    with pytest.raises(ConfigError, match="topology.selection: dfedsgpsm_s selects"):
        build(_config("dfedsgpsm_s", topology__selection="random"))  # explicit: not overridden
    with pytest.raises(ConfigError, match="topology.name: dfedsgpsm_s selects"):
        build(_config("dfedsgpsm_s", topology__name="exponential"))


def test_engine_passes_the_latest_losses_to_a_loss_based_schedule(tmp_path, monkeypatch):
    import p2pfl.engine as engine

    seen = []
    real_build = engine.build

    def spying_build(cfg, *args, **kwargs):
        ctx, algorithm = real_build(cfg, *args, **kwargs)
        schedule = ctx.schedule

        class Spy:
            needs_losses = True
            period = schedule.period

            def at(self, t, losses=None):
                seen.append(None if losses is None else losses.copy())
                return schedule.at(t, losses)

        ctx.schedule = Spy()
        return ctx, algorithm

    monkeypatch.setattr("p2pfl.engine.experiment.build", spying_build)
    history = engine.run(_config("dfedsgpsm_s", data__num_nodes=6, topology__k=2,
                                 topology__selection="loss_based", rounds=3), tmp_path / "r")
    assert seen[0] is None and len(seen) == 3
    # the losses seen by round t are the nodes' training losses of round t - 1
    assert np.mean(seen[1]) == pytest.approx(history[0]["train_loss"], rel=1e-12)
    assert np.mean(seen[2]) == pytest.approx(history[1]["train_loss"], rel=1e-12)


def test_selection_losses_survive_a_state_round_trip():
    cfg = _config("dfedsgpsm_s", data__num_nodes=6, topology__k=2,
                  topology__selection="loss_based", topology__node_drop=0.3)
    ctx, algorithm = build(cfg)
    for t in range(2):
        play(algorithm, ctx, t, ctx.schedule.at(t, algorithm.selection_losses()))
    state = algorithm.state_dict()
    assert "weights" in state and torch.isnan(state["losses"]).any(), "a node never trained"
    torch.testing.assert_close(state["losses"], algorithm.losses, rtol=0, atol=0, equal_nan=True)
    fresh_ctx, fresh = build(cfg)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.selection_losses(), algorithm.selection_losses())
