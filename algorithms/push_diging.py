"""Push-DIGing (Nedic, Olshevsky and Shi 2017): gradient tracking with Push-Sum on directed,
time-varying graphs.

"Achieving geometric convergence for distributed optimization over time-varying graphs", SIAM J.
Optim. 27 (2017), Algorithm 2 (Push-DIGing), with the column-stochastic C(k) of round k:

    u_{k+1} = C(k) (u_k - lr y_k)
    v_{k+1} = C(k) v_k,                x_{k+1} = u_{k+1} / v_{k+1}
    y_{k+1} = C(k) y_k + g(x_{k+1}) - g(x_k),            v_0 = 1, y_0 = g(x_0)

On the engine's Push-Sum round (algorithms/decentralized.py) u is the numerator, v the weight and
x the de-biased model z the population stores: the gradient is taken at x, the step of lr * y on
u is a step of lr / v on x, and (u, v) are mixed as Push-Sum mixes them. The trackers are pushed
with the same C (they are not de-biased). A message carries u_i, y_i and v_i (2 copies and one
float64). The tracker rule is algorithms/tracking.py's; one local step a round is the paper's form.
"""

from __future__ import annotations

import networkx as nx

import topologies as T
from algorithms.base import RoundReport
from algorithms.decentralized import PushSum
from algorithms.tracking import Tracking
from p2pfl.context import RunContext


class PushDIGing(Tracking, PushSum):
    name = "push_diging"
    source = "Push-DIGing: Nedic, Olshevsky, Shi 2017, SIAM J. Optim., Algorithm 2"

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        self.phase_weights = self.weights
        nodes, losses = self.local_phase(ctx, t, faults)
        C = T.column_stochastic(graph, faults=faults, sparse=self.sparse_mixing(ctx, graph))
        self.mix(ctx, C)
        ctx.comm.mix(ctx.comm.matrix(C), self.trackers.y)
        messages = self.delivered(graph, faults)
        return RoundReport(nodes, losses, 2 * messages, scalars_sent=messages)
