"""Per-round faults: lost messages and offline nodes, and how mixing matrices absorb them.

Convention (docs/topologies.md). A round plans its messages on the full graph G(t);
``sample_faults`` then draws which of them are lost and which nodes are offline:

* ``links[j, i]`` is True when the message i -> j is lost (each directed message independently
  with probability ``link_drop``; an undirected edge is two messages).
* ``nodes[i]`` is True when node i is offline (probability ``node_drop``): it neither trains nor
  sends nor receives. Every message from or to an offline node is lost.

Push-Sum (``column_stochastic(G, faults)``), rule 1, **the sender keeps the undelivered share**
(as robust Push-Sum does on a missing acknowledgement): shares are planned on the full graph
and the share of each lost message is added back to the sender's self weight,
``W[i, i] += W[j, i]; W[j, i] = 0``. An offline node's column is therefore ``e_i`` (it keeps all
its mass). Every column still sums to 1, so the sums of the numerators x and of the push-sum
weights w are conserved (``sum(w) = n``), and z = x / w still reaches the exact average as long
as the delivered edges stay jointly (B-) strongly connected. ``fault_rule="renormalise"`` is
rule 2: the sender knows the failures before sending and splits its mass over itself and the
delivered out-neighbours only (``1 / (d_delivered + 1)`` each; weighted columns are rescaled).

Symmetric algorithms (``doubly_stochastic(G, method, faults)``): an undirected link survives only
if both of its messages are delivered and both ends are online; the Metropolis-Hastings (or
max-degree) weights are recomputed on the surviving graph, so W stays symmetric and doubly
stochastic; an offline node is isolated (row and column ``e_i``).

``row_stochastic(G, faults)`` mirrors Push-Sum with the receiver: the weight of a lost incoming
message goes back to the receiver's self weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies._common import check_nodes, check_probability, messages


@dataclass(frozen=True, eq=False)
class Faults:
    """The faults of one round on n nodes.

    links : bool [n, n] (or a scipy.sparse bool matrix for large n); ``links[j, i]`` is True when
        the message i -> j is lost this round.
    nodes : bool [n]; True when the node is offline this round (it neither trains nor sends nor
        receives).
    """

    links: np.ndarray
    nodes: np.ndarray

    def __post_init__(self) -> None:
        nodes = np.asarray(self.nodes)
        if nodes.ndim != 1 or nodes.dtype != bool:
            raise ValueError(f"nodes must be a bool array [n], got {nodes.dtype} {nodes.shape}")
        n = nodes.shape[0]
        links = self.links
        if links.shape != (n, n) or links.dtype != bool:
            raise ValueError(f"links must be a bool array [{n}, {n}], got "
                             f"{links.dtype} {links.shape}")

    @classmethod
    def none(cls, n: int, sparse: bool = False) -> Faults:
        """No lost message and no offline node on n nodes.

        Parameters
        ----------
        n : nodes.
        sparse : links as an empty scipy CSR array, which costs nothing for large n.

        Returns
        -------
        Faults.
        """
        links = sp.csr_array((n, n), dtype=bool) if sparse else np.zeros((n, n), dtype=bool)
        return cls(links, np.zeros(n, dtype=bool))

    @property
    def empty(self) -> bool:
        """Whether nothing is lost this round (no lost message, no offline node)."""
        links = self.links.nnz if sp.issparse(self.links) else self.links.any()
        return not (links or self.nodes.any())

    @property
    def n(self) -> int:
        return int(self.nodes.shape[0])

    def lost(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Whether each message src[e] -> dst[e] is lost: on the link, or an end is offline.

        Parameters
        ----------
        src, dst : int arrays [E], the messages' senders and receivers.

        Returns
        -------
        bool array [E].
        """
        if len(src) == 0:  # a round without messages (an edgeless graph)
            return np.zeros(0, dtype=bool)
        if sp.issparse(self.links):
            on_link = np.asarray(self.links.tocsr()[dst, src]).ravel().astype(bool)
        else:
            on_link = self.links[dst, src]
        return on_link | self.nodes[src] | self.nodes[dst]

    def losing(self, src: np.ndarray, dst: np.ndarray) -> Faults:
        """These faults with the messages src[e] -> dst[e] lost too.

        Parameters
        ----------
        src, dst : int arrays [E].

        Returns
        -------
        Faults (links sparse when these are).
        """
        n = self.n
        extra = sp.csr_array((np.ones(len(src), dtype=np.int8), (dst, src)), shape=(n, n))
        if sp.issparse(self.links):
            links = (sp.csr_array(self.links, dtype=np.int8) + extra).astype(bool)
        else:
            links = self.links | (extra.toarray() > 0)
        return Faults(links, self.nodes)


def sample_faults(
    G: nx.Graph,
    link_drop: float,
    node_drop: float,
    seed: int | np.random.Generator | None = None,
    *,
    sparse: bool = False,
) -> Faults:
    """Draw one round of faults on the messages of G.

    Parameters
    ----------
    G : the round's graph (nodes 0..n-1); an undirected edge is two messages.
    link_drop : probability in [0, 1) that a message is lost, independently per message.
    node_drop : probability in [0, 1) that a node is offline, independently per node.
    seed : int, numpy Generator or None. Node states are drawn first (n uniforms), then one
        uniform per message in (sender, receiver) order, so a larger drop probability with the
        same seed loses a superset of the messages.
    sparse : return ``links`` as a scipy.sparse CSR bool array (for large n).

    Returns
    -------
    Faults; ``links`` marks only messages of G.

    Examples
    --------
    >>> f = sample_faults(nx.DiGraph([(0, 1), (1, 0)]), 0.0, 0.0, seed=0)
    >>> bool(f.links.any() or f.nodes.any())
    False
    """
    n = check_nodes(G)
    link_drop = check_probability(link_drop, "link_drop", one=False)
    node_drop = check_probability(node_drop, "node_drop", one=False)
    rng = np.random.default_rng(seed)
    nodes = rng.random(n) < node_drop
    src, dst, _ = messages(G)
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    lost = rng.random(src.size) < link_drop
    if sparse:
        links = sp.csr_array((np.ones(int(lost.sum()), dtype=bool), (dst[lost], src[lost])),
                             shape=(n, n))
    else:
        links = np.zeros((n, n), dtype=bool)
        links[dst[lost], src[lost]] = True
    return Faults(links, nodes)
