"""D-PSGD (Lian et al. 2017): x_i <- sum_j W_ij x_j - lr * g_i(x_i), one step a round.

Combine-then-adapt by default: the gradient is taken at the node's own pre-mixing model and
added to the mixed OLD models. With K > 1 local steps (`local_epochs = 1`, the spec's alternative
reading of the source paper) the whole local offset y_i^K - x_i is added the same way.
`order = "atc"` gives the adapt-then-combine form x_i <- sum_j W_ij (x_j - lr * g_j) of the
SGP reference code (= DFedAvg with one step).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

import topologies as T
from algorithms.base import RoundReport
from algorithms.decentralized import Gossip
from algorithms.options import Order
from p2pfl.context import RunContext
from p2pfl.options import AlgorithmOptions


class DPSGD(Gossip):
    name = "dpsgd"
    source = "D-PSGD: Lian et al. 2017, arXiv 1705.09056"

    orders = ("cta", "atc")
    paper_order = "cta"

    @dataclass
    class Options(Order, AlgorithmOptions):
        pass

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        if self.cfg.order == "atc":
            return super().round(ctx, t, graph, faults)
        W, steps = self.gossip_matrix(ctx, graph, faults)
        nodes, losses = self.combine_then_adapt(ctx, t, faults, W, steps)
        return RoundReport(nodes, losses, self.delivered(graph, faults))
