"""DFedSGPSM-S (Li et al. 2023, Appendix A.1; spec 2.9): DFedSGPSM whose nodes choose their
out-neighbours by loss, Pr(i picks j) = |f_i - f_j| / sum_l |f_i - f_l| (`topology.selection =
"loss_based"`; "loss_softmax" is the [U] alternative), f = each node's latest training loss.

The selection itself is the topology's (`topologies.selection`); the engine passes this
algorithm's `selection_losses()` to the schedule every round.
"""

from __future__ import annotations

from algorithms.dfedsgpsm import DFedSGPSM
from p2pfl.config import ConfigError
from p2pfl.context import RunContext


class DFedSGPSMS(DFedSGPSM):
    name = "dfedsgpsm_s"

    def setup(self, ctx: RunContext) -> None:
        topo = ctx.cfg.topology
        if topo.name != "random_out" or topo.selection == "random":
            raise ConfigError("topology.selection", f"{self.name} selects its out-neighbours by "
                              "loss: use topology.name = 'random_out' with selection = "
                              f"'loss_based' (or 'loss_softmax'), got {topo.name!r} / "
                              f"{topo.selection!r}")
        super().setup(ctx)
