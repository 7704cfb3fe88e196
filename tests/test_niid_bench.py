"""`label_dirichlet` and `quantity_dirichlet` against NIID-Bench's own procedure.

NIID-Bench (Li, Diao, Chen, He, ICDE 2022; `utils.partition_data`) draws from numpy's global
generator. The two functions below restate its `noniid-labeldir` and `iid-diff-quantity` branches
step by step, in its order of random calls, with a `numpy.random.Generator` in place of
`np.random`: the same generator must then give the same index lists, order included, over many
shapes, concentrations and seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from p2pfl.config import ConfigError
from p2pfl.data import label_dirichlet, partition, quantity_dirichlet
from p2pfl.engine import build
from tests.conftest import small_config


def niid_bench_labeldir(y: np.ndarray, parties: int, beta: float, gen: np.random.Generator,
                        least: int = 10) -> list[list[int]]:
    """`noniid-labeldir`: per attempt and class k = 0..K-1, shuffle the class, draw Dir(beta)
    shares, zero those of parties at or above N / parties, renormalise, cut at
    int(cumsum * len) without the last; retry while a party has fewer than `least`; shuffle each
    party's list, party 0 first."""
    classes, total = int(y.max()) + 1, len(y)
    smallest = 0
    while smallest < least:
        held: list[list[int]] = [[] for _ in range(parties)]
        for k in range(classes):
            members = np.where(y == k)[0]
            gen.shuffle(members)
            shares = gen.dirichlet(np.repeat(beta, parties))
            shares = np.array([s * (len(h) < total / parties) for s, h in zip(shares, held)])
            shares = shares / shares.sum()
            cut_at = (np.cumsum(shares) * len(members)).astype(int)[:-1]
            held = [h + piece.tolist() for h, piece in zip(held, np.split(members, cut_at))]
            smallest = min(len(h) for h in held)
    for party in range(parties):
        gen.shuffle(held[party])
    return held


def niid_bench_quantity(n: int, parties: int, beta: float, gen: np.random.Generator,
                        least: int = 10) -> list[np.ndarray]:
    """`iid-diff-quantity`: one permutation, Dir(beta) shares redrawn while the smallest real
    share times n is under `least`, the permutation cut at int(cumsum * n) without the last."""
    order = gen.permutation(n)
    smallest = 0.0
    while smallest < least:
        shares = gen.dirichlet(np.repeat(beta, parties))
        shares = shares / shares.sum()
        smallest = np.min(shares * n)
    return np.split(order, (np.cumsum(shares) * n).astype(int)[:-1])


def skewed_labels(seed: int, n: int = 1500, classes: int = 10) -> np.ndarray:
    """n labels with unequal class sizes (class frequencies ~ Dir(5))."""
    gen = np.random.default_rng(1000 + seed)
    return gen.choice(classes, size=n, p=gen.dirichlet(np.full(classes, 5.0)))


def test_label_dirichlet_is_niid_bench_draw_for_draw():
    """135 draws (5, 10, 20 nodes; alpha 0.1 to 5; 9 seeds): every node's index list, order
    included. The former cut rule floor(x + 1e-9) and its per-node reshuffle fail it (the sizes
    alone differed on 42 of these draws, by up to 4 samples)."""
    draws = 0
    for nodes in (5, 10, 20):
        for alpha in (0.1, 0.3, 0.5, 1.0, 5.0):
            for seed in range(9):
                y = skewed_labels(seed)
                expected = niid_bench_labeldir(y, nodes, alpha, np.random.default_rng(seed))
                rows = label_dirichlet(y, nodes, np.random.default_rng(seed), alpha=alpha)
                assert [r.tolist() for r in rows] == expected, (nodes, alpha, seed)
                draws += 1
    assert draws == 135


def test_quantity_dirichlet_is_niid_bench_draw_for_draw():
    """60 draws with 30 or 50 samples a node on average, where the acceptance rule decides
    (the real share min q_i n >= 10, not the rounded count): the same cuts of the same
    permutation."""
    draws = 0
    for nodes in (5, 10, 20):
        for alpha in (2.0, 5.0):
            for per_node in (30, 50):
                for seed in range(5):
                    n = per_node * nodes
                    expected = niid_bench_quantity(n, nodes, alpha, np.random.default_rng(seed))
                    rows = quantity_dirichlet(np.zeros(n, dtype=np.int64), nodes,
                                              np.random.default_rng(seed), alpha=alpha)
                    assert [r.tolist() for r in rows] == [e.tolist() for e in expected]
                    draws += 1
    assert draws == 60


def full_node_gifts(rows: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Samples of class c given to a node that held n / N samples of the classes before c (the
    rule says: none), one entry per (node, class) where the node was full."""
    counts = np.array([np.bincount(y[r], minlength=10) for r in rows])  # [N, K]
    before = np.cumsum(counts, axis=1) - counts
    return counts[before >= len(y) / len(rows)]


def test_cut_tolerance_stops_float_rounding_from_feeding_a_full_node():
    """NIID-Bench's float cumulative sum can end at 1 - 1e-16 for a true 1, so the last node,
    full and with share 0, still gets the class's last sample; cut_tolerance = 1e-9 takes that
    cut at the integer. Over the 135 draws above: at 0, some full node gets exactly one sample;
    at 1e-9, none does."""
    gifts = {0.0: [], 1e-9: []}
    for tolerance, seen in gifts.items():
        for nodes in (5, 10, 20):
            for alpha in (0.1, 0.3, 0.5, 1.0, 5.0):
                for seed in range(9):
                    y = skewed_labels(seed)
                    rows = label_dirichlet(y, nodes, np.random.default_rng(seed), alpha=alpha,
                                           cut_tolerance=tolerance)
                    seen.extend(full_node_gifts(rows, y).tolist())
    assert max(gifts[0.0]) == 1 and sum(gifts[0.0]) > 10
    assert max(gifts[1e-9], default=0) == 0


def test_cut_tolerance_is_a_data_field_read_by_the_niid_bench_partitions():
    y = skewed_labels(0)
    plain = partition(y, 10, "label_dirichlet", seed=0, alpha=0.1)
    guarded = partition(y, 10, "label_dirichlet", seed=0, alpha=0.1, cut_tolerance=1e-9)
    same = partition(y, 10, "label_dirichlet", seed=0, alpha=0.1, cut_tolerance=0.0)
    assert [r.tolist() for r in plain] == [r.tolist() for r in same]
    assert any(len(a) != len(b) for a, b in zip(plain, guarded))
    with pytest.raises(ValueError, match=r"cut_tolerance must be in \[0, 1\), got 1.0"):
        quantity_dirichlet(y, 10, np.random.default_rng(0), cut_tolerance=1.0)
    with pytest.raises(ConfigError, match="data.cut_tolerance.*does not read it"):
        build(small_config(data__partition="iid", data__alpha=0.3, data__cut_tolerance=1e-9))
    with pytest.raises(ConfigError, match="data.cut_tolerance"):
        small_config(data__partition="label_dirichlet", data__cut_tolerance=1.0)
