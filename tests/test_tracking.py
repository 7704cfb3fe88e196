"""Gradient tracking (DSGT / GT-DSGD / DIGing, Push-DIGing, Push-Pull / AB) against the papers'
updates.

The local phase is replaced by a quadratic one, f_i(x) = a_i / 2 ||x - b_i||^2 per node, whose
gradient is known in closed form, so that every round can be recomputed by hand from the papers'
equations (numpy, float64), the tracker invariant checked against gradients computed here, and
the exact minimum x* = sum_i a_i b_i / sum_i a_i compared with where each method ends.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from torch import nn

import topologies as T
from algorithms.choco import flatten
from p2pfl.config import ConfigError
from p2pfl.core.trainer import VectorizedTrainer
from p2pfl.engine import build, run
from p2pfl.objects import Parts
from tests.conftest import play, skip_plots, small_config, strip_times

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny float64 problems
TRACKING = ("dsgt", "push_diging", "push_pull")


class QuadraticTrainer(VectorizedTrainer):
    """K SGD steps on f_i(x) = a_i / 2 ||x - b_i||^2 (plus the terms' linear part)."""

    def __init__(self, a: torch.Tensor, b: dict[str, torch.Tensor]) -> None:
        self.a, self.b = a, b

    def train(self, params, nodes, plan, solver, lr, terms=None):
        for _ in range(int(plan.node_steps(nodes).max())):
            for k, x in params.items():
                scale = self.a[nodes].view(-1, *[1] * (x.dim() - 1))
                g = scale * (x - self.b[k][nodes])
                for correction in terms.corrections if terms is not None else ():
                    g = correction.apply({k: g}, {k: x})[k]
                x.sub_(lr.view_as(scale) * g)
        return torch.zeros(len(nodes), dtype=lr.dtype)


def quadratic_run(name: str, graph: nx.Graph, **overrides):
    """A run of `name` on `graph` (3 + nodes) whose local phase is the quadratic one, on a linear
    model (7850 parameters); returns (ctx, algorithm, a, b as [n, d] numpy)."""
    n = graph.number_of_nodes()
    cfg = small_config(**{"algorithm__name": name, "data__num_nodes": n, "algorithm__lr": 0.1,
                          "algorithm__lr_decay": 1.0,
                          "algorithm__local_steps": 1, **overrides})
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    ctx, algorithm = build(cfg, parts=Parts(schedule=T.as_schedule(graph), model=model))
    gen = torch.Generator().manual_seed(5)
    a = torch.rand(n, generator=gen, dtype=torch.float64) + 0.5
    b = {k: torch.randn(v.shape, generator=gen, dtype=torch.float64)
         for k, v in ctx.population.params.items()}
    ctx.trainer = QuadraticTrainer(a, b)
    return ctx, algorithm, a.numpy(), flatten(b).numpy()


def directed_triangle() -> nx.DiGraph:
    """0 -> 1 -> 2 -> 0 and 0 -> 2: strongly connected, degrees unequal (Push-Sum w moves)."""
    return nx.DiGraph([(0, 1), (1, 2), (2, 0), (0, 2)])


def reference(name: str, order: str, graph: nx.Graph, x0: np.ndarray, a: np.ndarray,
              b: np.ndarray, lr: float, rounds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The papers' iterations by hand: per round (the models x at which the round's gradient
    is taken, the trackers y^k that round steps along)."""
    n = len(a)
    grad = lambda x: a[:, None] * (x - b)  # noqa: E731
    P = np.zeros((n, n))
    for i in range(n):  # column-stochastic push: 1 / (d_out(i) + 1) to itself and successors
        out = list(graph.successors(i)) if graph.is_directed() else list(graph.neighbors(i))
        for j in [i, *out]:
            P[j, i] = 1 / (len(out) + 1)
    R = np.zeros((n, n))
    for j in range(n):  # row-stochastic pull: 1 / (d_in(j) + 1) from itself and predecessors
        into = list(graph.predecessors(j)) if graph.is_directed() else list(graph.neighbors(j))
        for i in [j, *into]:
            R[j, i] = 1 / (len(into) + 1)
    W = np.zeros((n, n))
    if not graph.is_directed():
        for i, j in graph.edges:  # Metropolis-Hastings
            W[i, j] = W[j, i] = 1 / (1 + max(graph.degree[i], graph.degree[j]))
        W += np.diag(1 - W.sum(1))
    mix_x, mix_y = {"dsgt": (W, W), "push_pull": (R, P), "push_diging": (P, P)}[name]
    u, v = x0.copy(), np.ones(n)
    x = x0.copy()
    g_old, y = np.zeros_like(x0), np.zeros_like(x0)
    seen = []
    for _ in range(rounds):
        g = grad(x)
        y = y + g - g_old  # y^k = M y^{k-1} + g(x^k) - g(x^{k-1}); y^0 = g(x^0)
        if order == "atc_xy":  # GT-DSGD: v^k = M (v^{k-1} + g(x^k) - g(x^{k-1})), then the step
            y = mix_y @ y
        seen.append((x.copy(), y.copy()))
        if name == "push_diging":
            u = P @ (u - lr * y)
            v = P @ v
            x = u / v[:, None]
        elif order in ("atc", "atc_xy"):
            x = mix_x @ (x - lr * y)
        else:
            x = mix_x @ x - lr * y
        y, g_old = (y if order == "atc_xy" else mix_y @ y), g
    return seen


CASES = [("dsgt", "atc", nx.path_graph(3)), ("dsgt", "cta", nx.path_graph(3)),
         ("dsgt", "atc_xy", nx.path_graph(3)),
         ("push_diging", "atc", directed_triangle()),
         ("push_pull", "atc", directed_triangle()), ("push_pull", "cta", directed_triangle())]


@pytest.mark.parametrize(("name", "order", "graph"), CASES)
def test_each_round_is_the_papers_and_the_trackers_average_the_current_gradients(
        name, order, graph):
    """3 nodes, 6 rounds: the models and trackers equal the hand iteration at every round, and
    mean_i y_i^k = mean_i grad f_i(x_i^k) at the models of round k (a tracker one step behind,
    g(x^{k-1}) in place of g(x^k), fails both)."""
    extra = {"algorithm__order": order} if name != "push_diging" else {}
    ctx, algorithm, a, b = quadratic_run(name, graph, **extra)
    x0 = flatten(ctx.population.params).numpy().copy()
    expected = reference(name, order, graph, x0, a, b, 0.1, 6)
    for t, (x, y) in enumerate(expected):
        np.testing.assert_allclose(flatten(ctx.population.params).numpy(), x, atol=1e-12)
        play(algorithm, ctx, t, graph)
        tracked = flatten(algorithm.trackers.y).numpy()  # after mixing: M y^k
        gradients = a[:, None] * (x - b)
        np.testing.assert_allclose(tracked.mean(0), gradients.mean(0), atol=1e-12)
        np.testing.assert_allclose(flatten(algorithm.trackers.g).numpy(), gradients, atol=1e-12)
        assert np.abs(y.mean(0) - gradients.mean(0)).max() < 1e-12
        assert algorithm.metrics(ctx)["tracking_error"] < 1e-12


def test_gt_dsgd_is_algorithm_1_of_xin_khan_kar_and_neither_other_order():
    """GT-DSGD (Xin, Khan, Kar 2021, Algorithm 1) in its own indexing, on the 3-node path with
    Metropolis-Hastings W = [[2/3, 1/3, 0], [1/3, 1/3, 1/3], [0, 1/3, 2/3]]:
    y_{k+1} = W (y_k + g_k - g_{k-1}), x_{k+1} = W (x_k - lr y_{k+1}), y_0 = 0, g_{-1} = 0,
    g_k the gradient at x_k. order = "atc_xy" follows it for 4 rounds (1e-12); DSGT
    ("atc") and DIGing ("cta"), which mix the gradient difference after the tracker and step
    before mixing it, are off by more than 1e-3 from round 2 on."""
    W = np.array([[2, 1, 0], [1, 1, 1], [0, 1, 2]]) / 3
    lr, rounds = 0.1, 4
    runs = {}
    for order in ("atc_xy", "atc", "cta"):
        ctx, algorithm, a, b = quadratic_run("dsgt", nx.path_graph(3),
                                             algorithm__order=order)
        models = []
        for t in range(rounds):
            play(algorithm, ctx, t, nx.path_graph(3))
            models.append(flatten(ctx.population.params).numpy().copy())
        runs[order] = models
    x = flatten(quadratic_run("dsgt", nx.path_graph(3))[0].population.params).numpy().copy()
    y, g_prev = np.zeros_like(x), np.zeros_like(x)
    for k in range(rounds):
        g = a[:, None] * (x - b)  # g_k at x_k
        y = W @ (y + g - g_prev)  # y_{k+1}
        x = W @ (x - lr * y)  # x_{k+1}
        g_prev = g
        np.testing.assert_allclose(runs["atc_xy"][k], x, rtol=0, atol=1e-12)
        if k >= 1:
            assert np.abs(runs["atc"][k] - x).max() > 1e-3
            assert np.abs(runs["cta"][k] - x).max() > 1e-3


def _faulty_rounds_keep_the_invariant_and_reach_the_minimum(ctx, algorithm, graph, a, b,
                                                            rounds: int) -> None:
    """`rounds` rounds with the run's faults: the trackers' mass is the gradients' every round
    (tracking_error), some node was offline, and the run ends at sum a_i b_i / sum a_i."""
    offline = 0
    for t in range(rounds):
        faults = ctx.faults(t, graph)
        offline += int(faults.nodes.sum())
        algorithm.round(ctx, t, graph, faults)
        assert algorithm.metrics(ctx)["tracking_error"] < 1e-10
    optimum = (a[:, None] * b).sum(0) / a.sum()
    assert offline > 0
    assert np.abs(flatten(ctx.population.params).numpy() - optimum).max() < 1e-8


def test_gt_dsgd_with_offline_nodes_keeps_the_invariant_and_reaches_the_minimum():
    """20 % of the nodes offline a round (they keep x, v and g): mean v = mean g every round,
    and the exact minimum sum a_i b_i / sum a_i at the end (a 5-cycle, 300 rounds)."""
    graph = nx.cycle_graph(5)
    ctx, algorithm, a, b = quadratic_run("dsgt", graph, algorithm__order="atc_xy",
                                         topology__node_drop=0.2)
    _faulty_rounds_keep_the_invariant_and_reach_the_minimum(ctx, algorithm, graph, a, b, 300)


def test_push_pull_refuses_the_gt_dsgd_order():
    with pytest.raises(ConfigError, match="^algorithm.order: push_pull has no 'atc_xy' order"):
        build(small_config(algorithm__name="push_pull", algorithm__order="atc_xy",
                           topology__name="exponential", topology__directed=True))


@pytest.mark.parametrize("name", [*TRACKING, "dpsgd", "sgp"])
def test_tracking_reaches_the_exact_minimum_where_plain_gossip_keeps_a_bias(name):
    """Heterogeneous minima b_i and curvatures a_i on 5 nodes, constant lr: the tracking
    methods end at x* = sum a_i b_i / sum a_i (every node, 1e-9); D-PSGD and SGP stop short."""
    graph = nx.cycle_graph(5) if name in ("dsgt", "dpsgd") else nx.DiGraph(
        [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 3)])
    ctx, algorithm, a, b = quadratic_run(name, graph)
    for t in range(400):
        play(algorithm, ctx, t, graph)
    x = flatten(ctx.population.params).numpy()  # the models (Push-Sum: the de-biased z_i)
    optimum = (a[:, None] * b).sum(0) / a.sum()
    error = np.abs(x - optimum).max()
    if name in TRACKING:
        assert error < 1e-9
    else:
        assert error > 1e-3


@pytest.mark.parametrize("name", TRACKING)
def test_on_the_star_the_hub_is_a_peer_and_tracking_still_reaches_the_exact_minimum(name):
    """The star as a decentralized graph (the hub trains too; no server, no sampling)."""
    graph = nx.star_graph(4)
    ctx, algorithm, a, b = quadratic_run(name, graph)
    for t in range(400):
        play(algorithm, ctx, t, graph)
    optimum = (a[:, None] * b).sum(0) / a.sum()
    assert np.abs(flatten(ctx.population.params).numpy() - optimum).max() < 1e-9


def test_push_diging_with_lost_messages_and_offline_nodes_keeps_the_invariant_and_the_optimum():
    """Faults: the sender keeps a lost share and an offline node keeps its gradient, so the
    trackers' mass stays the gradients' mass; the run still ends at x*."""
    graph = nx.DiGraph([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 3), (2, 0)])
    ctx, algorithm, a, b = quadratic_run("push_diging", graph, topology__link_drop=0.3,
                                         topology__node_drop=0.2)
    _faulty_rounds_keep_the_invariant_and_reach_the_minimum(ctx, algorithm, graph, a, b, 600)


def test_push_pull_is_push_diging_on_a_regular_digraph():
    """On the directed exponential graph every in- and out-degree is equal, so R = C and the
    Push-Sum weights stay 1: two code paths, one sequence (real training, float64)."""
    runs = {}
    for name in ("push_pull", "push_diging"):
        cfg = small_config(algorithm__name=name, topology__name="exponential",
                           algorithm__local_steps=2, rounds=3)
        ctx, algorithm = build(cfg)
        for t in range(3):
            play(algorithm, ctx, t, ctx.schedule.at(t))
        runs[name] = flatten(ctx.population.params)
    torch.testing.assert_close(runs["push_pull"], runs["push_diging"], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("key", "value", "match"), [
    ("algorithm__clip_norm", 1.0, "^algorithm.clip_norm: dsgt steps along its tracker"),
    ("engine__executor", "loop", "^engine.executor: dsgt runs on the 'vectorized' executor"),
])
def test_tracking_refuses_what_would_break_the_tracker(key, value, match):
    with pytest.raises(ConfigError, match=match):
        build(small_config(algorithm__name="dsgt", **{key: value}))


def test_tracking_sends_two_copies_a_message_and_push_diging_its_weight(tmp_path, monkeypatch):
    skip_plots(monkeypatch)
    cfg = small_config(algorithm__name="push_diging", topology__name="exponential", rounds=1,
                       network__enabled=True)
    record = run(cfg, tmp_path / "run")[0]
    ctx, algorithm = build(cfg)
    d = ctx.population.num_params
    messages = T.messages(ctx.schedule.at(0))[0].size
    assert record["messages"] == 2 * messages
    assert record["bytes_sent"] == messages * (2 * d * 8 + 8)
    assert ctx.clock.message_bytes == 2 * d * 8 + 8
    assert strip_times([record])[0]["tracking_error"] < 1e-12


def test_gt_dsgd_sends_one_copy_in_each_of_two_exchanges(tmp_path, monkeypatch):
    """GT-DSGD mixes the tracker before the model steps: two exchanges of one copy a round (the
    clock waits for both), against DSGT's one exchange of two copies; the same bytes."""
    skip_plots(monkeypatch)
    sent = {}
    for order in ("atc", "atc_xy"):
        cfg = small_config(algorithm__name="dsgt", algorithm__order=order, rounds=1,
                           network__enabled=True)
        record = run(cfg, tmp_path / order)[0]
        ctx, _ = build(cfg)
        d = ctx.population.num_params
        sent[order] = record["bytes_sent"]
        copies, exchanges = (2, 1) if order == "atc" else (1, 2)
        assert (ctx.clock.message_bytes, ctx.clock.exchanges) == (copies * d * 8, exchanges)
    assert sent["atc"] == sent["atc_xy"]
