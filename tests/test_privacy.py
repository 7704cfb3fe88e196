"""Private gossip: Muffliato's pairwise accounting by hand, the clipped noisy update, and a run's
privacy.json (docs/robustness.md)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

import topologies as T
from algorithms.muffliato import privatize
from analysis.privacy import pairwise_privacy
from p2pfl.context import Privacy
from p2pfl.engine import run
from tests.conftest import small_config

# The path 0 - 1 - 2, Metropolis-Hastings: W = [[2/3, 1/3, 0], [1/3, 1/3, 1/3], [0, 1/3, 2/3]];
# squared rows normalised: row 0 (4/5, 1/5, 0), row 1 (1/3, 1/3, 1/3), row 2 (0, 1/5, 4/5).
# One step: i sees its neighbours' own values (t = 0 only); two steps add t = 1.
PATH_ONE_STEP = np.array([[np.inf, 1, 0], [1, np.inf, 1], [0, 1, np.inf]])
PATH_TWO_STEPS = np.array([[np.inf, 1 + 1 / 3, 1 / 3],
                           [1 + 4 / 5, np.inf, 1 + 4 / 5],
                           [1 / 3, 1 + 1 / 3, np.inf]])


def test_the_exposure_of_a_three_node_path_by_hand() -> None:
    W = T.doubly_stochastic(nx.path_graph(3))
    np.testing.assert_allclose(T.gossip_exposure(W, 1), PATH_ONE_STEP, rtol=0, atol=1e-12)
    np.testing.assert_allclose(T.gossip_exposure(W, 2), PATH_TWO_STEPS, rtol=0, atol=1e-12)
    sigma, rounds, delta, sensitivity = 2.0, 3, 1e-4, 0.5
    c = rounds * sensitivity**2 / (2 * sigma**2) * PATH_TWO_STEPS
    expected = c + 2 * np.sqrt(c * np.log(1 / delta))
    eps = pairwise_privacy(nx.path_graph(3), sigma, rounds, delta, sensitivity, steps=2)
    np.testing.assert_allclose(eps, expected, rtol=1e-12, atol=0)


def test_the_sparse_exposure_equals_the_dense_sum_over_powers() -> None:
    rng = np.random.default_rng(4)
    n, steps = 7, 4
    dense = np.where(rng.random((n, n)) < 0.4, rng.random((n, n)), 0.0)
    dense[[0, 3], [0, 3]] = 0.0  # two nodes keep none of their own mass
    dense[(np.arange(n) + 1) % n, np.arange(n)] += 0.5  # a directed ring keeps it connected
    dense /= dense.sum(axis=0)  # column-stochastic, not symmetric
    S = np.zeros((n, n))
    for t in range(steps):  # S[i, j] = sum_t sum_{w != i, W[i, w] != 0} P[w, j]^2 / |P[w]|^2
        P = np.linalg.matrix_power(dense, t)
        for i, w in zip(*np.nonzero(dense), strict=True):
            if i != w:
                S[i] += P[w] ** 2 / (P[w] @ P[w])
    np.fill_diagonal(S, np.inf)
    for W in (dense, sp.csr_array(dense)):
        np.testing.assert_allclose(T.gossip_exposure(W, steps), S, rtol=0, atol=1e-12)


def test_symmetric_where_the_graph_is_not_where_a_hub_sees_more() -> None:
    ring = pairwise_privacy(T.ring(9), 1.0, 5, steps=4)
    np.testing.assert_allclose(ring, ring.T, rtol=1e-12)  # W symmetric and circulant
    assert ring[0, 1] > ring[0, 2] > ring[0, 3] > ring[0, 4] > 0  # decays with distance
    path = pairwise_privacy(nx.path_graph(3), 1.0, 1, steps=2)
    assert path[1, 0] > path[0, 1]  # the middle node observes both ends' messages


def test_a_schedule_is_accounted_round_by_round() -> None:
    graphs = [nx.path_graph(3), T.complete(3)]
    both = pairwise_privacy(graphs, 1.5, 3, steps=2)
    S = 2 * T.gossip_exposure(T.doubly_stochastic(graphs[0]), 2) + T.gossip_exposure(
        T.doubly_stochastic(graphs[1]), 2)
    np.testing.assert_allclose(both, T.rdp_to_dp(S / (2 * 1.5**2), 1e-5), rtol=1e-12)


def test_privatize_clips_the_update_and_adds_the_noise() -> None:
    n, p = 3, 20000
    start = torch.zeros(n, p, dtype=torch.float64)
    update = torch.zeros(n, p, dtype=torch.float64)
    update[0, 0], update[1, 0], update[2, 1] = 5.0, 0.5, 7.0
    population = SimpleNamespace(params={"w": update.clone()})
    ctx = SimpleNamespace(population=population, num_nodes=n, dtype=torch.float64,
                          device=torch.device("cpu"), seed=0, privacy=Privacy(0.01, 1.0, 1e-5))
    privatize(ctx, 0, {"w": start}, torch.tensor([0, 1]))  # node 2 is offline: kept
    out = population.params["w"]
    clipped = torch.zeros(2, p, dtype=torch.float64)
    clipped[0, 0], clipped[1, 0] = 1.0, 0.5  # 5 clipped to norm 1; 0.5 within it
    noise = out[:2] - clipped
    assert noise.std().item() == pytest.approx(0.01, rel=0.02)
    assert abs(noise[:, 0]).max().item() < 0.06  # the clipped coordinate, plus noise
    assert torch.equal(out[2], update[2])


def test_a_private_run_writes_its_pairwise_privacy(tmp_path) -> None:
    cfg = small_config(rounds=2, privacy__sigma=0.5, privacy__clip=2.0, privacy__delta=1e-3)
    history = run(cfg, tmp_path / "r")
    record = json.loads((tmp_path / "r" / "privacy.json").read_text())
    eps = np.array([[np.inf if v is None else v for v in row] for row in record["epsilon"]])
    expected = pairwise_privacy(T.ring(6), sigma=0.5 * 2.0, rounds=2, delta=1e-3,
                                sensitivity=2 * 2.0)
    np.testing.assert_allclose(eps, expected, rtol=1e-12)
    assert record["epsilon_max"] == pytest.approx(history[-1]["privacy_epsilon_max"])
    assert record["rounds"] == 2 and record["epsilon_local"] == pytest.approx(
        float(T.rdp_to_dp(2 * 4.0**2 / (2 * 1.0**2), 1e-3)))
