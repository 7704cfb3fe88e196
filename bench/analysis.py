"""Benchmark: spectral and connectivity metrics of large sparse topologies.

Rows: SLEM of a random 4-regular graph with Metropolis-Hastings weights (n = 10^4 and 10^5,
sparse Lanczos on the deflated operator), the same at n = 2000 against dense LAPACK, the
Push-Sum SLEM of a random 15-out digraph (n = 10^4 and 10^5, ARPACK for 20 eigenpairs of B^4,
B the deflated operator; at 10^5 also its Perron vector and spectral gap), the SLEM of a
digraph that is not strongly connected (random 2-out, n = 10^5: nodes nobody sends to;
answered by the graph, slem 1) and the exact diameter of the 4-regular graph at n = 10^4
(batched BFS). Prints a table and one JSON line.
`python -m bench.analysis [--n N]`; timings mean something only on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

import analysis as A
from analysis import matrices
from topologies.random_graphs import random_out_graph


def regular_mh(n: int, d: int = 4, seed: int = 0) -> tuple[nx.Graph, sp.csr_array]:
    """Random d-regular graph and its Metropolis-Hastings matrix (I + A) / (d + 1).

    Parameters
    ----------
    n : nodes.
    d : degree.
    seed : the graph's seed.

    Returns
    -------
    tuple (nx.Graph, [n, n] scipy CSR).
    """
    G = nx.random_regular_graph(d, n, seed=seed)
    return G, A.sparse_mixing(G)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Call `fn` once and time it.

    Parameters
    ----------
    fn : the call.

    Returns
    -------
    tuple (its value, seconds).
    """
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def directed_rows(n: int) -> list[tuple[str, int, float, float]]:
    """Perron vector, SLEM and spectral gap of a strongly connected random 15-out digraph, and the
    SLEM of a random 2-out one (not strongly connected), n nodes, push-sum matrices.

    Parameters
    ----------
    n : nodes.

    Returns
    -------
    list of (row name, n, value, seconds).
    """
    K = A.sparse_mixing(random_out_graph(n, 15, seed=0))
    pi, t_pi = timed(lambda: A.perron_vector(K))
    value, t_slem = timed(lambda: A.slem(K))
    gap, t_gap = timed(lambda: A.spectral_gap(K))
    loose = A.sparse_mixing(random_out_graph(n, 2, seed=0))
    one, t_one = timed(lambda: A.slem(loose))
    return [("15-out push-sum perron vector (n min pi)", n, float(n * pi.min()), t_pi),
            ("15-out push-sum slem, ARPACK k=20 on B^4", n, value, t_slem),
            ("15-out push-sum spectral gap", n, gap, t_gap),
            ("2-out push-sum slem, not strongly connected", n, one, t_one)]


def main() -> None:
    """Time the spectral and connectivity metrics of large sparse topologies and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000,
                        help="nodes of the large 4-regular and directed rows")
    args = parser.parse_args()
    rows: list[tuple[str, int, float, float]] = []

    G, W = regular_mh(2000)
    dense, t_dense = timed(lambda: A.slem(W.toarray()))
    matrices.DENSE_MAX, saved = 0, matrices.DENSE_MAX  # force the sparse solver at n = 2000
    sparse, t_sparse = timed(lambda: A.slem(W))
    matrices.DENSE_MAX = saved
    rows += [("4-regular MH slem, dense LAPACK", 2000, dense, t_dense),
             ("4-regular MH slem, sparse Lanczos", 2000, sparse, t_sparse)]
    for n in (10_000, args.n):
        _, W = regular_mh(n)
        value, seconds = timed(lambda W=W: A.slem(W))
        rows.append(("4-regular MH slem, sparse Lanczos", n, value, seconds))
    K = A.sparse_mixing(random_out_graph(10_000, 15, seed=0))
    value, seconds = timed(lambda: A.slem(K))
    rows.append(("15-out push-sum slem, ARPACK k=20 on B^4", 10_000, value, seconds))
    rows += directed_rows(args.n)
    G, _ = regular_mh(10_000)
    value, seconds = timed(lambda: A.diameter(G))
    rows.append(("4-regular exact diameter, batched BFS", 10_000, value, seconds))

    header = f"{'task':<44} {'n':>8} {'value':>14} {'seconds':>9}"
    print(f"Friedman limit of the 4-regular slem: {(1 + 2 * np.sqrt(3)) / 5:.7f}")
    print(header)
    print("-" * len(header))
    for task, n, value, seconds in rows:
        print(f"{task:<44} {n:>8} {value:>14.10g} {seconds:>9.2f}")
    print(json.dumps([{"task": t, "n": n, "value": v, "seconds": s} for t, n, v, s in rows]))


if __name__ == "__main__":
    main()
