"""What node i's view of private gossip can reveal about node j's data: pairwise exposure bounds.

The protocol. Round t, every online node k releases z_k = x_k + d_k + eta_k, its model plus its
clipped round update plus fresh noise eta_k ~ N(0, sigma^2 I), and the nodes gossip `steps` times
with the round's W: at step s = 0..steps-1 node w sends (W^s z)_w to every i with W[i, w] != 0,
and x <- W^steps z ends the round. An offline node releases nothing new (no noise, no update).

The threat model. Node i is honest but curious: it knows its own data, updates and noise, and
sees every message it receives, in every round. Node j's datasets are neighbouring when they
differ anywhere, so each of j's round updates moves by at most Delta. The Renyi divergence of
order alpha of i's view between two neighbouring datasets of j is at most
alpha Delta^2 / (2 sigma^2) S[i, j]; this module computes S, the pairwise exposure, in two
accountings:

``"reach"`` (a bound for any training run). Count j's releases up to the last round whose release
reaches i's view (a chain of messages from j to one of i's in-neighbours within the run). i's
view is a function of all the releases, and releases of j after that round cannot influence it,
so by post-processing and the adaptive composition of Gaussian mechanisms (Mironov, "Renyi
Differential Privacy", 2017, Proposition 1) S[i, j] is at most that count, however the updates
depend on what the nodes received. It never exceeds the local-DP loss (the count of all of j's
releases) and gives amplification only where j's releases never reach i.

``"linear"`` (the exact divergence when the updates are fixed values, as in gossip averaging).
Then i's view is a linear Gaussian view Y = A eta + mu(d) of all the noise; knowing its own noise,
i subtracts it. j's shift enters where j's noise does, so the divergence of a shift d (one value
per round of j, in units of Delta) is d^T M d with M = A_j^T (A A^T)^+ A_j = V_j^T V_j, the block of
j's columns of the projection onto A's row space (A's columns of i removed). Over every shift of
at most Delta a round, in any number of coordinates, the supremum is at most
min(sum |M|, lambda_max(M) k) for the k rounds M touches; that is exact for one round (M is a
number) and whenever M's signs factor as s s^T (then d = s attains it). It is never above the
"reach" count (lambda_max(M) <= 1).

What neither is: Muffliato's Theorem 1 as published (Cyffers, Even, Bellet, Massoulie, NeurIPS
2022) adds one divergence per message, sum_t sum_{w in N(i)} (W^t)_wj^2 / ||(W^t)_w||^2, as if each
message had independent noise; the messages share noise terms, so that sum is not a bound (on the
path 0 - 1 - 2 with two steps it gives S[0, 2] = 1/3; node 0 knows its own value, so from node 1's
two messages it solves for node 2's: the exact S[0, 2] is 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from topologies._common import ParameterError
from topologies.mixing import Matrix

PRIVACY_ACCOUNTINGS = ("reach", "linear")
LINEAR_LIMIT = 25_000_000  # floats of the linear view's message history (200 MB in float64)


class Reach:
    """The "reach" accounting, one round at a time (module docstring).

    ``latest[i, j]``: the last round whose release of j has reached node i (its view, and so its
    state), -1 before any; ``online``: which nodes released in each round.
    """

    def __init__(self, n: int) -> None:
        self.latest = np.full((n, n), -1, dtype=np.int32)
        self.online: list[np.ndarray] = []

    @property
    def rounds(self) -> int:
        """Rounds accounted so far."""
        return len(self.online)

    def add(self, W: Matrix, steps: int, online: np.ndarray | None = None) -> None:
        """Account one round: the online nodes release, then `steps` gossip steps with W.

        Parameters
        ----------
        W : [n, n] the round's mixing matrix, dense or scipy.sparse; W[i, w] != 0 when i receives
            from w.
        steps : gossip steps after the release, >= 1.
        online : bool [n], the nodes that released this round (default: all).
        """
        n, t = len(self.latest), self.rounds
        released = np.ones(n, dtype=bool) if online is None else np.asarray(online, dtype=bool)
        nodes = np.flatnonzero(released)
        self.latest[nodes, nodes] = t
        # i keeps what it has and takes what each in-neighbour has: a max over the pattern of
        # W + I (every row non-empty, so one reduceat over the CSR rows)
        pattern = sp.csr_array((sp.csr_array(W) != 0) + sp.eye_array(n, dtype=bool))
        pattern.sort_indices()
        for _ in range(steps):
            self.latest = np.maximum.reduceat(self.latest[pattern.indices], pattern.indptr[:-1],
                                              axis=0)
        self.online.append(released)

    def exposure(self) -> np.ndarray:
        """S[i, j]: j's releases up to the last one that reached i (inf on the diagonal).

        Returns
        -------
        float64 [n, n] array.
        """
        n = len(self.latest)
        if not self.online:
            counts = np.zeros((n, n))
        else:
            cumulative = np.cumsum(np.stack(self.online), axis=0)  # [rounds, n]
            columns = np.broadcast_to(np.arange(n), (n, n))
            counts = np.where(self.latest >= 0,
                              cumulative[np.maximum(self.latest, 0), columns], 0).astype(float)
        np.fill_diagonal(counts, np.inf)
        return counts

    def releases(self) -> np.ndarray:
        """Each node's releases so far: its local-DP count.

        Returns
        -------
        float64 [n] array.
        """
        if not self.online:
            return np.zeros(len(self.latest))
        return np.sum(self.online, axis=0).astype(float)

    def state_dict(self) -> dict[str, np.ndarray]:
        """`latest` and the online rounds [rounds, n], for a checkpoint."""
        n = len(self.latest)
        online = np.stack(self.online) if self.online else np.zeros((0, n), dtype=bool)
        return {"latest": self.latest.copy(), "online": online}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore what `state_dict` returned."""
        self.latest = np.asarray(state["latest"], dtype=np.int32).copy()
        self.online = [np.asarray(row, dtype=bool) for row in state["online"]]


def linear_exposure(mixings: Sequence[Matrix], steps: int,
                    online: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The "linear" accounting of rounds of release-then-gossip (module docstring).

    Parameters
    ----------
    mixings : one [n, n] W per round, dense or scipy.sparse.
    steps : gossip steps a round, >= 1.
    online : one bool [n] per round, the nodes that released (default: all, every round).

    Returns
    -------
    float64 [n, n] array, S[i, j] for the observer i and the data owner j; inf on the diagonal.

    Raises
    ------
    ParameterError
        naming accounting when the view's message history would exceed LINEAR_LIMIT floats.

    Examples
    --------
    >>> from topologies.mixing import doubly_stochastic
    >>> import networkx as nx
    >>> W = doubly_stochastic(nx.path_graph(3))
    >>> linear_exposure([W], 2)[0].round(3).tolist()  # node 0 solves for node 2's value
    [inf, 1.0, 1.0]
    """
    rounds = len(mixings)
    Ms = [sp.csr_array(W, dtype=np.float64) for W in mixings]
    n = Ms[0].shape[0] if Ms else 0
    size = steps * n * n * rounds * (rounds + 1) // 2
    if size > LINEAR_LIMIT:
        raise ParameterError("accounting", f"'linear' would hold {size:,} floats for {n} nodes "
                             f"and {rounds} rounds of {steps} steps (limit {LINEAR_LIMIT:,}); "
                             "use 'reach'")
    released = [np.ones(n, dtype=bool) if online is None else np.asarray(online[t], dtype=bool)
                for t in range(rounds)]
    # sent[(t, s)]: the messages of step s of round t as coefficients of the noise so far,
    # [n, (t + 1) n], column t' n + k for node k's noise of round t'
    sent: list[tuple[int, np.ndarray]] = []
    state = np.zeros((n, 0))
    for t, M in enumerate(Ms):
        value = np.hstack([state, np.diag(released[t].astype(float))])
        for _ in range(steps):
            sent.append((t, value))
            value = M @ value
        state = value
    exposure = np.zeros((n, n))
    for i in range(n):
        rows = []
        for t, value in sent:
            senders = Ms[t].indices[Ms[t].indptr[i]:Ms[t].indptr[i + 1]]
            senders = senders[(senders != i) & (Ms[t].data[Ms[t].indptr[i]:Ms[t].indptr[i + 1]]
                                                != 0)]
            block = np.zeros((len(senders), rounds * n))
            block[:, :value.shape[1]] = value[senders]
            rows.append(block)
        exposure[i] = _owners_exposure(np.vstack(rows) if rows else np.zeros((0, rounds * n)),
                                       i, rounds, n)
    np.fill_diagonal(exposure, np.inf)
    return exposure


def _owners_exposure(view: np.ndarray, observer: int, rounds: int, n: int) -> np.ndarray:
    """One observer's row of the "linear" exposure from its view's coefficients.

    Parameters
    ----------
    view : [messages, rounds n], each message as coefficients of every node's noise.
    observer : the node seeing them; its own noise is known to it (its columns dropped).
    rounds, n : the columns' layout (round-major).

    Returns
    -------
    float64 [n] array (0 at the observer, which the caller overwrites).
    """
    A = view.reshape(len(view), rounds, n).copy()
    A[:, :, observer] = 0
    A = A.reshape(len(view), rounds * n)
    if not A.any():
        return np.zeros(n)
    # an orthonormal basis of A's row space: rank-revealing QR of A^T (|R_kk| decreasing)
    Q, R, _ = scipy.linalg.qr(A.T, mode="economic", pivoting=True)
    scale = np.abs(np.diag(R))
    rank = int((scale > scale[0] * max(A.shape) * np.finfo(float).eps).sum())
    V = Q[:, :rank].T.reshape(rank, rounds, n)  # by (round, node)
    M = np.einsum("rtj,rsj->jts", V, V)  # [n, rounds, rounds], owner j's block
    touched = (np.abs(np.einsum("jtt->jt", M)) > 1e-12).sum(axis=1)
    largest = np.linalg.eigvalsh(M)[:, -1]
    return np.minimum(np.abs(M).sum(axis=(1, 2)), np.clip(largest, 0, None) * touched)


def gossip_exposure(mixing: Matrix | Sequence[Matrix], steps: int = 1, *,
                    online: Sequence[np.ndarray] | None = None,
                    accounting: str = "linear") -> np.ndarray:
    """Pairwise exposure S of rounds of release-then-gossip (module docstring).

    Parameters
    ----------
    mixing : [n, n] W (one round) or a sequence of them (one per round), dense or scipy.sparse,
        W[i, w] > 0 when node i receives from w (the house convention: W[j, i] is the share of
        i's mass sent to j).
    steps : gossip steps after each release, at least 1.
    online : one bool [n] per round, the nodes that released (default: all).
    accounting : "linear" (exact when the released updates are fixed values, as in averaging)
        or "reach" (a bound however the updates depend on what the nodes received).

    Returns
    -------
    float64 [n, n] array, S[i, j] for the observer i and the data owner j; inf on the diagonal
    (a node knows its own data), 0 for a j whose releases never reach i.

    Raises
    ------
    ParameterError
        naming steps or accounting.

    Examples
    --------
    >>> from topologies.mixing import doubly_stochastic
    >>> import networkx as nx
    >>> W = doubly_stochastic(nx.path_graph(3))
    >>> gossip_exposure(W, 2)[1].round(3).tolist()
    [1.0, inf, 1.0]
    >>> gossip_exposure([W, W], 1, accounting="reach")[0].tolist()
    [inf, 2.0, 1.0]
    """
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ParameterError("steps", f"must be an integer >= 1, got {steps!r}")
    if accounting not in PRIVACY_ACCOUNTINGS:
        raise ParameterError("accounting", f"must be one of {PRIVACY_ACCOUNTINGS}, "
                             f"got {accounting!r}")
    mixings = [mixing] if sp.issparse(mixing) or np.ndim(mixing) == 2 else list(mixing)
    if accounting == "linear":
        return linear_exposure(mixings, steps, online)
    reach = Reach(sp.csr_array(mixings[0]).shape[0])
    for t, W in enumerate(mixings):
        reach.add(W, steps, None if online is None else online[t])
    return reach.exposure()


def gaussian_coefficient(sensitivity: float, sigma: float) -> float:
    """The Renyi coefficient of one Gaussian release, sensitivity^2 / (2 sigma^2): its Renyi DP
    of order alpha is alpha times it (inf where the ratio overflows, never an error).

    Parameters
    ----------
    sensitivity : how far the value can move, > 0.
    sigma : the noise's standard deviation, > 0.

    Returns
    -------
    float.

    Examples
    --------
    >>> gaussian_coefficient(2.0, 1e-200)
    inf
    """
    with np.errstate(over="ignore"):
        return float(np.square(np.float64(sensitivity) / np.float64(sigma)) / 2)


def rdp_to_dp(coefficient: np.ndarray | float, delta: float) -> np.ndarray:
    """(epsilon, delta)-DP of a Gaussian-type Renyi DP curve eps(alpha) = alpha * coefficient.

    epsilon = min over alpha > 1 of alpha c + log(1/delta) / (alpha - 1), which is
    c + 2 sqrt(c log(1/delta)) (Mironov, "Renyi Differential Privacy", 2017, Proposition 3,
    at the best alpha).

    Parameters
    ----------
    coefficient : c >= 0, any shape (inf stays inf).
    delta : in (0, 1).

    Returns
    -------
    float64 array of c's shape, epsilon.

    Examples
    --------
    >>> float(rdp_to_dp(0.5, np.exp(-2.0)))
    2.5
    """
    c = np.asarray(coefficient, dtype=np.float64)
    return c + 2 * np.sqrt(c * np.log(1 / delta))
