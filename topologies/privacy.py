"""Pairwise network differential privacy of gossip (Muffliato's accounting, from powers of W).

Every node adds independent Gaussian noise N(0, sigma^2 I) to its value y_j and the nodes run
`steps` gossip steps x^{t+1} = W x^t from x^0 = y. Node i sees the messages its in-neighbours w
send it, x^t_w = (W^t y)_w for t = 0..steps-1. Changing node j's value by at most Delta moves
that message by Delta (W^t)[w, j] under noise of variance sigma^2 ||(W^t)[w, :]||^2, so the
Renyi divergence of order alpha of all of i's view is at most alpha * Delta^2 / (2 sigma^2)
times

    S[i, j] = sum_{t < steps} sum_{w in N(i)} (W^t)[w, j]^2 / ||(W^t)[w, :]||^2

(Cyffers, Even, Bellet, Massoulie, "Muffliato: Peer-to-Peer Privacy Amplification for
Decentralized Optimization and Averaging", NeurIPS 2022, Theorem 1; the t = 0 term is the
neighbour's own noisy value, so a neighbour always has at least the local-DP loss). Rounds of a
training run compose by adding their S. S is not symmetric in general: a hub observes more
messages than a leaf (on the path 0 - 1 - 2 with two steps, S[1, 0] = 9/5 but S[0, 1] = 4/3).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topologies.mixing import Matrix


def gossip_exposure(W: Matrix, steps: int = 1) -> np.ndarray:
    """Muffliato's pairwise exposure S of `steps` gossip steps with W (module docstring).

    Parameters
    ----------
    W : [n, n] mixing matrix, dense or scipy.sparse, W[i, w] > 0 when node i receives from w
        (the house convention: W[j, i] is the share of i's mass sent to j).
    steps : gossip steps after the noise is added, at least 1.

    Returns
    -------
    float64 [n, n] array, S[i, j] for the observer i and the data owner j; inf on the diagonal
    (a node knows its own data), 0 for a j whose messages never reach i's neighbours.

    Examples
    --------
    >>> from topologies.mixing import doubly_stochastic
    >>> import networkx as nx
    >>> gossip_exposure(doubly_stochastic(nx.path_graph(3)), 2)[1].round(3).tolist()
    [1.8, inf, 1.8]
    """
    M = sp.csr_array(W, dtype=np.float64)  # sparse products: O(steps nnz(W) n), not O(n^3)
    n = M.shape[0]
    observed = sp.csr_array(M != 0, dtype=np.float64)
    observed = sp.csr_array(observed - sp.diags_array(observed.diagonal()))
    power = np.eye(n)  # W^t, dense [n, n]: it fills in within the graph's diameter
    exposure = np.zeros((n, n))
    for _ in range(steps):
        squares = power * power
        norms = squares.sum(axis=1, keepdims=True)
        exposure += observed @ np.divide(squares, norms, out=np.zeros_like(squares),
                                         where=norms > 0)
        power = M @ power
    np.fill_diagonal(exposure, np.inf)
    return exposure


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
