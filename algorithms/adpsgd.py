"""AD-PSGD, asynchronous decentralized parallel SGD (Lian, Zhang, Zhang and Liu, ICML 2018).

Every worker i repeats, with no barrier (the paper's Algorithm 1):

1. read its model x_hat_i and compute a stochastic gradient g_i at it (here: its local phase of
   `local_steps = 1` step, whose offset is y - x_hat_i = -lr (g_i + weight_decay x_hat_i));
2. pick a neighbour j at random and average atomically: x_i, x_j <- (x_i + x_j) / 2;
3. apply the gradient to the averaged model: x_i <- x_i - lr g_i.

The gradient is stale: while i computes, its neighbours may average with it, so the model it
is applied to is no longer the one it was taken at (the paper's x_hat). On the simulated clock
the phase takes its compute time; the averaging takes one exchange (a model each way at once:
the longer of the two transfers) and uses both models as they are when it happens; node i then
begins its next phase.

**Deadlock and the bipartite graph.** The real system splits the workers into active ones,
which initiate averagings, and passive ones, which only answer, so that two workers never wait
for each other's locks. Here an averaging is one simulated atomic step without locks, so it
cannot deadlock: every node initiates, with any neighbour. Averagings due at the same instant
are applied in the order of the initiating node's id; those that share no node are one batched
step, so the instant is a sequence of matchings (`successive_matchings`) whose result is that of
applying the averagings one by one in that order.

The partner is uniform among the node's neighbours in the topology's graph of its phase index k
(its k-th averaging uses round k's graph), drawn from (seed, "gossip", k). The staleness the run
records is the age of the gradient applied: the averaging's time minus the time its parameters
were read.

**Unequal speeds.** The paper's objective is sum_i p_i f_i, p_i the probability that an update
is worker i's (1/n for equally fast workers): a fast node applies more gradients here too, so
with unequal speeds and non-identical data what is minimised leans towards the fast nodes'
data (docs/async.md, "Unequal speeds").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import torch

from algorithms.asynchronous import Asynchronous, Instant
from algorithms.base import require_one_local_step
from p2pfl.context import RunContext
from p2pfl.core.population import row_block
from p2pfl.core.seeding import numpy_rng
from p2pfl.options import AlgorithmOptions

if TYPE_CHECKING:
    from p2pfl.scale.mailbox import Delivery


def random_neighbours(graph: nx.Graph, nodes: Sequence[int], u: np.ndarray) -> np.ndarray:
    """One neighbour of each node, uniform among its neighbours (self-loops aside).

    Parameters
    ----------
    graph : the graph (a directed one: the successors).
    nodes : the nodes, [m].
    u : float array [m] of uniforms in [0, 1): node nodes[e] takes its neighbour number
        floor(u[e] * degree) in increasing id order.

    Returns
    -------
    int64 array [m]; -1 for a node without neighbours.
    """
    out = np.full(len(nodes), -1, dtype=np.int64)
    for e, i in enumerate(nodes):
        near = sorted(j for j in graph.neighbors(int(i)) if j != i)
        if near:
            out[e] = near[int(u[e] * len(near))]
    return out


def successive_matchings(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Split pairs, in order, into matchings applied one after the other.

    Pair r goes to the matching after the last one that holds either of its nodes, so applying
    the matchings in turn (each at once) equals applying the pairs one by one in order.

    Parameters
    ----------
    first, second : int arrays [R], the pairs' nodes, in the order they are applied.

    Returns
    -------
    int64 array [R], each pair's matching, from 0.

    Examples
    --------
    >>> successive_matchings(np.array([0, 2, 1]), np.array([1, 3, 2])).tolist()
    [0, 0, 1]
    """
    last: dict[int, int] = {}
    level = np.zeros(len(first), dtype=np.int64)
    for r, (i, j) in enumerate(zip(first.tolist(), second.tolist(), strict=True)):
        level[r] = max(last.get(i, -1), last.get(j, -1)) + 1
        last[i] = last[j] = int(level[r])
    return level


class ADPSGD(Asynchronous):
    """Local step at a read of the model, atomic pairwise averaging, then the step (module
    docstring)."""

    name = "adpsgd"
    source = "AD-PSGD: Lian et al. 2018, ICML, arXiv 1710.06952"
    mixing = "doubly_stochastic"
    couples_sender = True  # an averaging changes both rows

    def check_options(self, cfg: AlgorithmOptions) -> None:
        """Also refuse more than one local step: a worker applies one stochastic gradient.

        Parameters
        ----------
        cfg : the algorithm's options.

        Raises
        ------
        ConfigError
            naming algorithm.local_steps unless it is 1 (and as `Algorithm.check_options`).
        """
        super().check_options(cfg)
        require_one_local_step(cfg, "adpsgd applies one stochastic gradient per averaging")

    def start(self, ctx: RunContext, ev: Instant) -> None:
        ev.begin(np.arange(ctx.num_nodes))

    def partners(self, ctx: RunContext, ev: Instant, nodes: np.ndarray,
                 k: np.ndarray) -> np.ndarray:
        """The neighbour each node averages with after its phase k.

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        nodes : int64 [m].
        k : int64 [m], their phase indices.

        Returns
        -------
        int64 [m], -1 for a node without neighbours.
        """
        out = np.full(len(nodes), -1, dtype=np.int64)
        for kk in np.unique(k).tolist():
            at = np.flatnonzero(k == kk)
            u = numpy_rng(ctx.seed, "gossip", kk).random(ctx.num_nodes)[nodes[at]]
            out[at] = random_neighbours(ev.graph(kk), nodes[at].tolist(), u)
        return out

    def phase_end(self, ctx: RunContext, ev: Instant, nodes: np.ndarray) -> None:
        k = ev.phase(nodes)
        partner = self.partners(ctx, ev, nodes, k)
        alone = partner < 0
        if alone.any():  # no neighbour this round: the gradient alone
            self.apply(ctx, ev, nodes[alone], nodes[alone])
        i, j, k = nodes[~alone], partner[~alone], k[~alone]
        if len(i):
            ev.send(i, j, k, copies=2, both_ways=True)  # a model each way; averaged when it is due

    def arrive(self, ctx: RunContext, ev: Instant, messages: Delivery) -> None:
        order = np.argsort(messages.src, kind="stable")  # the initiators' order
        self.apply(ctx, ev, messages.src[order], messages.dst[order])

    def apply(self, ctx: RunContext, ev: Instant, nodes: np.ndarray, partners: np.ndarray
              ) -> None:
        """Average each node with its partner (itself: none), in order, then add its offset;
        the nodes then begin their next phases.

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        nodes : int64 [R], the initiators (distinct), in order.
        partners : int64 [R].
        """
        params = ctx.population.params
        level = successive_matchings(nodes, partners)
        block = row_block(params)  # bounded temporaries
        for step in range(int(level.max()) + 1 if len(level) else 0):
            at = np.flatnonzero(level == step)
            for start in range(0, len(at), block):
                part = at[start:start + block]
                i, j = (torch.as_tensor(a[part], device=ctx.device) for a in (nodes, partners))
                offsets = ev.offsets(nodes[part])
                for name, v in params.items():
                    mean = v.index_select(0, i).add_(v.index_select(0, j)).mul_(0.5)
                    v.index_copy_(0, j, mean)
                    v.index_copy_(0, i, mean.add_(offsets[name]))
        ev.mixed(ev.time(nodes) - ev.read_s(nodes))
        ev.begin(nodes)
