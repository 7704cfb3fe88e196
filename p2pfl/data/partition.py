"""Splitting a labelled training set among nodes: the partitions of the federated literature.

A partitioner maps (labels [n], num_nodes, rng) to one int64 index array per node: the node's
local training set, any length, no sample given twice. The ones named in a config
(`data.partition`) are registered in `PARTITIONS` with the parameters they read; a researcher
may pass any function of that shape, or one index list per node, to `p2pfl.run(...,
partition=...)`. Randomness comes only from the `numpy.random.Generator` handed in.

Equal sizes: `iid`, `dirichlet_prior` (also named `dirichlet`), `pathological`, `shards`.
Unequal sizes: `label_dirichlet`, `quantity_dirichlet`, `quantity_lognormal`, `by_group`.
More nodes than samples: `subsample` (nodes share samples; `data.allow_overlap`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from p2pfl.data.priors import dirichlet_priors, pathological_priors, sample_by_priors

Partitioner = Callable[[np.ndarray, int, np.random.Generator], list[np.ndarray]]
MAX_REDRAWS = 1000  # draws of a partition with a minimum size before it gives up
PARTITION_PARAMS = ("alpha", "classes_per_node", "shards_per_node", "min_size", "sigma",
                    "cut_tolerance")
LOGNORMAL_CUT_TOLERANCE = 1e-9  # quantity_lognormal's cuts: sigma = 0 gives equal shares


def iid(labels: np.ndarray, num_nodes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A random permutation cut into equal parts of n // N samples (the rest unused).

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from

    Returns
    -------
    list of N int64 arrays of n // N indices each
    """
    per_node = len(labels) // num_nodes
    order = rng.permutation(len(labels)).astype(np.int64)
    return list(order[: num_nodes * per_node].reshape(num_nodes, per_node))


def dirichlet_prior(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                    alpha: float = 0.3) -> list[np.ndarray]:
    """Hsu, Qi, Brown 2019 (arXiv 1909.06335), equal sizes.

    Node i draws a class prior q_i ~ Dir(alpha, ..., alpha) and each of its n // N slots a class
    from q_i, taking an unused sample of it (an exhausted class leaves every prior, which is
    renormalised). alpha = 0 gives each node one class, classes dealt as evenly as possible. The
    FL-Simulator / FedFSA form.

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from
    alpha : Dirichlet concentration (>= 0)

    Returns
    -------
    list of N int64 arrays of n // N indices each
    """
    classes, class_of = np.unique(labels, return_inverse=True)
    priors = dirichlet_priors(len(classes), num_nodes, alpha, rng)
    return list(sample_by_priors(class_of.reshape(-1), priors, len(labels) // num_nodes, rng))


def pathological(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                 classes_per_node: int = 2) -> list[np.ndarray]:
    """Pat(k), equal sizes (FL-Simulator).

    Node i draws k distinct classes and fills its n // N slots from them with prior 1/k each, as
    `dirichlet_prior` does.

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from
    classes_per_node : k, in [1, number of classes]

    Returns
    -------
    list of N int64 arrays of n // N indices each
    """
    classes, class_of = np.unique(labels, return_inverse=True)
    priors = pathological_priors(len(classes), num_nodes, classes_per_node, rng)
    return list(sample_by_priors(class_of.reshape(-1), priors, len(labels) // num_nodes, rng))


def shards(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
           shards_per_node: int = 2) -> list[np.ndarray]:
    """McMahan et al. 2017 (FedAvg's pathological non-IID MNIST).

    Sort the samples by label, cut them into N * s shards of n // (N s) samples, give each node s
    random shards.

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from
    shards_per_node : s

    Returns
    -------
    list of N int64 arrays of s * (n // (N s)) indices each

    Raises
    ------
    ValueError
        when N s shards exceed the samples.
    """
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
                    alpha: float = 0.3, min_size: int = 10,
                    cut_tolerance: float = 0.0) -> list[np.ndarray]:
    """NIID-Bench's label-Dirichlet split `noniid-labeldir`, draw for draw.

    Li, Diao, Chen, He, "Federated Learning on Non-IID Data Silos: An Experimental Study", ICDE
    2022 (code: NIID-Bench, `utils.partition_data`; also the DisPFL / DFedSAM code bases). An
    attempt goes through the classes in sorted order; for class c it shuffles the class's
    samples, draws proportions p ~ Dir_N(alpha), zeroes them on the nodes already holding
    n / N samples or more, renormalises, and cuts the shuffled class at
    floor(cumsum(p) * n_c + cut_tolerance) (the last cut dropped), piece j to node j. Attempts
    repeat until every node holds `min_size` samples; then each node's samples (class by class)
    are shuffled, node 0 first. The generator is called as NIID-Bench calls numpy's global one
    (shuffle, dirichlet per class; a shuffle per node at the end), so the same generator gives
    the same index lists. Sizes differ from node to node.

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from
    alpha : Dirichlet concentration (> 0)
    min_size : the fewest samples a node may hold (NIID-Bench's `min_require_size`, 10)
    cut_tolerance : added before the floor of each cut point, in [0, 1). 0 is NIID-Bench. With
        1e-9 a cut that float rounding puts just under an integer is taken at that integer: a
        node whose share is 0 (already full) or below 1e-9 / n_c then gets no sample, where
        NIID-Bench's float cumulative sum (1 - 1e-16 for a true 1) can hand it one.

    Returns
    -------
    list of N int64 arrays, every sample dealt once

    Where NIID-Bench divides 0 by 0 (a draw whose whole mass lies on full nodes, possible only
    when Dirichlet components underflow), the class is split evenly among the nodes not yet
    full instead of going wholly to the last node.
    """
    _check_alpha(alpha, positive=True)
    _check_min_size(min_size, len(labels), num_nodes)
    _check_cut_tolerance(cut_tolerance)
    classes, class_of = np.unique(labels, return_inverse=True)
    members = [np.flatnonzero(class_of.reshape(-1) == c) for c in range(len(classes))]
    cap = len(labels) / num_nodes
    for _ in range(MAX_REDRAWS):
        pieces: list[list[np.ndarray]] = [[] for _ in range(num_nodes)]
        sizes = np.zeros(num_nodes, dtype=np.int64)
        for samples in members:
            samples = rng.permutation(samples)
            p = np.nan_to_num(rng.dirichlet(np.full(num_nodes, float(alpha))), nan=0.0)
            open_ = sizes < cap
            p = p * open_
            if p.sum() <= 0:  # the draw's mass lies on full nodes (or underflowed)
                p = open_ * 1.0 if open_.any() else np.ones(num_nodes)
            p = p / p.sum()
            for node, piece in enumerate(np.split(samples, _cuts(p, len(samples),
                                                                 cut_tolerance))):
                pieces[node].append(piece)
                sizes[node] += len(piece)
        if sizes.min() >= min_size:
            rows = [np.concatenate(node_pieces) for node_pieces in pieces]
            for row in rows:
                rng.shuffle(row)
            return rows
    raise ValueError(f"label_dirichlet: no draw in {MAX_REDRAWS} gave each of {num_nodes} nodes "
                     f"min_size = {min_size} of {len(labels)} samples at alpha {alpha}; lower "
                     "min_size or raise alpha")


def quantity_dirichlet(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                       alpha: float = 0.3, min_size: int = 10,
                       cut_tolerance: float = 0.0) -> list[np.ndarray]:
    """NIID-Bench's quantity skew `iid-diff-quantity`, draw for draw.

    Li et al. 2022, code NIID-Bench `utils.partition_data`: a random permutation of the samples,
    then node shares q ~ Dir_N(alpha), normalised, redrawn until min_i q_i n >= `min_size` (the
    real share, not the rounded count); the permutation is cut at
    floor(cumsum(q) * n + cut_tolerance), the last cut dropped. Labels IID. The same generator
    gives NIID-Bench's index lists (`cut_tolerance` = 0, the default; see `label_dirichlet`).
    Every node gets at least `min_size` samples, since floor(a) - floor(b) >= floor(a - b).

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from
    alpha : Dirichlet concentration (> 0)
    min_size : the fewest samples a node may hold
    cut_tolerance : added before the floor of each cut point, in [0, 1)

    Returns
    -------
    list of N int64 arrays, every sample dealt once

    Raises
    ------
    ValueError
        for alpha, min_size or cut_tolerance out of range, or when no draw in MAX_REDRAWS gives
        every node min_size samples.
    """
    _check_alpha(alpha, positive=True)
    _check_min_size(min_size, len(labels), num_nodes)
    _check_cut_tolerance(cut_tolerance)
    n = len(labels)
    order = rng.permutation(n).astype(np.int64)
    for _ in range(MAX_REDRAWS):
        shares = rng.dirichlet(np.full(num_nodes, float(alpha)))
        shares = shares / shares.sum()
        if (shares * n).min() >= min_size:
            return np.split(order, _cuts(shares, n, cut_tolerance))
    raise ValueError(f"no draw in {MAX_REDRAWS} gave each of {num_nodes} nodes min_size = "
                     f"{min_size} of {n} samples at alpha {alpha}; lower min_size")


def quantity_lognormal(labels: np.ndarray, num_nodes: int, rng: np.random.Generator,
                       sigma: float = 1.0, min_size: int = 10) -> list[np.ndarray]:
    """Quantity skew with log-normal sizes (FedLab's unbalanced split).

    Node shares proportional to exp(N(0, sigma^2)), redrawn until every node gets `min_size`; a
    random permutation is cut at floor(cumsum(q) * n + 1e-9) (`label_dirichlet`'s
    `cut_tolerance`), so that sigma = 0 gives exactly equal shares; labels IID.

    Parameters
    ----------
    labels : int array [n]
    num_nodes : N
    rng : the generator every draw comes from
    sigma : standard deviation of the log shares, a finite number >= 0
    min_size : the fewest samples a node may hold

    Returns
    -------
    list of N int64 arrays, every sample dealt once

    Raises
    ------
    ValueError
        for sigma or min_size out of range, or when no draw in MAX_REDRAWS gives every node
        min_size samples.
    """
    if not (np.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma}")
    n = len(labels)
    _check_min_size(min_size, n, num_nodes)
    order = rng.permutation(n).astype(np.int64)
    for _ in range(MAX_REDRAWS):
        shares = rng.lognormal(0.0, sigma, size=num_nodes)
        cuts = _cuts(shares / shares.sum(), n, LOGNORMAL_CUT_TOLERANCE)
        if np.diff(np.concatenate(([0], cuts, [n]))).min() >= min_size:
            return np.split(order, cuts)
    raise ValueError(f"no draw in {MAX_REDRAWS} gave each of {num_nodes} nodes min_size = "
                     f"{min_size} of {n} samples at sigma {sigma}; lower min_size")


def by_group(groups: Sequence[int] | np.ndarray) -> Partitioner:
    """A natural partition by each training sample's group (writer, user, device, hospital).

    The groups are shuffled and dealt to the nodes in turn, so a node holds one group when there
    are as many groups as nodes, several when there are more.

    Parameters
    ----------
    groups : [n] group id of each training sample.

    Returns
    -------
    Partitioner, (labels, num_nodes, rng) -> index arrays; it raises ValueError when the group ids
    are not one per training sample or there are fewer groups than nodes.
    """
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


def subsample(per_node: int) -> Partitioner:
    """Every node draws `per_node` distinct samples uniformly, independently of the other nodes.

    For populations larger than the dataset (100,000 nodes on Fashion-MNIST's 60,000 samples):
    nodes share samples, each held by about N per_node / n nodes, so the run needs
    `data.allow_overlap = true`. Labels IID. O(N per_node) work: with per_node <= n / 2 every
    row is drawn with replacement, then its repeated entries are redrawn until none is left (a
    redrawn entry repeats another with probability below per_node / n <= 1/2); above n / 2 each
    row is the head of a random permutation of the n samples.

    Parameters
    ----------
    per_node : samples of each node, at least 1.

    Returns
    -------
    Partitioner, (labels, num_nodes, rng) -> index arrays; it raises ValueError when a node would
    need more samples than there are.

    Examples
    --------
    >>> rows = subsample(3)(np.zeros(5), 4, np.random.default_rng(0))
    >>> [len(set(r)) for r in rows]
    [3, 3, 3, 3]
    """
    if int(per_node) != per_node or per_node < 1:
        raise ValueError(f"per_node must be an integer >= 1, got {per_node}")
    per_node = int(per_node)

    def partitioner(labels: np.ndarray, num_nodes: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
        n = len(labels)
        if per_node > n:
            raise ValueError(f"subsample: {per_node} distinct samples a node, the dataset has {n}")
        if 2 * per_node > n:  # redrawing would collect coupons: O(n) a row instead
            every = np.broadcast_to(np.arange(n), (num_nodes, n))
            return list(rng.permuted(every, axis=1)[:, :per_node].astype(np.int64))
        rows = rng.integers(0, n, size=(num_nodes, per_node))
        while True:
            rows.sort(axis=1)
            repeated = np.zeros(rows.shape, dtype=bool)
            repeated[:, 1:] = rows[:, 1:] == rows[:, :-1]
            if not repeated.any():
                break
            rows[repeated] = rng.integers(0, n, size=int(repeated.sum()))
        rows = rng.permuted(rows, axis=1)  # a random order within each node
        return list(rows.astype(np.int64))

    partitioner.__qualname__ = f"subsample({per_node})"
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
    "label_dirichlet": Method(label_dirichlet, ("alpha", "min_size", "cut_tolerance"),
                              "NIID-Bench noniid-labeldir (Li et al. 2022), DisPFL / DFedSAM "
                              "code"),
    "quantity_dirichlet": Method(quantity_dirichlet, ("alpha", "min_size", "cut_tolerance"),
                                 "NIID-Bench iid-diff-quantity"),
    "quantity_lognormal": Method(quantity_lognormal, ("sigma", "min_size"), "FedLab unbalanced "
                                 "split"),
}


def partition(labels: np.ndarray, num_nodes: int, method: str | Partitioner, *, seed: int = 0,
              allow_overlap: bool = False, **params: float) -> list[np.ndarray]:
    """One int64 index array per node into `labels`, by a named method or a partitioner function.

    Parameters
    ----------
    labels : [n] labels of the training samples.
    num_nodes : N, in [1, n] (any N >= 1 with `allow_overlap`).
    method : a name of PARTITIONS, or a function (labels, num_nodes, rng) -> index lists.
    seed : the generator's seed.
    allow_overlap : whether a sample may go to more than one node.
    **params : the named method's parameters (those it takes are read: alpha, min_size, ...).

    Returns
    -------
    list of N int64 arrays, checked (`check_partition`).

    Raises
    ------
    ValueError
        for labels that are not 1-D, num_nodes out of range, an unknown method, and what
        `check_partition` refuses.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if num_nodes < 1 or (num_nodes > len(labels) and not allow_overlap):
        raise ValueError(f"num_nodes must be in [1, {len(labels)}] (number of samples; more "
                         f"nodes share samples only with allow_overlap), got {num_nodes}")
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
    """`rows` as one int64 array per node, checked.

    Parameters
    ----------
    rows : one index list (or 1-D array, tensor) per node, or a 2-D array.
    num_nodes : N.
    num_train : training samples (indices must be below it), or None to leave them unchecked.
    allow_overlap : whether a sample may be given twice.

    Returns
    -------
    list of N int64 arrays.

    Raises
    ------
    ValueError
        naming the problem: not `num_nodes` lists, a list that is not 1-D integers, a node with no
        sample, an index outside 0..num_train - 1, or a sample given twice (unless
        `allow_overlap`).
    """
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


def _check_cut_tolerance(cut_tolerance: float) -> None:
    if not 0 <= cut_tolerance < 1:
        raise ValueError(f"cut_tolerance must be in [0, 1), got {cut_tolerance}")


def _cuts(shares: np.ndarray, n: int, tolerance: float) -> np.ndarray:
    """The N - 1 inner cut points of n items split by `shares` [N] (summing to 1):
    floor(cumsum(shares) * n + tolerance), NIID-Bench's `(np.cumsum(p) * n).astype(int)[:-1]`
    at tolerance 0."""
    return np.floor(np.cumsum(shares) * n + tolerance).astype(np.int64)[:-1].clip(0, n)


def _group_by_node(node_of: np.ndarray, num_nodes: int,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """Sample indices grouped by their node (`node_of` [n]), each node's in random order."""
    order = np.lexsort((rng.random(len(node_of)), node_of))
    sizes = np.bincount(node_of, minlength=num_nodes)
    return np.split(order.astype(np.int64), np.cumsum(sizes)[:-1])
