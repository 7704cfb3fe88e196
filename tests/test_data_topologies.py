"""Topologies built from the data: D-Cliques (with dpsgd's clique averaging) and STL-FW."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

import topologies as T
from p2pfl.config import ConfigError
from p2pfl.core.models import build_model
from p2pfl.engine import build
from tests.conftest import play, small_config


def one_class_each(n: int, classes: int = 10, seed: int = 0) -> np.ndarray:
    """[n, classes] counts: node i holds 50..149 samples of one class, n / classes nodes a class
    (the strongest label skew)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((n, classes), dtype=np.int64)
    counts[np.arange(n), np.arange(n) % classes] = rng.integers(50, 150, n)
    return counts


def two_classes_each(n: int, classes: int = 10, seed: int = 0) -> np.ndarray:
    """[n, classes] counts: two random classes a node, random amounts (shards-like skew)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((n, classes), dtype=np.int64)
    for i in range(n):
        counts[i, rng.choice(classes, 2, replace=False)] = rng.integers(100, 400, 2)
    return counts


def cliques_of(G: nx.Graph) -> np.ndarray:
    return np.array([G.nodes[i]["clique"] for i in range(G.number_of_nodes())])


# ---------------------------------------------------------------- D-Cliques

def test_skew_is_the_l1_distance_to_the_global_distribution() -> None:
    counts = np.array([[3, 1], [0, 4], [2, 2]])  # global (5, 7) / 12
    skews = T.clique_skews(counts, np.array([0, 1, 1]))
    np.testing.assert_allclose(skews, [abs(3 / 4 - 5 / 12) + abs(1 / 4 - 7 / 12),
                                       abs(2 / 8 - 5 / 12) + abs(6 / 8 - 7 / 12)], rtol=0,
                               atol=1e-15)


def test_greedy_swaps_bring_every_clique_near_the_global_distribution() -> None:
    counts = two_classes_each(100)
    G = T.d_cliques(counts, 10, seed=0)
    swapped = T.clique_skews(counts, cliques_of(G))
    start = T.clique_skews(counts, cliques_of(T.d_cliques(counts, 10, steps=0, seed=0)))
    random = T.clique_skews(counts, np.random.default_rng(1).permutation(100) % 10)
    assert swapped.mean() < 0.2 * random.mean() and swapped.mean() < 0.2 * start.mean()
    assert swapped.max() < random.min()
    # one class a node, as many nodes of each class as cliques: every clique can hold one of
    # each class, and the swaps find that grouping
    counts = np.repeat(np.eye(10, dtype=np.int64), 10, axis=0) * 7
    assert T.clique_skews(counts, cliques_of(T.d_cliques(counts, 10, seed=3))).max() == 0.0


def test_clique_sizes_and_the_remainder() -> None:
    G = T.d_cliques(two_classes_each(23), clique_size=5, seed=0)
    cliques = cliques_of(G)
    assert sorted(np.bincount(cliques).tolist()) == [3, 5, 5, 5, 5]
    for c in range(5):
        members = np.flatnonzero(cliques == c).tolist()
        assert all(G.has_edge(i, j) for i, j in itertools.combinations(members, 2))
    assert nx.is_connected(G)


def inter_clique_pairs(G: nx.Graph) -> list[tuple[int, int]]:
    c = cliques_of(G)
    return sorted(tuple(sorted((c[i], c[j]))) for i, j in G.edges if c[i] != c[j])


def test_fully_connected_cliques_at_100_nodes() -> None:
    counts = one_class_each(100)
    G = T.d_cliques(counts, 10, "fully", seed=0)
    pairs = inter_clique_pairs(G)
    assert pairs == sorted(itertools.combinations(range(10), 2))  # each pair joined exactly once
    assert G.number_of_edges() == 10 * 45 + 45 == 495  # vs 4950: 90 % of the edges saved
    # the 9 inter-clique edges of a clique end at 9 distinct nodes: degrees 9 and 10 only
    degrees = np.array([d for _, d in G.degree()])
    assert np.bincount(degrees).tolist()[9:] == [10, 90]
    assert nx.is_connected(G)


def test_ring_of_cliques() -> None:
    G = T.d_cliques(one_class_each(60), 10, "ring", seed=0)
    assert inter_clique_pairs(G) == sorted(tuple(sorted(e)) for e in nx.cycle_graph(6).edges)
    assert G.number_of_edges() == 6 * 45 + 6
    assert max(d for _, d in G.degree()) == 10  # the two ring edges of a clique: two nodes
    assert nx.is_connected(G)
    assert inter_clique_pairs(T.d_cliques(one_class_each(20), 10, "ring", seed=0)) == [(0, 1)]


def test_small_world_links_cliques_at_power_of_two_offsets() -> None:
    counts = one_class_each(1000)  # 100 cliques: offsets 2^s and 2^s + 1 for s = 0..6
    G = T.d_cliques(counts, 10, "small_world", seed=0)
    c = 100
    links = set(inter_clique_pairs(G))
    near = {tuple(sorted((a, (a + d) % c))) for a in range(c) for s in range(7)
            for d in (2**s, 2**s + 1)}
    assert links == near
    assert nx.is_connected(G)
    # 2783 inter-clique edges against the 4950 of "fully": 7283 edges against 9450 (23 % fewer)
    assert G.number_of_edges() == 7283
    assert T.d_cliques(counts, 10, "fully", seed=0).number_of_edges() == 100 * 45 + 4950


def test_d_cliques_is_seeded() -> None:
    counts = two_classes_each(50)
    for inter in T.INTER_CLIQUE:
        a, b = (T.d_cliques(counts, 5, inter, steps=300, seed=7) for _ in range(2))
        assert set(a.edges) == set(b.edges) and (cliques_of(a) == cliques_of(b)).all()
    assert set(T.d_cliques(counts, 5, seed=8).edges) != set(T.d_cliques(counts, 5, seed=7).edges)


def test_d_cliques_mixing_is_metropolis_hastings() -> None:
    G = T.d_cliques(one_class_each(30), 10, seed=0)
    W = T.doubly_stochastic(G)
    for i, j in G.edges:
        assert W[i, j] == 1 / (1 + max(G.degree[i], G.degree[j]))


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"class_counts": np.ones(5)}, "class_counts"),
    ({"class_counts": -np.ones((4, 2))}, "class_counts"),
    ({"class_counts": np.array([[1, 0], [0, 0]])}, "class_counts"),
    ({"clique_size": 0}, "clique_size"),
    ({"clique_size": 11}, "clique_size"),
    ({"inter": "star"}, "inter"),
    ({"steps": -1}, "steps"),
])
def test_d_cliques_refuses_bad_input(kwargs, field) -> None:
    args = {"class_counts": one_class_each(10), **kwargs}
    with pytest.raises(T.ParameterError, match=f"^{field} ") as err:
        T.d_cliques(**args)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- clique averaging in dpsgd

LR = 0.1
CLIQUES = nx.Graph([(0, 1), (2, 3), (1, 2)])  # cliques {0, 1} and {2, 3}, one bridge
nx.set_node_attributes(CLIQUES, {0: 0, 1: 0, 2: 1, 3: 1}, "clique")
# Metropolis-Hastings on CLIQUES: degrees 1, 2, 2, 1
MH = torch.tensor([[2, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 2]],
                  dtype=torch.float64) / 3


def _build(**overrides):
    return build(small_config(algorithm__name="dpsgd", data__num_nodes=4, algorithm__lr=LR,
                              algorithm__lr_decay=0.9, algorithm__local_steps=1,
                              algorithm__order="atc", algorithm__clique_averaging=True,
                              **overrides))


def _gradients(ctx, algorithm, t: int, x: list[dict]) -> list[dict]:
    """Each node's gradient at x[i] on its round-t minibatch, one node at a time (autograd)."""
    a = algorithm.cfg
    model = build_model("mlp", ctx.data.input_shape, ctx.data.num_classes)  # small_config's
    plan = ctx.data.plan(ctx.seed, t, a.batch_size, a.local_epochs, a.local_steps)
    out = []
    for i in range(4):
        batch = ctx.data.batch(plan, 0, torch.tensor([i]))
        leaves = {k: v.detach().clone().requires_grad_() for k, v in x[i].items()}
        loss = F.cross_entropy(functional_call(model.double(), leaves, (batch.x[0],)), batch.y[0])
        out.append(dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())))))
    return out


def _rows(ctx) -> list[dict]:
    return [{k: v[i].clone() for k, v in ctx.population.params.items()} for i in range(4)]


def _assert_rows(ctx, expected: list[dict]) -> None:
    for k, v in ctx.population.params.items():
        for i in range(4):
            torch.testing.assert_close(v[i], expected[i][k], rtol=0, atol=1e-12)


def test_clique_averaging_steps_along_the_clique_mean_gradient() -> None:
    ctx, algorithm = _build()
    x = _rows(ctx)
    for t in range(2):
        g = _gradients(ctx, algorithm, t, x)
        mean = [{k: (g[c][k] + g[c + 1][k]) / 2 for k in g[0]} for c in (0, 0, 2, 2)]
        assert (mean[0]["fc1.weight"] - g[0]["fc1.weight"]).abs().max() > 1e-6
        y = [{k: x[i][k] - LR * 0.9**t * mean[i][k] for k in x[i]} for i in range(4)]
        x = [{k: sum(MH[i, j] * y[j][k] for j in range(4)) for k in y[0]} for i in range(4)]
        report = algorithm.round(ctx, t, CLIQUES, T.Faults.none(4))
        assert report.copies_sent == 6 + 4  # gossip on 3 edges, gradients on 2 clique edges
    _assert_rows(ctx, x)


def test_persistent_momentum_and_weight_decay_follow_torch_sgd() -> None:
    ctx, algorithm = _build(algorithm__persistent_momentum=0.5, algorithm__weight_decay=0.01)
    x, b = _rows(ctx), None
    for t in range(3):
        g = _gradients(ctx, algorithm, t, x)
        d = [{k: (g[c][k] + g[c + 1][k]) / 2 + 0.01 * x[i][k] for k in g[0]}
             for i, c in enumerate((0, 0, 2, 2))]
        b = d if b is None else [{k: 0.5 * b[i][k] + d[i][k] for k in d[i]} for i in range(4)]
        y = [{k: x[i][k] - LR * 0.9**t * b[i][k] for k in x[i]} for i in range(4)]
        x = [{k: sum(MH[i, j] * y[j][k] for j in range(4)) for k in y[0]} for i in range(4)]
        algorithm.round(ctx, t, CLIQUES, T.Faults.none(4))
    _assert_rows(ctx, x)


@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_an_offline_clique_mate_is_left_out_of_the_mean(momentum) -> None:
    ctx, algorithm = _build(algorithm__persistent_momentum=momentum)
    x = _rows(ctx)
    g = _gradients(ctx, algorithm, 0, x)
    faults = T.Faults(np.zeros((4, 4), dtype=bool), np.array([False, True, False, False]))
    report = algorithm.round(ctx, 0, CLIQUES, faults)
    y0 = {k: x[0][k] - LR * g[0][k] for k in x[0]}  # alone: its own gradient, no neighbour
    y = [{k: x[i][k] - LR * (g[2][k] + g[3][k]) / 2 for k in x[i]} for i in (2, 3)]
    mixed = [{k: (y[0][k] + y[1][k]) / 2 for k in y[0]}] * 2  # MH on the edge (2, 3) alone
    _assert_rows(ctx, [y0, x[1], *mixed])  # the first buffer is the first gradient
    assert report.copies_sent == 2 + 2
    if momentum:  # the offline node's buffer stays 0, the others hold their step's gradient
        b = algorithm.momentum_buffer["fc1.weight"]
        assert b[1].abs().max() == 0 and b[0].abs().max() > 0
        torch.testing.assert_close(b[0], g[0]["fc1.weight"], rtol=0, atol=1e-10)


def test_the_momentum_buffer_is_state_a_resume_restores() -> None:
    ctx, algorithm = _build(algorithm__persistent_momentum=0.5)
    algorithm.round(ctx, 0, CLIQUES, T.Faults.none(4))
    state, rows = algorithm.state_dict(), _rows(ctx)
    algorithm.round(ctx, 1, CLIQUES, T.Faults.none(4))
    resumed_ctx, resumed = _build(algorithm__persistent_momentum=0.5)
    resumed.load_state_dict(state)
    for k, v in resumed_ctx.population.params.items():
        v.copy_(torch.stack([row[k] for row in rows]))
    resumed.round(resumed_ctx, 1, CLIQUES, T.Faults.none(4))
    _assert_rows(resumed_ctx, _rows(ctx))
    # without the buffer the second round differs: the test sees the state
    fresh_ctx, fresh = _build(algorithm__persistent_momentum=0.5)
    for k, v in fresh_ctx.population.params.items():
        v.copy_(torch.stack([row[k] for row in rows]))
    fresh.round(fresh_ctx, 1, CLIQUES, T.Faults.none(4))
    assert (fresh_ctx.population.params["fc1.weight"] - ctx.population.params["fc1.weight"]
            ).abs().max() > 1e-6


def test_clique_averaging_needs_cliques_and_one_step() -> None:
    ctx, algorithm = _build()
    with pytest.raises(ConfigError, match="^algorithm.clique_averaging: needs a topology whose "
                                          "nodes carry a 'clique' attribute"):
        algorithm.round(ctx, 0, nx.cycle_graph(4), T.Faults.none(4))
    for key, value in (("clique_averaging", True), ("persistent_momentum", 0.9)):
        with pytest.raises(ConfigError, match=f"^algorithm.{key}: .*local_steps = 1"):
            build(small_config(algorithm__name="dpsgd", **{f"algorithm__{key}": value}))


# ---------------------------------------------------------------- STL-FW

def proportions(counts: np.ndarray) -> np.ndarray:
    return counts / counts.sum(axis=1, keepdims=True)


def test_stl_fw_is_doubly_stochastic_within_its_budget() -> None:
    pi = proportions(two_classes_each(40))
    for budget in (1, 2, 4, 7):
        W = T.stl_fw(pi, budget, connected=False)  # budget 1: a matching
        assert (W >= 0).all()
        np.testing.assert_allclose(W.sum(axis=0), 1, rtol=0, atol=1e-12)
        np.testing.assert_allclose(W.sum(axis=1), 1, rtol=0, atol=1e-12)
        off = (W != 0) & ~np.eye(40, dtype=bool)
        assert off.sum(axis=1).max() <= budget and off.sum(axis=0).max() <= budget
        assert off.sum(axis=1).max() == budget  # the budget is used, not undershot


def test_pairing_opposite_classes_removes_all_heterogeneity() -> None:
    """Two classes, half the nodes each: one permutation between the halves, at gamma = 1/2,
    gives every node the global proportions (tau = 0) with one neighbour."""
    pi = np.repeat(np.eye(2), 3, axis=0)
    W = T.stl_fw(pi, budget=1, lam=0.0, connected=False)  # three pairs that never mix
    assert T.neighborhood_heterogeneity(W, pi) == 0.0
    assert T.neighborhood_heterogeneity(np.eye(6), pi) == 0.5  # ||(1, 0) - (1/2, 1/2)||^2
    np.testing.assert_array_equal(np.diag(W), 0.5)
    partner = np.argmax(W - np.diag(np.diag(W)), axis=1)
    assert (pi[partner] != pi).any(axis=1).all()  # each node's neighbour holds the other class


def test_frank_wolfe_objective_never_increases_and_the_line_search_is_exact() -> None:
    pi = proportions(two_classes_each(30, seed=2))
    lam = 0.05
    iterates = [T.stl_fw(pi, 29, lam, max_iter=k, connected=False) for k in range(12)]
    values = [T.stl_fw_objective(W, pi, lam) for W in iterates]
    assert all(b <= a + 1e-15 for a, b in zip(values, values[1:]))
    assert values[-1] < 0.3 * values[0]
    # the step from W_1 to W_2 moves towards a permutation P: no point of the segment W_1 + s D
    # is better than W_2 (checked on a grid of the segment, past both ends of it too)
    W1, W2 = iterates[1], iterates[2]
    D = W2 - W1
    grid = [T.stl_fw_objective(W1 + s * D, pi, lam) for s in np.linspace(0.5, 1.5, 101)]
    assert min(grid) >= values[2] - 1e-15


def test_heterogeneity_falls_with_the_budget_under_strong_skew() -> None:
    pi = proportions(one_class_each(50))
    taus = [T.neighborhood_heterogeneity(np.eye(50), pi)] + [  # W = I: no iteration
        T.neighborhood_heterogeneity(T.stl_fw(pi, b, lam=0.01, connected=False), pi)
        for b in range(1, 10)]
    assert taus[0] == pytest.approx(0.9, abs=1e-12)  # W = I: ||e_c - 0.1||^2 = 0.81 + 0.09
    assert all(b < a for a, b in zip(taus, taus[1:]))
    assert taus[-1] < 0.05 * taus[0]


def test_a_large_lambda_pulls_w_to_the_average() -> None:
    """lam -> infinity leaves ||W - J||^2 alone: Frank-Wolfe reaches J; lam = 0 stops as soon
    as the neighbourhoods are balanced, far from J."""
    pi = proportions(two_classes_each(12))
    J = np.full((12, 12), 1 / 12)
    assert np.linalg.norm(T.stl_fw(pi, 11, lam=1e6, max_iter=300) - J) < 1e-9
    alone = T.stl_fw(pi, 11, lam=0.0, max_iter=300)
    assert np.linalg.norm(alone - J) > 0.3 and T.neighborhood_heterogeneity(alone, pi) < 1e-4


def test_stl_fw_graph_carries_w() -> None:
    pi = proportions(two_classes_each(20))
    W = T.stl_fw(pi, 3)
    G = T.stl_fw_graph(pi, 3)
    np.testing.assert_allclose(T.column_stochastic(G), W, rtol=0, atol=1e-15)
    np.testing.assert_allclose(T.column_stochastic(T.as_schedule(W).at(0)), W, rtol=0,
                               atol=1e-15)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"proportions": np.array([[0.5, 0.4], [0.5, 0.5]])}, "proportions"),
    ({"proportions": np.ones((3, 2, 1))}, "proportions"),
    ({"budget": -1}, "budget"),
    ({"budget": 4}, "budget"),
    ({"lam": -0.1}, "lam"),
    ({"lam": float("nan")}, "lam"),
    ({"max_iter": -1}, "max_iter"),
])
def test_stl_fw_refuses_bad_input(kwargs, field) -> None:
    args = {"proportions": np.repeat(np.eye(2), 2, axis=0), "budget": 1, **kwargs}
    with pytest.raises(T.ParameterError, match=f"^{field} ") as err:
        T.stl_fw(**args)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- the experiment script

def test_the_script_merges_seeds_and_pairs_the_gains() -> None:
    from analysis.scripts.data_topologies import stlfw_gains, summary
    rows = [{"partition": "p", "budget": 3, "kind": kind, "seed": seed, "test_acc": acc,
             "tau": tau, "messages": 300, "wall_s": 10.0}
            for kind, seed, acc, tau in [("STL-FW", 0, 0.80, 0.1), ("STL-FW", 1, None, 0.3),
                                         ("STL-FW", 2, 0.84, 0.2), ("random regular", 0, 0.78, 0.5),
                                         ("random regular", 1, 0.70, 0.5),
                                         ("random regular", 2, 0.81, 0.5)]]
    stl, rand = summary(rows, ("partition", "budget", "kind"))
    assert (stl["test_acc"], stl["seeds"], stl["of"]) == (pytest.approx(0.82), 2, 3)
    assert stl["acc_sd"] == pytest.approx(0.02) and stl["tau"] == pytest.approx(0.15)
    assert rand["test_acc"] == pytest.approx((0.78 + 0.70 + 0.81) / 3)
    assert stlfw_gains(rows) == {("p", 3): [pytest.approx(0.02), pytest.approx(0.03)]}


def test_d_cliques_by_name_is_built_from_the_runs_own_partition() -> None:
    """`[topology] name = "d_cliques"`: the run hands the builder its partition's label counts
    and its topology seed; clique averaging then reads the cliques of that graph."""
    from p2pfl.core.seeding import stream_seed
    from p2pfl.engine import class_counts

    cfg = small_config(data__num_nodes=12, data__partition="shards", data__alpha=0.3,
                       data__shards_per_node=1, topology__name="d_cliques",
                       topology__clique_size=4, algorithm__name="dpsgd",
                       algorithm__local_steps=1, algorithm__clique_averaging=True)
    ctx, algorithm = build(cfg)
    expected = T.d_cliques(class_counts(cfg), clique_size=4,
                           seed=stream_seed(cfg.seed, "topology"))
    G = ctx.schedule.at(0)
    assert set(G.edges) == set(expected.edges)
    assert nx.get_node_attributes(G, "clique") == nx.get_node_attributes(expected, "clique")
    play(algorithm, ctx, 0, G)  # the clique-averaged step runs on the named graph
