"""Byzantine nodes and robust gossip: the aggregators' rules, the attacks' messages by hand, the
placements, and a run's record of its Byzantine set (docs/robustness.md)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
import torch

import topologies as T
from algorithms.attacks import alie_z, inject
from algorithms.neighbourhoods import neighbourhoods
from algorithms.options import AGGREGATORS
from algorithms.robust import clipped, robust_gossip, trimmed_mean
from p2pfl.config import ConfigError
from p2pfl.context import Byzantine
from p2pfl.core.mixing import LocalComm
from p2pfl.engine import run
from tests.conftest import small_config

F64 = torch.float64


def options(aggregator: str, trim: int = 1, clip_radius: float = 0.0) -> SimpleNamespace:
    return SimpleNamespace(aggregator=aggregator, trim=trim, clip_radius=clip_radius)


def context(n: int, byzantine: Byzantine | None = None) -> SimpleNamespace:
    """What robust_gossip reads of a run."""
    return SimpleNamespace(num_nodes=n, device=torch.device("cpu"), dtype=F64,
                           byzantine=byzantine, seed=0)


def models(values: np.ndarray) -> dict[str, torch.Tensor]:
    """Two parameter blocks holding the columns of `values` [n, 3]."""
    x = torch.as_tensor(values, dtype=F64)
    return {"a": x[:, :1].clone(), "b": x[:, 1:].reshape(len(x), 2, 1).clone()}


def rows(params: dict[str, torch.Tensor]) -> np.ndarray:
    return torch.cat([v.reshape(len(v), -1) for v in params.values()], 1).numpy()


@pytest.mark.parametrize("aggregator", AGGREGATORS)
def test_every_aggregator_keeps_identical_inputs_on_a_complete_graph(aggregator: str) -> None:
    x = np.tile(np.array([[0.3, -1.7, 2.5]]), (6, 1))
    params = models(x)
    robust_gossip(context(6), 0, T.doubly_stochastic(T.complete(6)), params,
                  options(aggregator), 3)
    np.testing.assert_allclose(rows(params), x, rtol=0, atol=1e-12)


def test_clipped_gossip_without_attackers_and_an_infinite_radius_is_plain_gossip() -> None:
    rng = np.random.default_rng(0)
    W = T.doubly_stochastic(T.exponential(16, directed=False))
    x = rng.normal(size=(16, 3))
    plain = models(x)
    LocalComm(torch.device("cpu"), F64, "dense").mix(torch.as_tensor(W), plain, 2)
    adaptive = models(x)  # no Byzantine neighbour: delta_i = 0, tau_i = inf
    robust_gossip(context(16), 0, W, adaptive, options("clipped_gossip"), 2)
    np.testing.assert_allclose(rows(adaptive), rows(plain), rtol=0, atol=1e-12)
    hood = neighbourhoods(W, torch.device("cpu"), F64)
    own = {k: v.view(16, -1) for k, v in models(x).items()}
    once = clipped(own, {k: v[hood.index] for k, v in own.items()}, hood,
                   torch.full((16,), torch.inf, dtype=F64))
    np.testing.assert_allclose(np.hstack([once["a"], once["b"]]), W @ x, rtol=0, atol=1e-12)


def test_a_finite_radius_clips_each_neighbour_to_it() -> None:
    W = T.doubly_stochastic(T.star(3))  # hub 0 (W = 1/3 everywhere), leaves at distances 5, 1
    x = np.array([[0.0, 0, 0], [3, 4, 0], [0, 0, 1]])
    params = models(x)
    robust_gossip(context(3), 0, W, params, options("self_centered_clipping", clip_radius=2.0),
                  1)
    # hub: 0 + (1/3)(2/5)(3, 4, 0) + (1/3)(0, 0, 1); leaf 2: (0,0,1) + (1/3) clip((0,0,-1)) ...
    np.testing.assert_allclose(rows(params)[0], [0.4, 1.6 / 3, 1 / 3], atol=1e-12)
    np.testing.assert_allclose(rows(params)[2], [0, 0, 2 / 3], atol=1e-12)


def test_bridge_trims_and_takes_medians_coordinate_by_coordinate() -> None:
    W = T.doubly_stochastic(T.star(6))  # hub 0 receives from 1..5
    x = np.array([[0.0, 0, 0], [5, 1, 1], [-3, 1, 2], [1, 1, 3], [2, 1, 4], [100, 1, 5]])
    hood = neighbourhoods(W, torch.device("cpu"), F64)
    own = {"x": torch.as_tensor(x, dtype=F64)}
    trimmed = trimmed_mean(own, {"x": own["x"][hood.index]}, hood, 1)["x"].numpy()
    # own value kept; drop the largest and smallest neighbour: (0 + 5 + 1 + 2) / 4, ...
    np.testing.assert_allclose(trimmed[0], [2.0, 0.75, 2.25], atol=1e-12)
    med = models(x)
    robust_gossip(context(6), 0, W, med, options("median"), 1)
    # of {0, 5, -3, 1, 2, 100}: (1 + 2) / 2; of {0, 1, 1, 1, 1, 1}: 1; of {0, ..., 5}: 2.5
    np.testing.assert_allclose(rows(med)[0], [1.5, 1.0, 2.5], atol=1e-12)
    np.testing.assert_allclose(rows(med)[1], [2.5, 0.5, 0.5], atol=1e-12)  # leaf: {own, hub}
    kept = models(x)  # a leaf's one neighbour does not survive trim 1: it keeps its own value
    robust_gossip(context(6), 3, W, kept, options("trimmed_mean", trim=1), 1)
    np.testing.assert_allclose(rows(kept)[1:], x[1:], rtol=0, atol=0)


# The hand-built graph: 0 - 1, 0 - 2, 0 - 3, 1 - 2 with these weights; 2 and 3 are Byzantine.
HAND_W = np.array([[0.25, 0.2, 0.3, 0.25],
                   [0.2, 0.4, 0.4, 0.0],
                   [0.3, 0.4, 0.3, 0.0],
                   [0.25, 0.0, 0.0, 0.75]])
HAND_X = np.array([[1.0, 0, 0], [2, 0, 1], [4, 0, 0], [10, 0, 0]])


def test_the_dissensus_attack_sends_the_papers_message_to_each_neighbour() -> None:
    byzantine = Byzantine((2, 3), "dissensus", {"dissensus_epsilon": 1.5})
    hood = neighbourhoods(HAND_W, torch.device("cpu"), F64)
    own = {"x": torch.as_tensor(HAND_X, dtype=F64)}
    received = {"x": own["x"][hood.index]}
    attackers = torch.tensor([False, False, True, True])
    slots = attackers[hood.index] & hood.mask
    targets = slots & ~attackers.unsqueeze(1)
    inject(byzantine, own, received, hood, slots, targets, hood.weight, 0, 0, 0)
    sent = {(int(i), int(hood.index[i, s])): received["x"][i, s].numpy()
            for i, s in zip(*targets.nonzero(as_tuple=True))}
    # to 0: x_0 - 1.5 W_01 (x_1 - x_0) / (W_02 + W_03), from both 2 and 3
    to_0 = HAND_X[0] - 1.5 * 0.2 * (HAND_X[1] - HAND_X[0]) / 0.55
    # to 1: x_1 - 1.5 W_10 (x_0 - x_1) / W_12, from 2 only
    to_1 = HAND_X[1] - 1.5 * 0.2 * (HAND_X[0] - HAND_X[1]) / 0.4
    assert sorted(sent) == [(0, 2), (0, 3), (1, 2)]
    np.testing.assert_allclose(sent[(0, 2)], to_0, atol=1e-12)
    np.testing.assert_allclose(sent[(0, 3)], to_0, atol=1e-12)
    np.testing.assert_allclose(sent[(1, 2)], to_1, atol=1e-12)
    # a gossip step then moves each honest node (1 - 1.5) times its honest pull
    params = {"x": torch.tensor(HAND_X, dtype=F64)}
    robust_gossip(context(4, byzantine), 0, HAND_W, params, options("mean"), 1)
    x = params["x"].numpy()
    np.testing.assert_allclose(x[0], HAND_X[0] - 0.5 * 0.2 * (HAND_X[1] - HAND_X[0]), atol=1e-12)
    np.testing.assert_allclose(x[1], HAND_X[1] - 0.5 * 0.2 * (HAND_X[0] - HAND_X[1]), atol=1e-12)
    np.testing.assert_allclose(x[3], 0.25 * HAND_X[0] + 0.75 * HAND_X[3], atol=1e-12)


def test_sign_flip_alie_and_ipm_messages() -> None:
    W = T.doubly_stochastic(T.star(4))  # hub 0; leaf 3 is Byzantine
    x = np.array([[1.0, 2, 0], [3, 2, 1], [5, 2, 2], [7, 0, 0]])
    honest = x[:3]  # the hub's honest closed neighbourhood
    mu, sd = honest.mean(0), honest.std(0, ddof=1)
    for attack, params, expected in (
            ("sign_flip", {"scale": 2.0}, -2 * x[3]),
            ("alie", {"z": 1.5}, mu - 1.5 * sd),
            ("ipm", {"ipm_epsilon": 0.1}, -0.1 * mu)):
        state = {"x": torch.tensor(x, dtype=F64)}
        robust_gossip(context(4, Byzantine((3,), attack, params)), 0, W, state, options("mean"),
                      1)
        hub = W[0, :3] @ x[:3] + W[0, 3] * expected
        np.testing.assert_allclose(state["x"].numpy()[0], hub, atol=1e-12, err_msg=attack)
        np.testing.assert_allclose(state["x"].numpy()[1], W[1] @ x, atol=1e-12)  # untouched
    # the decentralized z: Phi^-1((16 - f - s) / (16 - f)), s = 9 - f: Phi^-1(7/15), Phi^-1(7/13)
    assert alie_z(16, 1) == pytest.approx(-0.083652, abs=1e-6)
    assert alie_z(16, 3) == pytest.approx(0.096559, abs=1e-6)


def test_the_gaussian_attack_is_seeded() -> None:
    W = T.doubly_stochastic(T.ring(5))
    x = np.random.default_rng(1).normal(size=(5, 3))
    byzantine = Byzantine((0,), "gaussian", {"std": 3.0})
    a, b = models(x), models(x)
    robust_gossip(context(5, byzantine), 4, W, a, options("mean"), 1)
    robust_gossip(context(5, byzantine), 4, W, b, options("mean"), 1)
    np.testing.assert_array_equal(rows(a), rows(b))
    moved = np.abs(rows(a) - W @ x).sum(1) > 1e-9
    assert moved.tolist() == [False, True, False, False, True]  # 0's two honest neighbours


def test_placements() -> None:
    assert T.placement(T.dumbbell(16), 2, "cut").tolist() == [7, 8]  # the bridge's ends
    assert T.placement(T.star(9), 1, "max_degree").tolist() == [0]
    drawn = T.placement(T.ring(16), 4, "random", seed=3)
    assert drawn.tolist() == T.placement(T.ring(16), 4, "random", seed=3).tolist()
    assert len(set(drawn.tolist())) == 4
    G = T.dumbbell(10)
    assert nx.is_connected(G) and not nx.is_connected(nx.restricted_view(G, [4], []))


def test_a_run_records_its_byzantine_nodes_and_the_honest_metrics(tmp_path) -> None:
    cfg = small_config(rounds=1, topology__name="star", algorithm__aggregator="clipped_gossip",
                       byzantine__nodes=1, byzantine__placement="max_degree")
    history = run(cfg, tmp_path / "r")
    record = json.loads((tmp_path / "r" / "byzantine.json").read_text())
    assert record["nodes"] == [0] and record["attack"] == "sign_flip"
    last = history[-1]
    assert last["test_acc_honest_min"] <= last["test_acc_honest_mean"]
    assert last["consensus_dist_honest"] >= 0


def test_the_record_lists_the_honest_nodes_as_the_complement() -> None:
    from p2pfl.engine.threats import BYZANTINE_RECORD, byzantine_record

    cfg = small_config(byzantine__nodes=[4, 1])
    ring = T.static(T.ring(6))
    record = byzantine_record(Byzantine((1, 4), "sign_flip", {"scale": 1.0}), cfg, ring)[
        BYZANTINE_RECORD]
    assert record["nodes"] == [1, 4] and record["count"] == 2 and record["of"] == 6
    assert record["honest"] == [0, 2, 3, 5] and record["placement"] == "listed"
    # plain gossip assumes no Byzantine neighbour: every honest node of the ring has one, W 1/3
    assumption = record["assumption"]
    assert assumption["aggregator"] == "mean" and assumption["delta_max"] == pytest.approx(1 / 3)
    assert [(b["node"], b["byzantine_neighbours"], b["neighbours"], b["rounds"])
            for b in assumption["broken"]] == [(0, 1, 2, 1), (2, 1, 2, 1), (3, 1, 2, 1),
                                                (5, 1, 2, 1)]
    assert byzantine_record(None, cfg, ring) == {}


CLIQUE_AVERAGING = {"algorithm__name": "dpsgd", "algorithm__order": "atc",
                    "algorithm__local_steps": 1, "algorithm__clique_averaging": True}


@pytest.mark.parametrize(("overrides", "field"), [
    ({"byzantine__nodes": 1.0}, "byzantine.nodes"),
    ({"byzantine__nodes": [0, 9]}, "byzantine.nodes"),
    ({"byzantine__attack": "alie"}, "byzantine.attack"),
    ({"byzantine__nodes": 1, "byzantine__std": 2.0}, "byzantine.std"),
    ({"byzantine__nodes": [1], "byzantine__placement": "cut"}, "byzantine.placement"),
    ({"byzantine__nodes": 1, "algorithm__name": "osgp"}, "byzantine"),
    ({"algorithm__trim": 2}, "algorithm.trim"),
    ({"privacy__clip": 1.0}, "privacy.clip"),
    ({"privacy__sigma": 1.0}, "privacy.clip"),
    ({"privacy__sigma": 1.0, "privacy__clip": 1.0, "algorithm__aggregator": "median"},
     "algorithm.aggregator"),
    ({"byzantine__nodes": 1, **CLIQUE_AVERAGING}, "algorithm.clique_averaging"),
    ({"privacy__sigma": 1.0, "privacy__clip": 1.0, **CLIQUE_AVERAGING},
     "algorithm.clique_averaging"),
])
def test_bad_settings_are_one_line_errors(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        small_config(**overrides)
    assert err.value.field == field and "\n" not in str(err.value)


def test_clique_averaging_alone_is_a_valid_config() -> None:
    assert small_config(**CLIQUE_AVERAGING).algorithm.clique_averaging  # the refusals above


def test_every_cell_of_the_robustness_grids_is_a_valid_config() -> None:
    from bench.robustness import CONFIG, cells
    from p2pfl.config import load_config, with_overrides

    base = load_config(CONFIG)
    for grid in ("bar", "count", "dissensus", "privacy"):
        for _, overrides in cells(grid):
            with_overrides(base, overrides)
