"""DSGT (Pu and Nedic 2021) and GT-DSGD (Xin, Khan and Kar 2021): stochastic gradient tracking
over a symmetric doubly-stochastic W.

DSGT, Pu and Nedic, "Distributed stochastic gradient tracking methods", Math. Program. 187
(2021), eq. (4), adapt then combine (`tracking_order = "atc"`, the default):

    x_{k+1} = W (x_k - lr y_k)
    y_{k+1} = W y_k + g(x_{k+1}) - g(x_k),          y_0 = g(x_0)

GT-DSGD, Xin, Khan and Kar, "An improved convergence analysis for decentralized online stochastic
non-convex optimization", IEEE TSP 69 (2021), Algorithm 1, combine then adapt
(`tracking_order = "cta"`): x_{k+1} = W x_k - lr y_k, the same tracker. Both send x and y on every
link (2 copies a message). The tracker rule is algorithms/tracking.py's; one local step a round
(`local_steps = 1`) is the papers' form.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

import topologies as T
from algorithms.base import RoundReport
from algorithms.decentralized import Gossip
from algorithms.options import TrackingOrder
from algorithms.tracking import Tracking
from p2pfl.context import RunContext
from p2pfl.options import AlgorithmOptions


class DSGT(Tracking, Gossip):
    name = "dsgt"
    source = "DSGT: Pu and Nedic 2021, Math. Program., eq. (4); cta: GT-DSGD, Xin et al. 2021"

    @dataclass
    class Options(TrackingOrder, AlgorithmOptions):
        pass

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        W, steps = self.gossip_matrix(ctx, graph, faults)
        if self.cfg.tracking_order == "atc":
            nodes, losses = self.local_phase(ctx, t, faults)
            ctx.comm.mix(W, ctx.population.params, steps)
        else:
            nodes, losses = self.combine_then_adapt(ctx, t, faults, W, steps)
        ctx.comm.mix(W, self.trackers.y, steps)
        return RoundReport(nodes, losses, 2 * self.delivered(graph, faults))
