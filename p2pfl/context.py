"""What an algorithm sees of a run: data, population, trainer, communication, schedule, the
divergence guard (an algorithm that trains through a trainer of its own wraps it:
`ctx.guard.wrap(trainer)`), the run's seed for its random streams, what the network loses, and
the Byzantine nodes and the privacy noise of a run that has them.
Not the run's config: an algorithm reads its own options (`self.cfg`), set when it is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import torch

import topologies as T
from p2pfl.core.federated import FederatedData
from p2pfl.core.guard import Guard
from p2pfl.core.mixing import Comm
from p2pfl.core.models import StackedForward
from p2pfl.core.population import Population
from p2pfl.core.seeding import stream_seed
from p2pfl.core.trainer import Trainer
from p2pfl.scale.network import Clock
from topologies import Schedule


@dataclass(frozen=True)
class Byzantine:
    """The Byzantine nodes of a run and what they send ([byzantine], docs/robustness.md): the
    attack's name and its parameters, which the gossip algorithms carry out
    (algorithms/attacks.py)."""

    nodes: tuple[int, ...]  # the Byzantine node ids, increasing
    attack: str  # sign_flip | gaussian | alie | ipm | dissensus | none
    params: dict[str, float] = field(default_factory=dict)  # the attack's, e.g. {"scale": 1.0}
    placement: str = "listed"  # how the nodes were chosen: listed, or [byzantine] placement

    def mask(self, n: int, device: torch.device) -> torch.Tensor:
        """bool [n], True at the Byzantine nodes."""
        mask = torch.zeros(n, dtype=torch.bool, device=device)
        mask[list(self.nodes)] = True
        return mask

    def record(self, n: int) -> dict[str, Any]:
        """What byzantine.json says of the set: the nodes, how they were chosen, the attack and
        the parameters it uses (ALIE's z as computed when [byzantine] z is 0), the honest nodes.

        Parameters
        ----------
        n : the run's nodes.

        Returns
        -------
        dict.
        """
        chosen = set(self.nodes)
        return {"nodes": list(self.nodes), "count": len(self.nodes), "of": n,
                "placement": self.placement, "attack": self.attack, "params": self.params,
                "honest": [i for i in range(n) if i not in chosen]}


@dataclass(frozen=True)
class Privacy:
    """Private gossip ([privacy], docs/robustness.md): each node clips its round update to norm
    `clip` and adds Gaussian noise of standard deviation sigma * clip to every coordinate before
    it is gossiped."""

    sigma: float  # the noise multiplier
    clip: float  # the L2 bound of a node's round update
    delta: float  # the delta of the (epsilon, delta) privacy.json reports
    accounting: str = "reach"  # "reach" (any run) or "linear" (fixed updates), privacy.py


@dataclass
class RunContext:
    device: torch.device
    dtype: torch.dtype
    data: FederatedData
    population: Population
    forward: StackedForward
    trainer: Trainer  # the run's, under the divergence guard (p2pfl.core.guard)
    comm: Comm
    schedule: Schedule
    guard: Guard
    clock: Clock | None = None  # simulated network time, when [network] is enabled
    batch_statistics: bool = False  # the model normalises over the batch (no padded batches)
    seed: int = 0  # the run's seed: its random streams are (seed, name, t) (p2pfl.core.seeding)
    link_drop: float = 0.0  # probability that a message is lost, per message and round
    node_drop: float = 0.0  # probability that a node is offline, per node and round
    eval_batch_size: int = 1000  # samples per model in one evaluation batch
    byzantine: Byzantine | None = None  # nodes that attack ([byzantine])
    privacy: Privacy | None = None  # noise on what is gossiped ([privacy])

    def faults(self, t: int, graph: nx.Graph) -> T.Faults:
        """The lost messages and offline nodes of round t on `graph`.

        Drawn from (seed, "faults", t) with `link_drop` and `node_drop`; with overlap, a node still
        busy with its local phase (a straggler) is offline for the round too, and on the flow
        model a node whose earlier push is still in flight does not push (`Clock.sending`).

        Parameters
        ----------
        t : round, from 0.
        graph : the round's graph (its node ids).

        Returns
        -------
        Faults.
        """
        if self.link_drop == 0 and self.node_drop == 0:
            faults = T.Faults.none(graph.number_of_nodes(), sparse=True)
        else:
            faults = T.sample_faults(graph, self.link_drop, self.node_drop,
                                     seed=stream_seed(self.seed, "faults", t))
        if self.clock is not None and self.clock.net.overlap:
            faults = T.Faults(faults.links, faults.nodes | self.clock.busy(t))
            sending = self.clock.sending(t)
            if sending.any():  # their pushes of this round are kept, as lost messages are
                src, dst, _ = T.messages(graph)
                faults = faults.losing(src[sending[src]], dst[sending[src]])
        return faults

    @property
    def chunks(self) -> tuple[int, int] | None:
        """(train, eval) nodes per batched chunk of the vectorized trainer; None for the loop."""
        t = self.trainer
        return (t.chunk_size, t.eval_chunk_size) if t.vectorized else None

    @property
    def num_nodes(self) -> int:
        """N, the nodes of the network (a process of a distributed run holds a block of them)."""
        return self.population.total

    def all_nodes(self) -> torch.Tensor:
        """The ids of the nodes this process holds (all N in a single process): int64 [rows]."""
        first = self.population.first
        return torch.arange(first, first + self.population.num_nodes, device=self.device)

    def owned(self, nodes: torch.Tensor) -> torch.Tensor:
        """Those of `nodes` (ids, int64 [m]) this process holds, in their order."""
        return nodes[self.population.holds(nodes)]
