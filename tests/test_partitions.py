"""The partitioners: invariants (disjoint, covering, min size, label counts add up, seeded), the
literature's definitions checked on small hand-made label sets, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from p2pfl.data import (
    PARTITIONS,
    by_group,
    check_partition,
    label_dirichlet,
    partition,
    quantity_dirichlet,
    quantity_lognormal,
    shards,
    subsample,
)


def labels_of(per_class: int = 300, classes: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(classes), per_class))


@pytest.mark.parametrize("method", sorted(PARTITIONS))
def test_every_named_partition_is_disjoint_and_in_range(method: str) -> None:
    labels = labels_of()
    rows = partition(labels, 12, method, seed=3, alpha=0.5, min_size=5)
    flat = np.concatenate(rows)
    assert len(rows) == 12 and all(len(r) > 0 for r in rows)
    assert len(np.unique(flat)) == len(flat) and flat.min() >= 0 and flat.max() < len(labels)
    counts = sum(np.bincount(labels[r], minlength=10) for r in rows)
    assert counts.sum() == len(flat)  # label counts add up to the samples dealt


@pytest.mark.parametrize("alpha", [0.1, 0.3, 1.0])
def test_label_dirichlet_covers_every_sample_with_unequal_sizes_and_min_size(alpha: float):
    labels = labels_of()
    rows = label_dirichlet(labels, 20, np.random.default_rng(0), alpha=alpha, min_size=10)
    flat = np.concatenate(rows)
    assert sorted(flat.tolist()) == list(range(len(labels)))  # covering: every sample dealt
    sizes = np.array([len(r) for r in rows])
    assert sizes.min() >= 10 and len(set(sizes.tolist())) > 1


def test_label_dirichlet_skew_falls_as_alpha_grows() -> None:
    labels = labels_of()

    def top_share(alpha: float) -> float:
        rows = label_dirichlet(labels, 20, np.random.default_rng(1), alpha=alpha, min_size=1)
        return float(np.mean([np.bincount(labels[r]).max() / len(r) for r in rows]))

    assert top_share(0.05) > top_share(1.0) > top_share(100.0)


def test_label_dirichlet_stops_giving_to_a_node_that_holds_its_share() -> None:
    """NIID-Bench's cap: a node that holds n / N samples gets nothing of the later classes. With
    2 nodes and huge alpha the first class splits about evenly; no node can exceed its share by
    more than one class's worth."""
    labels = labels_of(per_class=100, classes=4)
    for seed in range(20):
        rows = label_dirichlet(labels, 2, np.random.default_rng(seed), alpha=0.01, min_size=1)
        assert max(len(r) for r in rows) <= len(labels) / 2 + 100


def test_min_size_unreachable_is_a_clear_error() -> None:
    labels = labels_of(per_class=10, classes=2)
    with pytest.raises(ValueError, match="min_size"):
        label_dirichlet(labels, 5, np.random.default_rng(0), alpha=0.3, min_size=5)
    with pytest.raises(ValueError, match="no draw in 1000"):
        label_dirichlet(labels, 4, np.random.default_rng(0), alpha=0.001, min_size=5)


def test_shards_give_each_node_its_shards_of_one_class_each() -> None:
    labels = labels_of(per_class=100, classes=10)  # 1000 samples, 20 nodes x 2 shards of 25
    rows = shards(labels, 20, np.random.default_rng(0), shards_per_node=2)
    assert all(len(r) == 50 for r in rows)
    for r in rows:  # each shard is 25 consecutive samples of the label order: <= 2 classes
        assert len(np.unique(labels[r])) <= 2


def test_quantity_skew_sizes_differ_and_labels_stay_iid() -> None:
    labels = labels_of(per_class=1000)
    for rows in (quantity_dirichlet(labels, 10, np.random.default_rng(0), alpha=0.5),
                 quantity_lognormal(labels, 10, np.random.default_rng(0), sigma=1.0)):
        sizes = np.array([len(r) for r in rows])
        assert sizes.sum() == len(labels) and sizes.max() > 2 * sizes.min() and sizes.min() >= 10
        big = rows[int(sizes.argmax())]
        assert np.bincount(labels[big]).max() / len(big) < 0.15  # near 1/10 per class


def test_lognormal_sigma_zero_is_equal_shares() -> None:
    rows = quantity_lognormal(labels_of(), 10, np.random.default_rng(0), sigma=0.0)
    assert {len(r) for r in rows} == {300}


def test_by_group_keeps_groups_whole_and_deals_them_evenly() -> None:
    groups = np.repeat(np.arange(7), [5, 9, 3, 12, 4, 8, 6])
    labels = np.zeros(len(groups), dtype=np.int64)
    rows = partition(labels, 3, by_group(groups), seed=0)
    assert sorted(np.concatenate(rows).tolist()) == list(range(len(groups)))
    held = [set(groups[r].tolist()) for r in rows]
    assert sorted(len(h) for h in held) == [2, 2, 3]  # 7 groups dealt in turn to 3 nodes
    assert not (held[0] & held[1]) and not (held[1] & held[2])
    with pytest.raises(ValueError, match="4 groups for 5 nodes"):
        partition(labels[:len(groups)], 5, by_group(np.arange(len(groups)) % 4))


def test_a_callable_partitioner_gets_labels_nodes_and_a_seeded_rng() -> None:
    seen = []

    def mine(labels: np.ndarray, num_nodes: int, rng: np.random.Generator) -> list:
        seen.append(rng.random())
        return [np.arange(i, len(labels), num_nodes) for i in range(num_nodes)]

    rows = partition(labels_of(), 4, mine, seed=9)
    assert [len(r) for r in rows] == [750] * 4
    partition(labels_of(), 4, mine, seed=9)
    assert seen[0] == seen[1]


@pytest.mark.parametrize(("rows", "match"), [
    ([[0, 1], []], "node 1 has no samples"),
    ([[0, 1], [1, 2]], "more than one node"),
    ([[0, 1], [2, 99]], "0..n_train - 1"),
    ([[0, 1]], "1 index lists"),
    ([[0.5, 1.0], [2, 3]], "integer"),
])
def test_check_partition_refuses_bad_lists(rows: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_partition(rows, 2, 10)


def test_overlap_allowed_only_when_asked() -> None:
    rows = check_partition([[0, 1], [1, 2]], 2, 10, allow_overlap=True)
    assert [r.tolist() for r in rows] == [[0, 1], [1, 2]]


def test_fewer_samples_than_nodes() -> None:
    with pytest.raises(ValueError, match="num_nodes"):
        partition(np.zeros(3, dtype=np.int64), 4, "iid")


@pytest.mark.parametrize("per_node", [3, 7, 10])  # redrawn below n / 2, a permutation's head above
def test_subsample_gives_each_node_distinct_uniform_samples_in_a_random_order(per_node) -> None:
    n, nodes = 10, 2000
    rows = subsample(per_node)(np.zeros(n), nodes, np.random.default_rng(5))
    again = subsample(per_node)(np.zeros(n), nodes, np.random.default_rng(5))
    assert all(np.array_equal(a, b) for a, b in zip(rows, again, strict=True))
    table = np.stack(rows)
    assert table.shape == (nodes, per_node) and table.dtype == np.int64
    assert all(len(set(r.tolist())) == per_node for r in rows) and table.min() >= 0
    assert table.max() < n
    if per_node == n:
        assert (np.sort(table, axis=1) == np.arange(n)).all()
    held = np.bincount(table.ravel(), minlength=n)  # each sample: nodes per_node / n holders
    p = per_node / n
    assert np.abs(held - nodes * p).max() <= 5 * np.sqrt(nodes * p * (1 - p)) + 1e-9
    first = np.bincount(table[:, 0], minlength=n)  # the order within a node is random
    assert np.abs(first - nodes / n).max() <= 5 * np.sqrt(nodes * 0.1 * 0.9)


def test_subsample_refuses_more_samples_than_the_dataset() -> None:
    with pytest.raises(ValueError, match="11 distinct samples a node, the dataset has 10"):
        subsample(11)(np.zeros(10), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="per_node must be an integer >= 1"):
        subsample(0)
