"""Neighbour selection (DFedSGPSM-S, docs/algorithms.md): selection frequencies against their
exact probabilities, fallbacks, determinism and the loss-driven random_out schedule."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

import topologies as T

LOSSES = np.array([0.0, 1.0, 3.0, 6.0, 10.0])


def draw(select, losses, k: int, rounds: int, n: int = 5, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [select(losses, n, k, rng) for _ in range(rounds)]


def chi2_pvalue(counts: Counter, probs: dict) -> float:
    keys = list(probs)
    observed = np.array([counts[key] for key in keys], dtype=float)
    expected = np.array([probs[key] for key in keys]) * observed.sum()
    assert sum(counts.values()) == observed.sum()  # nothing outside the support
    return float(chisquare(observed, expected).pvalue)


def test_loss_based_single_pick_frequencies() -> None:
    picks = draw(T.select_loss_based, LOSSES, 1, 3000)
    for i in range(5):
        delta = {j: abs(LOSSES[i] - LOSSES[j]) for j in range(5) if j != i}
        probs = {j: d / sum(delta.values()) for j, d in delta.items()}
        counts = Counter(int(p[i, 0]) for p in picks)
        assert chi2_pvalue(counts, probs) > 1e-3, i


def test_loss_based_pairs_without_replacement() -> None:
    # P({a, b}) = p_a p_b / (1 - p_a) + p_b p_a / (1 - p_b): successive draws proportional to
    # |f_i - f_j| among the nodes not yet chosen.
    i = 2
    delta = {j: abs(LOSSES[i] - LOSSES[j]) for j in range(5) if j != i}
    p = {j: d / sum(delta.values()) for j, d in delta.items()}
    probs = {frozenset((a, b)): p[a] * p[b] / (1 - p[a]) + p[b] * p[a] / (1 - p[b])
             for a, b in itertools.combinations(p, 2)}
    assert abs(sum(probs.values()) - 1) < 1e-12
    picks = draw(T.select_loss_based, LOSSES, 2, 3000, seed=1)
    counts = Counter(frozenset(pk[i].tolist()) for pk in picks)
    assert chi2_pvalue(counts, probs) > 1e-3


def test_loss_softmax_frequencies() -> None:
    tau = 2.0
    picks = draw(T.loss_softmax(tau), LOSSES, 1, 3000, seed=2)
    for i in (0, 4):
        logit = {j: abs(LOSSES[i] - LOSSES[j]) / tau for j in range(5) if j != i}
        z = sum(np.exp(v) for v in logit.values())
        probs = {j: np.exp(v) / z for j, v in logit.items()}
        counts = Counter(int(pk[i, 0]) for pk in picks)
        assert chi2_pvalue(counts, probs) > 1e-3, i
    # a tiny temperature picks the largest difference
    assert all(pk[0, 0] == 4 for pk in draw(T.loss_softmax(1e-3), LOSSES, 1, 20))


@pytest.mark.parametrize(
    ("select", "losses"),
    [
        (T.select_loss_based, None),
        (T.select_loss_based, np.full(5, 0.7)),  # all differences 0: uniform fallback
        (T.loss_softmax(0.5), None),
        (T.loss_softmax(0.5), np.full(5, 0.7)),
        (T.select_random, LOSSES),
    ],
)
def test_uniform_cases(select, losses) -> None:
    picks = draw(select, losses, 2, 2000, seed=3)
    probs = {frozenset(c): 1 / 6 for c in itertools.combinations([0, 1, 2, 4], 2)}
    counts = Counter(frozenset(pk[3].tolist()) for pk in picks)
    assert chi2_pvalue(counts, probs) > 1e-3


def test_zero_differences_come_last_and_uniformly() -> None:
    losses = np.array([0.0, 0.0, 0.0, 5.0])
    picks = draw(T.select_loss_based, losses, 2, 2000, n=4, seed=4)
    assert all(3 in pk[0] for pk in picks)  # the only positive difference is always taken
    counts = Counter(int(next(j for j in pk[0] if j != 3)) for pk in picks)
    assert chi2_pvalue(counts, {1: 0.5, 2: 0.5}) > 1e-3


def test_candidate_mask() -> None:
    mask = np.zeros((5, 5), dtype=bool)
    mask[:, [1, 3]] = True
    mask[1, 0] = mask[3, 0] = True
    for select in (T.select_random, T.select_loss_based):
        for pk in draw(lambda f, c, k, r, s=select: s(f, mask, k, r), LOSSES, 2, 50):
            for i in range(5):
                assert set(pk[i]) <= set(np.flatnonzero(mask[i])) - {i}
    with pytest.raises(ValueError, match="node 0 has fewer than k=3 candidates"):
        T.select_random(None, mask, 3, np.random.default_rng(0))


def test_loss_based_schedule_is_deterministic_and_uses_the_losses() -> None:
    s = T.random_out(30, 3, seed=9, selection="loss_based")
    assert s.needs_losses and not T.random_out(30, 3, seed=9).needs_losses
    losses = np.random.default_rng(0).random(30)
    G = s.at(4, losses)
    assert dict(G.out_degree()) == {i: 3 for i in range(30)}
    again = T.random_out(30, 3, seed=9, selection="loss_based")
    assert set(G.edges) == set(again.at(4, losses).edges)
    assert set(G.edges) != set(s.at(4, losses[::-1].copy()).edges)
    assert set(G.edges) != set(s.at(5, losses).edges)
    # losses = None (round 0) is the uniform draw of the same round
    assert set(s.at(0).edges) == set(T.random_out(30, 3, seed=9).at(0).edges)
    # a lower-loss node is chosen more often by high-loss nodes: node 0 has the lowest loss
    f = np.linspace(0, 1, 30)
    hits = sum(s.at(t, f).has_edge(29, 0) for t in range(200))
    assert hits > 200 * 3 / 29 * 1.5


def test_callable_selector_and_its_checks() -> None:
    def next_two(losses, candidates, k, rng):
        n = int(candidates)
        return (np.arange(n)[:, None] + np.arange(1, k + 1)) % n

    s = T.random_out(6, 2, seed=0, selection=next_two)
    assert s.needs_losses
    assert set(s.at(3, None).edges) == {(i, (i + d) % 6) for i in range(6) for d in (1, 2)}
    for bad, message in [
        (lambda f, c, k, r: np.zeros((6, 2), dtype=int) + np.arange(2), "own out-neighbour"),
        (lambda f, c, k, r: np.ones((6, 2), dtype=int) * 5 - np.eye(6, 2, dtype=int) * 0,
         "own out-neighbour|twice"),
        (lambda f, c, k, r: np.zeros((6, 3), dtype=int), r"int array \[6, 2\]"),
        (lambda f, c, k, r: np.full((6, 2), 9), "outside"),
    ]:
        with pytest.raises(ValueError, match=message):
            T.random_out(6, 2, seed=0, selection=bad).at(0)


def test_bad_losses_and_names() -> None:
    s = T.random_out(5, 2, seed=0, selection="loss_based")
    with pytest.raises(ValueError, match=r"losses must be a float array \[5\]"):
        s.at(0, np.zeros(4))
    with pytest.raises(ValueError, match="node 2 has a non-finite loss"):
        s.at(0, np.array([0, 1, np.nan, 2, 3]))
    with pytest.raises(ValueError, match="^selection must be one of random, loss_based"):
        T.random_out(5, 2, seed=0, selection="greedy")
    with pytest.raises(ValueError, match="^temperature must be a positive number"):
        T.random_out(5, 2, seed=0, selection="loss_softmax", temperature=-1)


def test_rows_in_chunks(monkeypatch) -> None:
    from topologies import selection

    monkeypatch.setattr(selection, "_CHUNK", 7)  # one row per block of keys
    losses = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0])
    targets = T.select_loss_based(losses, 10, 3, np.random.default_rng(0))
    selection.check_targets(targets, 10, 3)
    for i in range(2, 9):  # exactly three nodes differ from node i: all of them are taken
        assert set(targets[i]) == {0, 1, 9}
    assert set(targets[0]) <= set(range(2, 10))  # node 1 has difference 0 to node 0
