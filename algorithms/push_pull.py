"""Push-Pull (Pu, Shi, Xu and Nedic 2021) and AB (Xin and Khan 2018): gradient tracking on a
directed graph with a row-stochastic R for the models and a column-stochastic C for the trackers.

Push-Pull, "Push-pull gradient methods for distributed optimization in networks", IEEE TAC 66
(2021), Algorithm 1, eq. (3), adapt then combine (`order = "atc"`, the default):

    x_{k+1} = R (x_k - lr y_k)                       (each node pulls x from its in-neighbours)
    y_{k+1} = C y_k + g(x_{k+1}) - g(x_k)            (each node pushes y to its out-neighbours)

AB, Xin and Khan, "A linear algorithm for optimization over directed graphs with geometric
convergence", IEEE Control Systems Letters 2 (2018), eq. (2), combine then adapt
(`order = "cta"`): x_{k+1} = R x_k - lr y_k (their A = R, B = C).

R has R[j, i] = 1 / (d_in(j) + 1) on every message i -> j and C has C[j, i] = 1 / (d_out(i) + 1):
both travel on the same links, a message carries x_i and C's share of y_i (2 copies). The x_i
reach consensus at the optimum of the sum of the nodes' objectives, so the evaluated model is
their plain mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

import topologies as T
from algorithms.base import RoundReport
from algorithms.decentralized import Decentralized
from algorithms.options import Order
from algorithms.tracking import Tracking
from p2pfl.context import RunContext
from p2pfl.options import AlgorithmOptions


class PushPull(Tracking, Decentralized):
    name = "push_pull"
    source = ("Push-Pull: Pu, Shi, Xu, Nedic 2021, IEEE TAC, eq. (3); cta: AB, Xin and "
              "Khan 2018, IEEE L-CSS")
    mixing = "push_pull"

    orders = ("atc", "cta")  # Push-Pull, AB ('atc_xy' is GT-DSGD's order: dsgt)
    paper_order = "atc"

    @dataclass
    class Options(Order, AlgorithmOptions):
        pass

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        sparse = self.sparse_mixing(ctx, graph)
        R = ctx.comm.matrix(T.row_stochastic(graph, faults=faults, sparse=sparse))
        C = ctx.comm.matrix(T.column_stochastic(graph, faults=faults, sparse=sparse))
        if self.cfg.order == "atc":
            nodes, losses = self.local_phase(ctx, t, faults)
            ctx.comm.mix(R, ctx.population.params)
        else:
            nodes, losses = self.combine_then_adapt(ctx, t, faults,
                                                    lambda models: ctx.comm.mix(R, models))
        ctx.comm.mix(C, self.trackers.y)
        return RoundReport(nodes, losses, 2 * self.delivered(graph, faults))
