"""Spectral metrics of mixing matrices.

Functions taking ``W`` accept a dense matrix, a scipy.sparse matrix or a graph (its natural
mixing matrix, see analysis.matrices). Up to DENSE_MAX nodes everything is dense LAPACK; above,
the iterative solvers of scipy.sparse.linalg (ARPACK) on deflated operators.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from analysis import matrices
from analysis.connectivity import why_not_strongly_connected
from analysis.matrices import Matrix, MatrixLike, as_matrix, is_symmetric

SPARSE_K = 20  # eigenpairs asked from ARPACK for a non-symmetric SLEM (k = 1 stops too early)
SPARSE_POWER = 4  # ARPACK runs on B^4: a quarter of its orthogonalisation per product with W
SPARSE_TOL = 1e-4  # ARPACK residual tolerance of the non-symmetric SLEM
SPARSE_RESTARTS = 60  # ARPACK restarts of the non-symmetric SLEM: ~20 s, 15-out, n = 10^5


def _sort_by_modulus(ev: np.ndarray) -> np.ndarray:
    return ev[np.lexsort((-ev.imag, -ev.real, -np.abs(ev)))]


def eigenvalues(W: MatrixLike, k: int | None = None) -> np.ndarray:
    """Eigenvalues of W sorted by modulus, largest first (ties: larger real part first).

    Parameters
    ----------
    W : a graph (its natural matrix) or an [n, n] matrix.
    k : eigenvalues returned. Dense W: all n (or the first k). Sparse W with n > DENSE_MAX: the k
        (default 6) of largest modulus, by ARPACK.

    Returns
    -------
    array, real (float64) for a symmetric W, complex otherwise.
    """
    W = as_matrix(W)
    n = W.shape[0]
    if sp.issparse(W):
        k = min(k or 6, n - 2)
        v0 = np.random.default_rng(0).standard_normal(n)  # ARPACK's default start is random
        solver = sla.eigsh if is_symmetric(W) else sla.eigs
        ev = solver(W, k=k, which="LM", v0=v0, return_eigenvectors=False)
        return _sort_by_modulus(ev)[:k]
    ev = np.linalg.eigvalsh(W) if is_symmetric(W, atol=0.0) else np.linalg.eigvals(W)
    ev = _sort_by_modulus(ev)
    return ev if k is None else ev[:k]


def _require_strongly_connected(W: Matrix, what: str) -> None:
    """ValueError naming the components unless the graph of W is strongly connected."""
    reason = why_not_strongly_connected(W)
    if reason is not None:
        raise ValueError(f"{what} needs a strongly connected graph; W is {reason}")


def perron_vector(W: MatrixLike, tol: float = 1e-12) -> np.ndarray:
    """Right Perron vector pi of a column-stochastic W: ``W pi = pi``, ``sum(pi) = 1``.

    The stationary weights of Push-Sum: ``x(t) -> pi * sum(x(0))``, ``w(t) -> n * pi``. Dense W:
    LAPACK. Sparse W: ARPACK for the one eigenvalue of largest modulus of the lazy ``(I + W) / 2``
    (same pi; 1 is its only eigenvalue of modulus 1), to relative residual `tol`.

    Parameters
    ----------
    W : a graph or an [n, n] column-stochastic matrix.
    tol : relative residual of the sparse solver.

    Returns
    -------
    [n] float64 array, non-negative, summing to 1.

    Raises
    ------
    ValueError
        if the graph of W is not strongly connected: then pi is not unique (several sink
        components) or has zeros (one sink component keeps all the mass), and Push-Sum does not
        reach the average; or if W has no non-negative Perron vector.
    """
    W = as_matrix(W)
    _require_strongly_connected(W, "the Perron vector")
    v = _perron_sparse(W, tol) if sp.issparse(W) else _perron_dense(W)
    pi = v / v.sum()
    if (pi < -1e-9).any():
        raise ValueError("W has no non-negative Perron vector: is it column-stochastic?")
    return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()


def _perron_dense(W: np.ndarray) -> np.ndarray:
    """Eigenvector [n] of the eigenvalue of W closest to 1 (LAPACK), unnormalised."""
    vals, vecs = np.linalg.eig(W)
    return np.real(vecs[:, np.argmin(np.abs(vals - 1.0))])


def _perron_sparse(W: sp.csr_array, tol: float) -> np.ndarray:
    """Eigenvector [n] of the largest-modulus eigenvalue of (I + W) / 2 (ARPACK, k = 1)."""
    n = W.shape[0]
    lazy = sla.LinearOperator((n, n), matvec=lambda x: 0.5 * (x + W @ x), dtype=float)
    vecs = sla.eigs(lazy, k=1, which="LM", tol=tol, v0=np.full(n, 1.0 / n))[1]
    return np.real(vecs[:, 0])


def slem(W: MatrixLike) -> float:
    """Second-largest eigenvalue modulus: max |lambda_k| once the eigenvalue 1 is removed.

    1 (spectral gap 0) when the graph of W is not strongly connected, checked first in
    O(n + m): averaging then never reaches consensus, even where the other eigenvalues are
    smaller (one sink component, e.g. 0 -> 1 <-> 2, keeps 1 simple). A strongly connected W
    can have slem 1 too: a periodic one (the directed ring without self-weights).
    Sparse W: symmetric, Lanczos on ``x -> W x - mean(x)`` (see _slem_symmetric_sparse);
    otherwise the largest modulus ARPACK finds for ``B x = W x - pi sum(x)`` (pi the Perron
    vector), see _slem_nonsymmetric_sparse.

    Parameters
    ----------
    W : a graph or an [n, n] stochastic matrix.

    Returns
    -------
    float in [0, 1] (0 for n <= 1).
    """
    W = as_matrix(W)
    n = W.shape[0]
    if n <= 1:
        return 0.0
    if why_not_strongly_connected(W) is not None:
        return 1.0
    if not sp.issparse(W):
        ev = eigenvalues(W)
        return float(np.abs(np.delete(ev, np.argmin(np.abs(ev - 1.0)))).max())
    v0 = np.random.default_rng(0).standard_normal(n)
    try:
        if is_symmetric(W):
            return _slem_symmetric_sparse(W, v0 - v0.mean())
        return _slem_nonsymmetric_sparse(W, v0)
    except sla.ArpackNoConvergence:
        raise ValueError(f"the sparse eigensolver did not converge for n = {n} (eigenvalues "
                         "clustered near 1?); use a closed form") from None


def _slem_nonsymmetric_sparse(W: sp.csr_array, v0: np.ndarray) -> float:
    """Largest modulus among the eigenvalues ARPACK resolves for B = W - pi 1^T.

    ARPACK runs on B^SPARSE_POWER (moduli to that power: a quarter of the orthogonalisation
    per product) for SPARSE_K eigenpairs to residual SPARSE_TOL (slem within 1e-10 of dense
    LAPACK on the test matrices), at most SPARSE_RESTARTS restarts; if they run out, the
    largest converged one counts. Exact when the second eigenvalue stands apart; on a crowded
    edge (random digraphs: a disk of eigenvalues) a lower bound, ~1e-6 relative at n = 10^5
    (bench.analysis). ArpackNoConvergence if none converged.
    """
    n = W.shape[0]
    pi = perron_vector(W)

    def power(x: np.ndarray) -> np.ndarray:
        for _ in range(SPARSE_POWER):
            x = W @ x - pi * x.sum()
        return x

    op = sla.LinearOperator((n, n), matvec=power, dtype=float)
    try:
        ev = sla.eigs(op, k=min(SPARSE_K, n - 2), which="LM", tol=SPARSE_TOL, v0=v0,
                      maxiter=SPARSE_RESTARTS, return_eigenvectors=False)
    except sla.ArpackNoConvergence as err:
        if len(err.eigenvalues) == 0:
            raise
        ev = err.eigenvalues
    return float(np.abs(ev).max() ** (1.0 / SPARSE_POWER))


def _slem_symmetric_sparse(W: sp.csr_array, v0: np.ndarray) -> float:
    """max(lambda_2, -lambda_n) of a symmetric stochastic W from the deflated operator W - J.

    Lanczos for the top of the spectrum; the bottom only when Gershgorin
    (lambda_n >= 2 min_i W_ii - 1) cannot rule it out.
    """
    n = W.shape[0]
    op = sla.LinearOperator((n, n), matvec=lambda x: W @ x - x.mean(), dtype=float)
    opts = {"k": 1, "tol": 1e-8, "v0": v0, "ncv": 20, "maxiter": 20000,
            "return_eigenvectors": False}
    top = float(sla.eigsh(op, which="LA", **opts)[0])
    if 2.0 * W.diagonal().min() - 1.0 >= -top:
        return max(top, 0.0)
    bottom = float(sla.eigsh(op, which="SA", **opts)[0])
    return max(top, -bottom, 0.0)


def spectral_gap(W: MatrixLike) -> float:
    """1 - slem(W).

    Parameters
    ----------
    W : a graph or an [n, n] stochastic matrix.

    Returns
    -------
    float in [0, 1].
    """
    return 1.0 - slem(W)


def ergodicity_coefficient(W: MatrixLike) -> float:
    """Dobrushin coefficient of a column-stochastic W.

    ``tau(W) = 1 - min_{i,j} sum_k min(W[k, i], W[k, j])``: how far two senders' columns are
    from sharing their recipients. ``slem(W) <= tau(W)`` and ``tau(AB) <= tau(A) tau(B)``;
    tau = 1 exactly when two senders have no common recipient (one step of a sparse graph).

    Parameters
    ----------
    W : a graph or an [n, n] column-stochastic matrix.

    Returns
    -------
    float in [0, 1].
    """
    W = as_matrix(W)
    n = W.shape[0]
    if sp.issparse(W):
        support = (W > 0).astype(np.int32)
        common = support.T @ support  # common[i, j] = number of recipients i and j share
        if common.nnz < n * n:
            return 1.0
        W = W.toarray()
    overlap = np.empty((n, n))
    rows = max(1, 2**24 // max(n * n, 1))  # bound the [rows, n, n] temporary to ~128 MB
    for start in range(0, n, rows):
        block = W[:, start:start + rows]
        overlap[start:start + rows] = np.minimum(block.T[:, :, None], W[None]).sum(axis=1)
    return float(max(0.0, 1.0 - overlap.min()))


def _limit(W: np.ndarray) -> np.ndarray:
    """pi 1^T, the limit of W^t (J when W is doubly stochastic)."""
    n = W.shape[0]
    doubly = np.allclose(W.sum(axis=1), 1.0, rtol=0.0, atol=1e-12)
    pi = np.full(n, 1.0 / n) if doubly else perron_vector(W)
    return np.outer(pi, np.ones(n))


def mixing_time(W: MatrixLike, eps: float = 1e-3, max_rounds: int = 10**6) -> int | None:
    """epsilon-averaging time ``min{t : ||W^t - pi 1^T||_2 <= eps}``.

    pi 1^T = J for a doubly-stochastic W. Exact: since ``||W^t - pi 1^T||_2 >= slem^t``, no
    t below ``ln(1/eps) / ln(1/slem)`` can qualify; from there the norm is checked round by
    round (for a normal W the first candidate is the answer). Sparse W (n > DENSE_MAX): the
    candidate ``ceil(ln(1/eps) / ln(1/slem))`` itself, exact for normal W.

    Parameters
    ----------
    W : a graph or an [n, n] stochastic matrix.
    eps : tolerance, in (0, 1).
    max_rounds : largest t checked.

    Returns
    -------
    int, or None when W never mixes (slem = 1): its graph is not strongly connected
    (`why_not_strongly_connected` says how) or it is periodic.

    Raises
    ------
    ValueError
        if eps is not in (0, 1) or no t <= max_rounds qualifies.
    """
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    W = as_matrix(W)
    rate = slem(W)
    if rate >= 1.0 - 1e-12:
        return None
    start = 1 if rate == 0.0 else max(1, math.ceil(math.log(eps) / math.log(rate) - 1e-9))
    if sp.issparse(W):
        return start
    E = W - _limit(W)  # (W - pi 1^T)^t = W^t - pi 1^T
    power = np.linalg.matrix_power(E, start)
    for t in range(start, max_rounds + 1):
        if np.linalg.norm(power, "fro") <= eps or np.linalg.norm(power, 2) <= eps:
            return t
        power = E @ power
    raise ValueError(f"||W^t - pi 1^T|| > {eps} for every t <= max_rounds = {max_rounds}")


def algebraic_connectivity(G: nx.Graph, weight: str | None = None) -> float:
    """Second-smallest eigenvalue mu_2 of the Laplacian L = D - A of an undirected graph.

    mu_2 > 0 iff G is connected (Fiedler 1973). Dense for n <= DENSE_MAX, else shift-invert
    Lanczos on L.

    Parameters
    ----------
    G : an undirected networkx graph.
    weight : the edge attribute of the weights; None: unweighted.

    Returns
    -------
    float (0 for fewer than 2 nodes).

    Raises
    ------
    TypeError
        for anything but a networkx graph.
    ValueError
        on a DiGraph (use the Push-Sum slem for directed graphs).
    """
    if not isinstance(G, nx.Graph):
        raise TypeError(f"algebraic_connectivity takes a networkx graph, got {type(G).__name__}")
    if G.is_directed():
        raise ValueError("algebraic connectivity is defined for undirected graphs only; "
                         "use slem(column_stochastic(G)) for a directed graph")
    n = G.number_of_nodes()
    if n < 2:
        return 0.0
    L = nx.laplacian_matrix(G, nodelist=sorted(G), weight=weight).astype(float)
    if n <= matrices.DENSE_MAX:
        return float(np.linalg.eigvalsh(L.toarray())[1])
    vals = sla.eigsh(sp.csc_array(L), k=2, sigma=-1e-6, which="LM", return_eigenvectors=False)
    return float(np.sort(vals)[1])
