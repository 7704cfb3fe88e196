"""Private gossip: the pairwise exposure by hand and against an independent exact computation of
the observer's view on random small cases, the clipped noisy update, and a run's privacy.json
(docs/robustness.md)."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

import topologies as T
from algorithms.muffliato import PrivacyLedger, privatize
from analysis.privacy import pairwise_privacy
from p2pfl.config import ConfigError
from p2pfl.context import Privacy
from p2pfl.engine import run
from tests.conftest import fuzz_budget, small_config


def exact_view(mixings: list[np.ndarray], steps: int, online: list[np.ndarray],
               observer: int) -> np.ndarray:
    """Observer i's view as coefficients of every node's noise, by simulating the messages one
    by one: [messages, rounds, n] (the observer's own columns zeroed: it knows its noise)."""
    n, rounds = len(mixings[0]), len(mixings)
    state = np.zeros((n, rounds, n))  # node k's value as coefficients of the noise (t', k')
    rows = []
    for t, W in enumerate(mixings):
        value = state.copy()
        for k in range(n):
            if online[t][k]:
                value[k, t, k] += 1.0
        for _ in range(steps):
            for w in range(n):
                if w != observer and W[observer, w] != 0:
                    rows.append(value[w].copy())
            value = np.einsum("kw,wtj->ktj", W, value)
        state = value
    view = np.array(rows).reshape(len(rows), rounds, n) if rows else np.zeros((0, rounds, n))
    view[:, :, observer] = 0
    return view


def divergence(view: np.ndarray, owner: int, shift: np.ndarray) -> float:
    """d^T A_j^T (A A^T)^+ A_j d: the Renyi divergence (over alpha Delta^2 / 2 sigma^2) of the
    linear Gaussian view between the owner's values s and s + shift (one entry a round)."""
    A = view.reshape(len(view), -1)
    mean_shift = view[:, :, owner] @ shift
    return float(mean_shift @ np.linalg.pinv(A @ A.T, rcond=1e-10, hermitian=True) @ mean_shift)


def worst_shift(view: np.ndarray, owner: int) -> float:
    """The largest divergence over the shifts of at most one a round (the box's corners)."""
    rounds = view.shape[1]
    return max(divergence(view, owner, np.array(signs, dtype=float))
               for signs in itertools.product((-1.0, 1.0), repeat=rounds))


def test_the_three_node_path_by_hand() -> None:
    """Node 0 knows its own value, so node 1's second message (z0 + z1 + z2) / 3 gives it node
    2's: S[0, 2] = 1 with two steps (Muffliato's per-message sum said 1/3)."""
    W = T.doubly_stochastic(nx.path_graph(3))
    one = np.array([[np.inf, 1, 0], [1, np.inf, 1], [0, 1, np.inf]])
    np.testing.assert_allclose(T.gossip_exposure(W, 1), one, rtol=0, atol=1e-12)
    two = np.ones((3, 3))
    np.fill_diagonal(two, np.inf)
    np.testing.assert_allclose(T.gossip_exposure(W, 2), two, rtol=0, atol=1e-12)
    sigma, rounds, delta, sensitivity = 2.0, 1, 1e-4, 0.5
    c = rounds * sensitivity**2 / (2 * sigma**2) * one
    eps = pairwise_privacy(nx.path_graph(3), sigma, rounds, delta, sensitivity, steps=1)
    np.testing.assert_allclose(eps, c + 2 * np.sqrt(c * np.log(1 / delta)), rtol=1e-12)


def test_a_star_leaf_sees_the_other_leaves_only_mixed() -> None:
    """Centre 3, leaves 0, 1, 2 (MH weight 1/4): leaf 0 sees z3, then (z0 + z1 + z2 + z3) / 4,
    one equation in z1 and z2: S[0, 1] = S[0, 2] = (1/4)^2 / (2 (1/4)^2) = 1/2."""
    W = T.doubly_stochastic(nx.star_graph([3, 0, 1, 2]))
    S = T.gossip_exposure(W, 2)
    np.testing.assert_allclose(S[0, [1, 2, 3]], [0.5, 0.5, 1.0], rtol=0, atol=1e-12)


def test_two_rounds_on_the_path_by_hand() -> None:
    """Observer 0, one step a round: it sees eta1^0, then x1^1 + eta1^1 with
    x1^1 = (z0 + z1 + z2) / 3. Row space: e(eta1^0) and (eta1^1 + eta2^0 / 3) / sqrt(10 / 9):
    S[0, 2] = (1/9) / (10/9) = 1/10; S[0, 1] = min(1 + 9/10, 2 max(1, 9/10)) = 1.9. "reach"
    counts 1 release of node 2 (round 0's reached node 0 in round 1) and 2 of node 1."""
    W = T.doubly_stochastic(nx.path_graph(3))
    linear = T.gossip_exposure([W, W], 1)
    np.testing.assert_allclose(linear[0, 1:], [1.9, 0.1], rtol=0, atol=1e-12)
    reach = T.gossip_exposure([W, W], 1, accounting="reach")
    np.testing.assert_allclose(reach[0, 1:], [2.0, 1.0], rtol=0, atol=0)


def test_every_accounting_is_at_least_the_exact_divergence_on_random_cases() -> None:
    """On random small graphs, weights, online nodes, rounds and steps: linear >= the exact
    divergence of the observer's view (independent simulation, pinv) for every shift on the
    box's corners, equal to it for one round; reach >= linear; reach <= the owner's releases
    (local DP); the run's ledger equals the one-shot computation."""
    rng = np.random.default_rng(54)
    cases = fuzz_budget(200, 1000)
    for case in range(cases):
        n, rounds, steps = int(rng.integers(2, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        mixings, online = [], []
        for _ in range(rounds):
            G = nx.gnp_random_graph(n, rng.uniform(0.2, 0.9), seed=int(rng.integers(1 << 30)))
            if rng.random() < 0.5:  # the researcher's own symmetric weights
                for a, b in G.edges:
                    G[a][b]["weight"] = rng.uniform(0.05, 1 / n)
            mixings.append(T.doubly_stochastic(G))
            online.append(rng.random(n) < 0.85)
        linear = T.gossip_exposure(mixings, steps, online=online)
        reach = T.gossip_exposure(mixings, steps, online=online, accounting="reach")
        releases = np.sum(online, axis=0)
        for i in range(n):
            view = exact_view(mixings, steps, online, i)
            for j in range(n):
                if i == j:
                    continue
                exact = worst_shift(view, j) if len(view) else 0.0
                where = f"case {case}, observer {i}, owner {j}"
                assert linear[i, j] >= exact - 1e-7, where
                if rounds == 1:
                    assert linear[i, j] == pytest.approx(exact, abs=1e-7), where
                assert reach[i, j] >= linear[i, j] - 1e-9, where
                assert reach[i, j] <= releases[j], where
        for accounting, expected in (("reach", reach), ("linear", linear)):
            ledger = PrivacyLedger(n, accounting)
            for W, released in zip(mixings, online, strict=True):
                ledger.add(sp.csr_array(W), steps, released)
            np.testing.assert_allclose(ledger.exposure(), expected, rtol=0, atol=1e-12)


def test_a_round_keeps_travelling_in_later_rounds() -> None:
    """Ring of 16, 30 rounds of one step: the per-round sum said 0 beyond one hop; every pair's
    exposure is positive in both accountings, and reach counts the rounds that arrived in time."""
    W = T.doubly_stochastic(T.ring(16), sparse=True)
    reach = T.gossip_exposure([W] * 30, 1, accounting="reach")
    linear = T.gossip_exposure([W] * 30, 1)
    off = ~np.eye(16, dtype=bool)
    assert (linear[off] > 0).all() and (reach[off] >= linear[off] - 1e-9).all()
    hops = np.minimum(np.arange(16), 16 - np.arange(16))
    np.testing.assert_array_equal(reach[0, 1:], 30 - hops[1:] + 1)  # round 29 - d + 1 arrives


def test_symmetric_where_the_graph_is() -> None:
    ring = pairwise_privacy(T.ring(9), 1.0, 3, steps=2)
    np.testing.assert_allclose(ring, ring.T, rtol=1e-9)  # W symmetric and circulant
    assert ring[0, 1] >= ring[0, 2] >= ring[0, 3] >= ring[0, 4] > 0


def test_bad_arguments_are_one_line_errors() -> None:
    W = T.doubly_stochastic(T.ring(4))
    for kwargs, name in (({"steps": 0}, "steps"), ({"accounting": "muffliato"}, "accounting")):
        with pytest.raises(T.ParameterError, match=f"^{name} "):
            T.gossip_exposure(W, **kwargs)
    with pytest.raises(T.ParameterError, match="^accounting 'linear' would hold"):
        T.gossip_exposure([T.doubly_stochastic(T.ring(64), sparse=True)] * 100, 2)


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


def test_a_private_run_writes_its_pairwise_privacy_and_resumes_it(tmp_path) -> None:
    cfg = small_config(rounds=3, privacy__sigma=0.5, privacy__clip=2.0, privacy__delta=1e-3,
                       engine__checkpoint_every=1)
    history = run(cfg, tmp_path / "r")
    record = json.loads((tmp_path / "r" / "privacy.json").read_text())
    eps = np.array([[np.inf if v is None else v for v in row] for row in record["epsilon"]])
    expected = pairwise_privacy(T.ring(6), sigma=0.5 * 2.0, rounds=3, delta=1e-3,
                                sensitivity=2 * 2.0, accounting="reach")
    np.testing.assert_allclose(eps, expected, rtol=1e-12)
    local = float(T.rdp_to_dp(3 * 4.0**2 / (2 * 1.0**2), 1e-3))
    assert record["accounting"] == "reach" and record["epsilon_local"] == pytest.approx(local)
    assert record["epsilon_max"] == pytest.approx(history[-1]["privacy_epsilon_max"])
    assert record["epsilon_max"] <= record["epsilon_local"]
    linear = small_config(rounds=3, privacy__sigma=0.5, privacy__clip=2.0,
                          privacy__delta=1e-3, privacy__accounting="linear",
                          engine__checkpoint_every=1)
    run(small_config(rounds=2, privacy__sigma=0.5, privacy__clip=2.0, privacy__delta=1e-3,
                     privacy__accounting="linear", engine__checkpoint_every=1), tmp_path / "l")
    run(linear, tmp_path / "l", resume=True)  # the ledger's rounds come back from the checkpoint
    resumed = json.loads((tmp_path / "l" / "privacy.json").read_text())
    eps = np.array([[np.inf if v is None else v for v in row] for row in resumed["epsilon"]])
    expected = pairwise_privacy(T.ring(6), sigma=1.0, rounds=3, delta=1e-3, sensitivity=4.0)
    np.testing.assert_allclose(eps, expected, rtol=1e-9)
    assert resumed["rounds"] == 3 and resumed["epsilon_max"] <= resumed["epsilon_local"]


def test_privacy_settings_that_cannot_be_accounted_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^privacy\.sigma: 1e-200 is .*infinite"):
        small_config(privacy__sigma=1e-200, privacy__clip=1.0)
    with pytest.raises(ConfigError, match=r"^privacy\.accounting: 'linear' would hold"):
        small_config(rounds=2000, privacy__sigma=1.0, privacy__clip=1.0,
                     privacy__accounting="linear")
    with pytest.raises(ConfigError, match=r"^privacy\.accounting: is set but privacy\.sigma"):
        small_config(privacy__accounting="linear")
