"""Splitting a labelled training set among nodes: the partitions of the federated literature.

A partitioner maps (labels [n], num_nodes, rng) to one int64 index array per node: the node's
local training set, any length, no sample given twice. The ones named in a config
(`data.partition`) are registered in `PARTITIONS` with the parameters they read; a researcher
may pass any function of that shape, or one index list per node, to `p2pfl.run(...,
partition=...)`. Randomness comes only from the `numpy.random.Generator` handed in.

Equal sizes: `iid`, `dirichlet_prior` (also named `dirichlet`), `pathological`, `shards`.
Unequal sizes: `label_dirichlet`, `quantity_dirichlet`, `quantity_lognormal`, `by_group`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from p2pfl.data.priors import dirichlet_priors, pathological_priors, sample_by_priors

Partitioner = Callable[[np.ndarray, int, np.random.Generator], list[np.ndarray]]
MAX_REDRAWS = 1000  # draws of a partition with a minimum size before it gives up
PARTITION_PARAMS = ("alpha", "classes_per_node", "shards_per_node", "min_size", "sigma")


def iid(labels: np.ndarray, num_nodes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A random permutation cut into equal parts of n // N samples (the rest unused)."""
    per_node = len(labels) // num_nodes
    order = rng.permutation(len(labels)).astype(np.int64)
    return list(order[: num_nodes * per_node].reshape(num_nodes, per_node))


def dirichlet_prior(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                    alpha: float = 0.3) -> list[np.ndarray]:
    """Hsu, Qi, Brown 2019 (arXiv 1909.06335), equal sizes: node i draws a class prior
    q_i ~ Dir(alpha, ..., alpha) and each of its n // N slots a class from q_i, taking an unused
    sample of it (an exhausted class leaves every prior, which is renormalised). alpha = 0 gives
    each node one class, classes dealt as evenly as possible. The FL-Simulator / FedFSA form."""
    classes, class_of = np.unique(labels, return_inverse=True)
    priors = dirichlet_priors(len(classes), num_nodes, alpha, rng)
    return list(sample_by_priors(class_of.reshape(-1), priors, len(labels) // num_nodes, rng))


def pathological(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                 classes_per_node: int = 2) -> list[np.ndarray]:
    """Pat(k), equal sizes (FL-Simulator): node i draws k distinct classes and fills its n // N
    slots from them with prior 1/k each, as `dirichlet_prior` does."""
    classes, class_of = np.unique(labels, return_inverse=True)
    priors = pathological_priors(len(classes), num_nodes, classes_per_node, rng)
    return list(sample_by_priors(class_of.reshape(-1), priors, len(labels) // num_nodes, rng))


def shards(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
           shards_per_node: int = 2) -> list[np.ndarray]:
    """McMahan et al. 2017 (FedAvg's pathological non-IID MNIST): sort the samples by label, cut
    them into N * s shards of n // (N s) samples, give each node s random shards."""
    count = num_nodes * shards_per_node
    if count > len(labels):
        raise ValueError(f"shards_per_node {shards_per_node} x {num_nodes} nodes = {count} shards "
                         f"of {len(labels)} samples: fewer than one sample a shard")
    order = rng.permutation(len(labels))
    by_label = order[np.argsort(labels[order], kind="stable")].astype(np.int64)
    size = len(labels) // count
    pieces = by_label[: count * size].reshape(count, size)
    dealt = rng.permutation(count).reshape(num_nodes, shards_per_node)
    return [rng.permutation(pieces[row].reshape(-1)) for row in dealt]


def label_dirichlet(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                    alpha: float = 0.3, min_size: int = 10) -> list[np.ndarray]:
    """NIID-Bench's label-Dirichlet (Li et al. 2022, "Federated Learning on Non-IID Data Silos";
    the DisPFL / DFedSAM code bases): for each class c, proportions p_c ~ Dir_N(alpha) over the
    nodes, a node already holding n / N samples or more getting none of the later classes (a
    draw whose mass lies only on such nodes is replaced by equal shares of the others); the
    class's samples are cut by those proportions. Redrawn until every node has at least
    `min_size` samples. Sizes differ from node to node."""
    _check_alpha(alpha, positive=True)
    _check_min_size(min_size, len(labels), num_nodes)
    classes, class_of = np.unique(labels, return_inverse=True)
    members = [np.flatnonzero(class_of == c) for c in range(len(classes))]
    cap = len(labels) / num_nodes
    for _ in range(MAX_REDRAWS):
        node_of = np.empty(len(labels), dtype=np.int64)
        sizes = np.zeros(num_nodes, dtype=np.int64)
        for samples in members:
            samples = rng.permutation(samples)
            p = np.nan_to_num(rng.dirichlet(np.full(num_nodes, float(alpha))), nan=0.0)
            open_ = sizes < cap
            p = p * open_
            if p.sum() <= 0:  # the draw's mass lies on full nodes (or underflowed)
                p = open_ if open_.any() else np.ones(num_nodes)
            p = p / p.sum()
            counts = np.diff(np.concatenate(([0], _cuts(p, len(samples)), [len(samples)])))
            node_of[samples] = np.repeat(np.arange(num_nodes), counts)
            sizes += counts
        if sizes.min() >= min_size:
            return _group_by_node(node_of, num_nodes, rng)
    raise ValueError(f"label_dirichlet: no draw in {MAX_REDRAWS} gave each of {num_nodes} nodes "
                     f"min_size = {min_size} of {len(labels)} samples at alpha {alpha}; lower "
                     "min_size or raise alpha")


def quantity_dirichlet(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                       alpha: float = 0.3, min_size: int = 10) -> list[np.ndarray]:
    """NIID-Bench's quantity skew: node shares q ~ Dir_N(alpha), redrawn until every node gets
    at least `min_size` samples; a random permutation is cut by q (labels IID)."""
    _check_alpha(alpha, positive=True)
    return _by_shares(len(labels), num_nodes, rng, min_size,
                      lambda: np.nan_to_num(rng.dirichlet(np.full(num_nodes, float(alpha)))),
                      f"alpha {alpha}")


def quantity_lognormal(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                       sigma: float = 1.0, min_size: int = 10) -> list[np.ndarray]:
    """Quantity skew with log-normal sizes (FedLab's unbalanced split): node shares proportional
    to exp(N(0, sigma^2)), redrawn until every node gets `min_size`; labels IID. sigma = 0
    gives equal shares."""
    if not (np.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma}")
    return _by_shares(len(labels), num_nodes, rng, min_size,
                      lambda: rng.lognormal(0.0, sigma, size=num_nodes), f"sigma {sigma}")


def by_group(groups: Sequence[int] | np.ndarray) -> Partitioner:
    """A natural partition: `groups` [n] gives each training sample its group (writer, user,
    device, hospital). The groups are shuffled and dealt to the nodes in turn, so a node holds
    one group when there are as many groups as nodes, several when there are more."""
    groups = np.asarray(groups)

    def partitioner(labels: np.ndarray, num_nodes: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
        if groups.shape != labels.shape:
            raise ValueError(f"by_group: {groups.shape[0] if groups.ndim else 0} group ids for "
                             f"{len(labels)} training samples")
        names, group_of = np.unique(groups, return_inverse=True)
        if len(names) < num_nodes:
            raise ValueError(f"by_group: {len(names)} groups for {num_nodes} nodes; a node "
                             "needs at least one group")
        node_of_group = np.empty(len(names), dtype=np.int64)
        node_of_group[rng.permutation(len(names))] = np.arange(len(names)) % num_nodes
        return _group_by_node(node_of_group[group_of.reshape(-1)], num_nodes, rng)

    partitioner.__qualname__ = f"by_group({len(groups)} samples)"
    return partitioner


@dataclass(frozen=True)
class Method:
    """A named partition: its function and the `[data]` parameters it reads."""

    fn: Callable[..., list[np.ndarray]]
    params: tuple[str, ...] = ()
    source: str = ""


PARTITIONS: dict[str, Method] = {
    "iid": Method(iid, (), "uniform random equal split"),
    "dirichlet_prior": Method(dirichlet_prior, ("alpha",), "Hsu et al. 2019, equal sizes"),
    "dirichlet": Method(dirichlet_prior, ("alpha",), "the older name of dirichlet_prior"),
    "pathological": Method(pathological, ("classes_per_node",), "FL-Simulator Pat(k)"),
    "shards": Method(shards, ("shards_per_node",), "McMahan et al. 2017"),
    "label_dirichlet": Method(label_dirichlet, ("alpha", "min_size"), "NIID-Bench (Li et al. "
                              "2022), DisPFL / DFedSAM code"),
    "quantity_dirichlet": Method(quantity_dirichlet, ("alpha", "min_size"), "NIID-Bench "
                                 "quantity skew"),
    "quantity_lognormal": Method(quantity_lognormal, ("sigma", "min_size"), "FedLab unbalanced "
                                 "split"),
}


def partition(labels: np.ndarray, num_nodes: int, method: str | Partitioner, *, seed: int = 0,
              allow_overlap: bool = False, **params: float) -> list[np.ndarray]:
    """One int64 index array per node into `labels` [n], by the named method (reading those of
    `params` it takes) or by a partitioner function; checked (`check_partition`)."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if not 1 <= num_nodes <= len(labels):
        raise ValueError(f"num_nodes must be in [1, {len(labels)}] (number of samples), "
                         f"got {num_nodes}")
    rng = np.random.default_rng(seed)
    if callable(method):
        rows = method(labels, num_nodes, rng)
    elif method in PARTITIONS:
        spec = PARTITIONS[method]
        rows = spec.fn(labels, num_nodes, rng, **{k: params[k] for k in spec.params
                                                   if k in params})
    else:
        raise ValueError(f"unknown partition {method!r}; allowed: {', '.join(PARTITIONS)}")
    return check_partition(rows, num_nodes, len(labels), allow_overlap)


def check_partition(rows: object, num_nodes: int, num_train: int | None,
                    allow_overlap: bool = False) -> list[np.ndarray]:
    """`rows` as one int64 array per node, refused with a ValueError naming the problem: not
    `num_nodes` lists, a node with no sample, an index outside 0..num_train - 1 (unchecked
    while None), or a sample given twice (unless `allow_overlap`)."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        rows = list(rows)
    if not isinstance(rows, list | tuple):
        raise ValueError(f"expected one index list per node, got {type(rows).__name__}")
    if len(rows) != num_nodes:
        raise ValueError(f"has {len(rows)} index lists; data.num_nodes is {num_nodes}")
    out = []
    for i, row in enumerate(rows):
        row = np.asarray(row.cpu() if hasattr(row, "cpu") else row)
        if row.ndim != 1 or not (np.issubdtype(row.dtype, np.integer) or row.size == 0):
            raise ValueError(f"node {i}: expected a 1-D list of integer indices, got shape "
                             f"{list(row.shape)} ({row.dtype})")
        if row.size == 0:
            raise ValueError(f"node {i} has no samples")
        out.append(row.astype(np.int64))
    flat = np.concatenate(out)
    if flat.min() < 0 or (num_train is not None and flat.max() >= num_train):
        bound = "" if num_train is None else f" (n_train = {num_train})"
        raise ValueError(f"indices must be in 0..n_train - 1{bound}, got "
                         f"{flat.min()}..{flat.max()}")
    if not allow_overlap and len(np.unique(flat)) != len(flat):
        raise ValueError("a sample is given to more than one node (or twice to one); pass "
                         "allow_overlap to permit it")
    return out


def _check_alpha(alpha: float, positive: bool) -> None:
    if not (np.isfinite(alpha) and (alpha > 0 if positive else alpha >= 0)):
        raise ValueError(f"alpha must be a finite number {'>' if positive else '>='} 0, "
                         f"got {alpha}")


def _check_min_size(min_size: int, n: int, num_nodes: int) -> None:
    if min_size < 1 or min_size * num_nodes > n:
        raise ValueError(f"min_size must be in [1, {n // num_nodes}] ({n} samples over "
                         f"{num_nodes} nodes), got {min_size}")


def _cuts(shares: np.ndarray, n: int) -> np.ndarray:
    """The n - 1 inner cut points of n items split by `shares` (summing to 1), as NIID-Bench."""
    return np.floor(np.cumsum(shares) * n + 1e-9).astype(np.int64)[:-1].clip(0, n)


def _by_shares(n: int, num_nodes: int, rng: np.random.Generator, min_size: int,
               draw: Callable[[], np.ndarray], what: str) -> list[np.ndarray]:
    """A random permutation of n samples cut by shares from `draw`, redrawn until every node
    gets `min_size`."""
    _check_min_size(min_size, n, num_nodes)
    order = rng.permutation(n).astype(np.int64)
    for _ in range(MAX_REDRAWS):
        shares = draw()
        if shares.sum() <= 0:
            continue
        cuts = _cuts(shares / shares.sum(), n)
        if np.diff(np.concatenate(([0], cuts, [n]))).min() >= min_size:
            return np.split(order, cuts)
    raise ValueError(f"no draw in {MAX_REDRAWS} gave each of {num_nodes} nodes min_size = "
                     f"{min_size} of {n} samples at {what}; lower min_size")


def _group_by_node(node_of: np.ndarray, num_nodes: int,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """Sample indices grouped by their node (`node_of` [n]), each node's in random order."""
    order = np.lexsort((rng.random(len(node_of)), node_of))
    sizes = np.bincount(node_of, minlength=num_nodes)
    return np.split(order.astype(np.int64), np.cumsum(sizes)[:-1])
