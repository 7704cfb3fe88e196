"""DFedSGPSM (Li et al., "Asymmetrically Decentralized Federated Learning", Algorithm 1).

Round t, node i, w_i frozen during the local phase, for k = 0..K-1:
  1. de-bias z = x_{i,k} / w_i;            2. g = grad F_i(z; xi);
  3. ascent z' = z + rho * g / ||g||;      4. g~ = grad F_i(z'; xi) (same minibatch);
  5. m = momentum * m + g~ (m_{-1} = 0);    6. x_{i,k+1} = x_{i,k} - lr * m.
`momentum_form = "dampened"` uses m = momentum * m + (1 - momentum) * g~ instead.
Then node i pushes (P_ji x_{i,K}, P_ji w_i) to its out-neighbours and itself; x and w are mixed
with the same column-stochastic P and z = x / w is de-biased again.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

import topologies as T
from algorithms.base import RoundReport
from algorithms.baselines import Baseline
from algorithms.decentralized import PushSum
from algorithms.options import (
    DFEDSGPSM_CLIP,
    DFEDSGPSM_MOMENTUM,
    DFL_RHO,
    Momentum,
    MomentumForm,
    Sam,
)
from p2pfl.context import RunContext
from p2pfl.options import AlgorithmOptions, paper_default


class DFedSGPSM(PushSum):
    name = "dfedsgpsm"
    source = "DFedSGPSM: Li et al. 2023, arXiv 2310.05093, Algorithm 1"

    @dataclass
    class Options(MomentumForm, Sam, AlgorithmOptions):
        rho: float = paper_default(Sam, "rho", 0.05, DFL_RHO)
        momentum: float = paper_default(Momentum, "momentum", 0.9, DFEDSGPSM_MOMENTUM)
        clip_norm: float = paper_default(AlgorithmOptions, "clip_norm", 10.0, DFEDSGPSM_CLIP)

    baselines = (Baseline({"rho": 0.0, "momentum": 0.0},
                          "OSGP, local SGP (no SAM ascent, no local momentum)"),
                 Baseline({"rho": 0.0}, "DFedSGPM (no SAM ascent)"),
                 Baseline({"momentum": 0.0}, "local SGP with SAM steps (no local momentum)"))

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        """Algorithm 1, round t."""
        self.phase_weights = self.weights  # w_i is frozen during the local phase
        # Steps 1-6 for k = 0..K-1, every online node at once (p2pfl.core.solver): the gradient
        # g at z = x / w, the ascent z' = z + rho g / ||g||, g~ at z' on the same minibatch
        # (self.solver.rho), m = momentum m + g~ with m_{-1} = 0 (self.solver.momentum; the
        # dampened form is the same solver with lr (1 - momentum): `step_size`), and
        # x <- x - lr m taken on the stored z as z <- z - (lr / w_i) m (`node_lr`).
        nodes, losses = self.local_phase(ctx, t, faults)
        # Step 7: push (P_ji x_i, P_ji w_i) to the out-neighbours and itself; de-bias z = x / w.
        return self.push(ctx, t, graph, faults, nodes, losses)
