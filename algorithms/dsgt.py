"""DSGT (Pu and Nedic 2021), GT-DSGD (Xin, Khan and Kar 2021) and DIGing's order (Nedic,
Olshevsky and Shi 2017): stochastic gradient tracking over a symmetric doubly-stochastic W.

`order` picks the order of the updates (g_k = g(x_k), the stochastic gradient at the
current model):

- "atc" (the default), DSGT: Pu and Nedic, "Distributed stochastic gradient tracking methods",
  Math. Program. 187 (2021), eq. (4):

      x_{k+1} = W (x_k - lr y_k)
      y_{k+1} = W y_k + g_{k+1} - g_k,              y_0 = g_0

- "atc_xy", GT-DSGD: Xin, Khan and Kar, "An improved convergence analysis for decentralized
  online stochastic non-convex optimization", IEEE TSP 69 (2021), Algorithm 1, both variables
  mixed after their update (in its indexing y_{k+1} = W (y_k + g_k - g_{k-1}),
  x_{k+1} = W (x_k - lr y_{k+1}), y_0 = 0, g_{-1} = 0):

      v_k     = W (v_{k-1} + g_k - g_{k-1})        (v_{-1} = 0, g_{-1} = 0: v_0 = W g_0)
      x_{k+1} = W (x_k - lr v_k)

  The tracker is mixed before the model steps along it, so a round is two exchanges one after
  the other (v, then x), each carrying one copy.

- "cta", DIGing's order with stochastic gradients: Nedic, Olshevsky and Shi, "Achieving
  geometric convergence for distributed optimization over time-varying graphs", SIAM J. Optim.
  27 (2017) (the undirected method, whose Push-Sum form is `push_diging`):

      x_{k+1} = W x_k - lr y_k
      y_{k+1} = W y_k + g_{k+1} - g_k,              y_0 = g_0

"atc" and "cta" send x and y together, one exchange of 2 copies a round. The tracker rule is
algorithms/tracking.py's; one local step a round (`local_steps = 1`) is the papers' form. With
K_i > 1 steps, g_k is the mean gradient of the phase and every form steps K_i lr_i along its
direction (atc_xy: along the mixed tracker v_k, from x_k).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import torch

import topologies as T
from algorithms.base import RoundReport, value_bytes
from algorithms.decentralized import Gossip
from algorithms.options import Order
from algorithms.tracking import Tracking
from p2pfl.context import RunContext
from p2pfl.core.population import row_scale
from p2pfl.options import AlgorithmOptions


class DSGT(Tracking, Gossip):
    name = "dsgt"
    source = ("DSGT: Pu and Nedic 2021, Math. Program., eq. (4); atc_xy: GT-DSGD, Xin, Khan, Kar "
              "2021, IEEE TSP, Algorithm 1; cta: DIGing, Nedic, Olshevsky, Shi 2017, SIAM J. "
              "Optim.")

    orders = ("atc", "cta", "atc_xy")
    paper_order = "atc"

    @dataclass
    class Options(Order, AlgorithmOptions):
        pass

    @property
    def mixes_tracker_first(self) -> bool:
        """GT-DSGD: the tracker is mixed, then the model steps along it (two exchanges)."""
        return self.cfg.order == "atc_xy"

    def message_bytes(self, num_params: int, dtype: torch.dtype) -> int:
        """x and y in one message (2 copies), or, for GT-DSGD, one copy in each exchange."""
        if self.mixes_tracker_first:
            return num_params * value_bytes(dtype)
        return super().message_bytes(num_params, dtype)

    @property
    def exchanges(self) -> int:
        return 2 if self.mixes_tracker_first else 1

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        W, steps = self.gossip_matrix(ctx, graph, faults)
        if self.cfg.order == "atc":
            nodes, losses = self.local_phase(ctx, t, faults)
            ctx.comm.mix(W, ctx.population.params, steps)
            ctx.comm.mix(W, self.trackers.y, steps)
        elif self.cfg.order == "cta":
            nodes, losses = self.combine_then_adapt(
                ctx, t, faults, lambda models: ctx.comm.mix(W, models, steps))
            ctx.comm.mix(W, self.trackers.y, steps)
        else:
            nodes, losses = self.adapt_along_mixed_trackers(ctx, t, faults, W, steps)
        return RoundReport(nodes, losses, 2 * self.delivered(graph, faults))

    def adapt_along_mixed_trackers(self, ctx: RunContext, t: int, faults: T.Faults,
                                   W: torch.Tensor, steps: int) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
        """GT-DSGD's round: the local phase takes g_k and leaves y_i = v_{k-1,i} + g_{k,i} -
        g_{k-1,i}; then v_k = W y, and x_{k+1} = W (x_k - s v_k) with s_i = K_i lr_i.

        An offline node keeps x_k and its tracker, its row of W being e_i.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        faults : the round's faults.
        W : the mixing operator, in the comm's layout.
        steps : times W is applied.

        Returns
        -------
        tuple (nodes, losses), as `local_phase`.
        """
        params = ctx.population.params
        start = {k: v.clone() for k, v in params.items()}
        nodes, losses = self.local_phase(ctx, t, faults)
        ctx.comm.mix(W, self.trackers.y, steps)
        step = self.trackers.step[nodes]
        for k, v in params.items():
            v.index_copy_(0, nodes, start[k][nodes] - row_scale(step.to(v.dtype), v[nodes])
                          * self.trackers.y[k][nodes])
        ctx.comm.mix(W, params, steps)
        return nodes, losses
