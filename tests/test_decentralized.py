"""The decentralized family against per-node references written from the papers (float64).

The references below loop over nodes with `torch.func.functional_call` on an `nn.Module`, build
the mixing matrices from the graph's edges by hand, and use the papers' own forms: heavy ball on
iterates for the symmetric family (DFedAvgM), numerators x and weights w with a momentum buffer
for the Push-Sum family (DFedSGPSM Algorithm 1).
"""

from __future__ import annotations

import networkx as nx
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

import topologies as T
from p2pfl.config import ConfigError
from p2pfl.engine import build
from p2pfl.models import build_model
from tests.conftest import small_config

SYMMETRIC = ("dpsgd", "dfedavg", "dfedavgm", "dfedsam", "dfedsam_mgs")
PUSH_SUM = ("sgp", "osgp", "dfedsgpm", "dfedsgpsm")
TOL = 1e-10


def _config(name: str, **overrides):
    """4 nodes; a ring (MH weights 1/3, zeros off the ring) or random 1-out digraphs."""
    topo = ({"topology__name": "ring"} if name in SYMMETRIC else
            {"topology__name": "random_out", "topology__out_degree": 1})
    base = {"algorithm__name": name, "data__num_nodes": 4, "rounds": 20, **topo}
    return small_config(**{**base, **overrides})


def _run(name: str, rounds: int = 2, **overrides):
    ctx, algorithm = build(_config(name, **overrides))
    reports = [algorithm.round(ctx, t, ctx.schedule.at(t)) for t in range(rounds)]
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
        ctx, _ = build(_config(name, **overrides))
        self.ctx, self.cfg = ctx, ctx.cfg
        self.a = ctx.cfg.algorithm
        self.model = build_model(ctx.cfg.model.name, ctx.data.input_shape,
                                 ctx.data.num_classes).to(dtype=torch.float64)
        self.n = ctx.num_nodes
        self.x = [{k: v[i].clone() for k, v in ctx.population.params.items()}
                  for i in range(self.n)]

    def batches(self, t: int, i: int):
        plan = self.ctx.data.plan(self.cfg.seed, t, self.a.batch_size, self.a.local_epochs,
                                  self.a.local_steps)
        for step in range(plan.steps):
            xb, yb = self.ctx.data.batch(plan, step, torch.tensor([i]))
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

    def push_sum_round(self, t: int, w: torch.Tensor) -> torch.Tensor:
        """DFedSGPSM Algorithm 1 on numerators; also checks its Eq. 3 closed form."""
        a, out = self.a, []
        for i in range(self.n):
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
        P = _push(self.ctx.schedule.at(t))
        self.x = self.mix(P, out)
        return P @ w

    def assert_matches(self, ctx, w: torch.Tensor | None = None) -> None:
        for k, v in ctx.population.params.items():
            for i in range(self.n):
                expected = self.x[i][k] if w is None else self.x[i][k] / w[i]
                torch.testing.assert_close(v[i], expected, rtol=0, atol=TOL)


@pytest.mark.parametrize("name, overrides", [
    ("dfedavg", {}),
    ("dfedavgm", {"algorithm__momentum": 0.9}),
    ("dfedavgm", {"algorithm__momentum": 0.5, "algorithm__momentum_form": "dampened"}),
    ("dfedsam", {"algorithm__rho": 0.05}),
    ("dfedsam_mgs", {"algorithm__rho": 0.05, "algorithm__gossip_steps": 3}),
    ("dpsgd", {"algorithm__local_steps": 1, "algorithm__dpsgd_order": "atc"}),
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
    atc, _, _ = _run("dpsgd", 3, algorithm__local_steps=1, algorithm__dpsgd_order="atc")
    assert (atc.population.flat - ctx.population.flat).abs().max() > 1e-6


@pytest.mark.parametrize("name, overrides", [
    ("sgp", {"algorithm__local_steps": 1}),
    ("osgp", {}),
    ("dfedsgpm", {"algorithm__momentum": 0.9}),
    ("dfedsgpsm", {"algorithm__momentum": 0.9, "algorithm__rho": 0.05}),
    ("dfedsgpsm", {"algorithm__momentum": 0.5, "algorithm__rho": 0.05,
                   "algorithm__momentum_form": "dampened"}),
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


@pytest.mark.parametrize("left, right", [
    (("dfedsam", {"algorithm__rho": 0.0}), ("dfedavg", {})),
    (("dfedavgm", {"algorithm__momentum": 0.0}), ("dfedavg", {})),
    (("dfedsam_mgs", {"algorithm__rho": 0.05, "algorithm__gossip_steps": 1}),
     ("dfedsam", {"algorithm__rho": 0.05})),
    (("dfedsgpsm", {"algorithm__rho": 0.0, "algorithm__momentum": 0.9}),
     ("dfedsgpm", {"algorithm__momentum": 0.9})),
    (("dfedsgpm", {"algorithm__momentum": 0.0}), ("osgp", {})),
    (("osgp", {"algorithm__local_steps": 1}), ("sgp", {"algorithm__local_steps": 1})),
])
def test_reduction_identities_hold_exactly(left, right):
    (ctx_a, alg_a, _), (ctx_b, alg_b, _) = _run(left[0], **left[1]), _run(right[0], **right[1])
    assert torch.equal(ctx_a.population.flat, ctx_b.population.flat)
    assert alg_a.state_dict().keys() == alg_b.state_dict().keys()
    for key, value in alg_a.state_dict().items():
        assert torch.equal(value, alg_b.state_dict()[key])


def test_sgp_on_doubly_stochastic_graph_is_dpsgd_adapt_then_combine():
    """On a ring the push rule gives the MH matrix (1/3): w stays 1 and SGP is D-PSGD (ATC)."""
    sgp, algorithm, _ = _run("sgp", 3, topology__name="ring", algorithm__local_steps=1)
    torch.testing.assert_close(algorithm.weights, torch.ones(4, dtype=torch.float64), rtol=0,
                               atol=1e-15)
    dpsgd, _, _ = _run("dpsgd", 3, algorithm__local_steps=1, algorithm__dpsgd_order="atc")
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
    algorithm.round(ctx, 0, ctx.schedule.at(0))
    pop_state, alg_state = ctx.population.state_dict(), algorithm.state_dict()
    algorithm.round(ctx, 1, ctx.schedule.at(1))
    after = ctx.population.flat.clone()
    fresh_ctx, fresh = build(_config(name))
    fresh_ctx.population.load_state_dict(pop_state)
    fresh.load_state_dict(alg_state)
    fresh.round(fresh_ctx, 1, fresh_ctx.schedule.at(1))
    assert torch.equal(fresh_ctx.population.flat, after)


@pytest.mark.parametrize("name", SYMMETRIC)
def test_symmetric_algorithms_refuse_a_directed_topology(name):
    with pytest.raises(ConfigError, match=f"{name} needs doubly-stochastic mixing.*undirected"):
        build(small_config(algorithm__name=name, topology__name="random_out",
                           topology__out_degree=2))


@pytest.mark.parametrize("name", PUSH_SUM)
def test_push_sum_algorithms_accept_directed_and_refuse_disconnected_graphs(name):
    build(small_config(algorithm__name=name, topology__name="random_out",
                       topology__out_degree=2, rounds=20))
    with pytest.raises(ConfigError, match="not strongly connected"):
        build(small_config(algorithm__name=name, topology__name="random_out",
                           topology__out_degree=1, data__num_nodes=40, rounds=1))


@pytest.mark.parametrize("name, key, value", [
    ("dfedavg", "momentum", 0.9), ("dfedavgm", "rho", 0.05), ("dfedsam", "gossip_steps", 4),
    ("osgp", "momentum", 0.9), ("dfedsgpm", "rho", 0.05), ("sgp", "dpsgd_order", "atc"),
])
def test_an_option_the_algorithm_does_not_use_is_refused(name, key, value):
    with pytest.raises(ConfigError, match=f"algorithm.{key}: {name} does not use {key}"):
        build(_config(name, **{f"algorithm__{key}": value}))
