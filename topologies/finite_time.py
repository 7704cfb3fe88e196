"""Finite-time averaging: periodic schedules whose mixing matrices multiply to J = 11^T / n.

The Base-(k+1) family of Takezawa, Sato, Bao, Niwa and Yamada, "Beyond Exponential Graph:
Communication-Efficient Topologies for Decentralized Learning via Finite-time Convergence",
NeurIPS 2023. Every round is an undirected graph in which each node has at most k neighbours;
the edge attribute ``weight`` is the mixing weight, so ``doubly_stochastic(S.at(t))`` is the
round's symmetric matrix W_t (self weight 1 minus the node's edge weights) and
``W_{m-1} ... W_1 W_0 = J`` exactly (up to float rounding) for one period of m rounds.

* ``hyper_hypercube(n, k)``: n whose prime factors are all at most k + 1; one round per factor
  n_l of n = n_1 n_2 ... n_L, in which the nodes that differ only in the l-th mixed-radix digit
  form a complete graph K_{n_l} with weights 1 / n_l. n = (k+1)^p gives p rounds.
* ``simple_base_graph(n, k)``: any n, from the base-(k+1) digits of n.
* ``base_graph(n, k)``: the shorter of the simple graph and a two-stage product (the largest
  divisor of n with prime factors at most k + 1 times the rest); at most 2 log_{k+1}(n) + 2
  rounds.
"""

from __future__ import annotations

from itertools import combinations

import networkx as nx

from topologies._common import ParameterError, check_int
from topologies.registry import register
from topologies.schedules import Cycle, cycle

Edges = list[tuple[int, int, float]]  # one round: undirected edges (i, j, weight)


def _radices(n: int, k: int) -> list[int]:
    """Factors of n, each in [2, k + 1], taken greedily largest first, returned smallest first
    (the reference code's order); ParameterError if n has a prime factor above k + 1."""
    factors, rest = [], n
    for f in range(k + 1, 1, -1):
        while rest % f == 0:
            factors.append(f)
            rest //= f
    if rest != 1:
        raise ParameterError("n", f"= {n} has a prime factor larger than k + 1 = {k + 1}; "
                             "use base_graph(n, k) for any n")
    return factors[::-1]


def _smooth_part(n: int, k: int) -> int:
    """The largest divisor of n whose prime factors are all at most k + 1."""
    part, rest = 1, n
    for p in range(2, k + 2):
        while rest % p == 0:
            rest //= p
            part *= p
    return part


def _cube(nodes: list[int], k: int) -> list[Edges]:
    """k-peer hyper-hypercube rounds on `nodes` (global ids); one edgeless round for one node."""
    m = len(nodes)
    if m == 1:
        return [[]]
    rounds, stride = [], 1
    for f in _radices(m, k):
        cliques = ([nodes[i + d * stride] for d in range(f)]
                   for i in range(m) if (i // stride) % f == 0)
        rounds.append([(a, b, 1.0 / f) for clique in cliques for a, b in combinations(clique, 2)])
        stride *= f
    return rounds


def _side_by_side(parts: list[list[Edges]], t: int) -> Edges:
    """Round t of several schedules on disjoint node sets; a shorter one repeats its rounds
    (each of its rounds after its first pass averages what is already averaged)."""
    return [e for rounds in parts for e in rounds[t % len(rounds)]]


def _is_smooth(n: int, k: int) -> bool:
    return _smooth_part(n, k) == n


def _simple(nodes: list[int], k: int) -> list[Edges]:
    """Simple Base-(k+1) rounds on `nodes`.

    n = sum_l a_l (k+1)^{p_l} (base-(k+1) digits a_l in 1..k, p_1 > p_2 > ... > p_L): the nodes
    split into consecutive blocks V_l of a_l (k+1)^{p_l} nodes, each block into a_l groups of
    (k+1)^{p_l}. Stage 1: every block averages itself (hyper-hypercube). Stage 2, phase r = 1,
    ..., L - 1 in successive rounds: every node of the later blocks V_{>r} links to one node
    of each group of V_r with weight (k+1)^{p_r} / N_r (N_r = |V_r| + |V_{>r}|), the unmatched
    nodes of V_r form cliques of up to k + 1; from the next round on, the groups of V_r
    re-average themselves (p_r rounds). The period ends when V_1's groups are done.
    """
    n, base = len(nodes), k + 1
    if _is_smooth(n, k):
        return _cube(nodes, k)
    digits: list[tuple[int, int]] = []  # (a_l, (k+1)^{p_l}), most significant first
    power = 1
    while power * base <= n:
        power *= base
    while power:
        if (n // power) % base:
            digits.append(((n // power) % base, power))
        power //= base
    blocks, start = [], 0
    for a, size in digits:
        blocks.append(nodes[start:start + a * size])
        start += a * size
    groups = [[block[g * size:(g + 1) * size] for g in range(a)]
              for block, (a, size) in zip(blocks, digits)]
    L = len(blocks)
    whole = [_cube(block, k) for block in blocks]
    sub = [[_cube(group, k) for group in gs] for gs in groups]
    rounds = [_side_by_side(whole, t) for t in range(len(whole[0]))]
    done = [0] * L  # re-averaging rounds each block has run
    r = 0
    while done[0] < len(sub[0][0]):
        edges: Edges = []
        if r < L - 1:
            free = [list(g) for g in groups[r]]
            share = digits[r][1] / sum(len(b) for b in blocks[r:])
            for block in reversed(blocks[r + 1:]):
                for i in block:
                    edges += [(i, g.pop(), share) for g in free]
            left = [j for g in free for j in g]
            for c in range(0, len(left) - 1, base):
                clique = left[c:c + base]
                edges += [(a, b, 1.0 / len(clique)) for a, b in combinations(clique, 2)]
        for v in range(r if r < L - 1 else L):  # blocks done with stage 2 re-average
            parts = [whole[v]] if len(blocks[v]) < base else sub[v]
            edges += _side_by_side(parts, done[v])
            done[v] += 1
        rounds.append(edges)
        r += 1
    return rounds


def _graphs(n: int, rounds: list[Edges]) -> Cycle:
    graphs = []
    for edges in rounds:
        G = nx.Graph()
        G.add_nodes_from(range(n))
        G.add_weighted_edges_from(edges)
        graphs.append(G)
    return cycle(graphs)


def _check(n: int, k: int) -> tuple[int, int]:
    return check_int(n, "n", 1), check_int(k, "k", 1)


@register
def hyper_hypercube(n: int, k: int = 1) -> Cycle:
    """k-peer hyper-hypercube graph (Takezawa et al. 2023): exact averaging in one round per
    factor of n.

    Parameters
    ----------
    n : number of nodes, at least 1, with every prime factor at most k + 1.
    k : largest number of neighbours of a node in one round, at least 1.

    Returns
    -------
    Cycle of undirected weighted graphs. With n = n_1 n_2 ... n_L (factors in [2, k + 1]) and
    node i written in mixed radix (digit l in [0, n_l)), round l joins the n_l nodes that differ
    only in digit l into a clique with weights 1 / n_l. n = (k+1)^p: p rounds; k = 1: the
    hypercube, one dimension per round.

    Examples
    --------
    >>> S = hyper_hypercube(8)
    >>> S.period, sorted(S.at(2)[0]), S.at(2)[0][4]["weight"]
    (3, [4], 0.5)
    """
    n, k = _check(n, k)
    _radices(n, k)
    return _graphs(n, _cube(list(range(n)), k))


@register
def simple_base_graph(n: int, k: int = 1) -> Cycle:
    """Simple Base-(k+1) graph (Takezawa et al. 2023): exact averaging for any n.

    Parameters
    ----------
    n : number of nodes, at least 1.
    k : largest number of neighbours of a node in one round, at least 1.

    Returns
    -------
    Cycle of undirected weighted graphs; the hyper-hypercube when n has no prime factor above
    k + 1. Otherwise, with n = sum_l a_l (k+1)^{p_l} in base k + 1, the blocks of
    a_l (k+1)^{p_l} nodes average themselves, then the later blocks pour into each earlier one
    (weights (k+1)^{p_r} / N_r) and its groups of (k+1)^{p_r} nodes re-average.

    Examples
    --------
    >>> simple_base_graph(5).period, simple_base_graph(6).period, simple_base_graph(8).period
    (5, 5, 3)
    """
    n, k = _check(n, k)
    return _graphs(n, _simple(list(range(n)), k))


@register
def base_graph(n: int, k: int = 1) -> Cycle:
    """Base-(k+1) graph (Takezawa et al. 2023): exact averaging for any n, at most k
    neighbours per node and round, at most 2 log_{k+1}(n) + 2 rounds.

    With n = q r, q the largest divisor of n whose prime factors are at most k + 1, the nodes
    split into q consecutive groups of r nodes that each run the simple Base-(k+1) graph, then
    into r strided groups (one node of each first group) that run the k-peer hyper-hypercube
    on q nodes. This is used unless the simple Base-(k+1) graph on all n nodes is strictly
    shorter.

    Parameters
    ----------
    n : number of nodes, at least 1.
    k : largest number of neighbours of a node in one round, at least 1.

    Returns
    -------
    Cycle of undirected graphs with the mixing weights as edge attribute ``weight``; the
    product of ``doubly_stochastic(S.at(t))`` over each period (rounds mT .. mT + T - 1) is
    J = 11^T / n.

    Examples
    --------
    >>> import numpy as np
    >>> from topologies.mixing import doubly_stochastic
    >>> S = base_graph(6)
    >>> P = np.eye(6)
    >>> for t in range(S.period):
    ...     P = doubly_stochastic(S.at(t)) @ P
    >>> S.period, bool(np.allclose(P, 1 / 6, atol=1e-12))
    (4, True)
    """
    n, k = _check(n, k)
    simple = _simple(list(range(n)), k)
    q = _smooth_part(n, k)
    r = n // q
    firsts = [_simple(list(range(g * r, (g + 1) * r)), k) for g in range(q)]
    seconds = [_cube(list(range(j, n, r)), k) for j in range(r)]
    if len(simple) < len(firsts[0]) + len(seconds[0]):
        return _graphs(n, simple)
    rounds = ([_side_by_side(firsts, t) for t in range(len(firsts[0]))]
              + [_side_by_side(seconds, t) for t in range(len(seconds[0]))])
    return _graphs(n, rounds)
