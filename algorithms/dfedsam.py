"""DFedSAM and DFedSAM-MGS (Shi et al. 2023).

DFedSAM: K local SAM steps of radius rho (one global norm, same minibatch for both passes), then
x_i <- sum_j W_ij y_j^K. DFedSAM-MGS: Q = `gossip_steps` exchanges over the round's W_t,
x <- W_t^Q y, costing Q model copies per edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.baselines import Baseline
from algorithms.decentralized import Gossip
from algorithms.options import DFL_RHO, GossipSteps, Robust, Sam
from p2pfl.options import AlgorithmOptions, paper_default


class DFedSAM(Gossip):
    name = "dfedsam"
    source = "DFedSAM: Shi et al. 2023, arXiv 2302.04083"

    @dataclass
    class Options(Sam, Robust, AlgorithmOptions):
        rho: float = paper_default(Sam, "rho", 0.05, DFL_RHO)

    baselines = (Baseline({"rho": 0.0}, "DFedAvg (no SAM ascent)"),)


class DFedSAMMGS(Gossip):
    name = "dfedsam_mgs"
    source = "DFedSAM-MGS: Shi et al. 2023, arXiv 2302.04083"

    @dataclass
    class Options(GossipSteps, DFedSAM.Options):
        gossip_steps: int = paper_default(
            GossipSteps, "gossip_steps", 4, "unconfirmed: Shi et al. 2023 (arXiv 2302.04083) "
            "compare Q in {1, 2, 4, 8}; 4, as configs/dfedsgpsm_paper runs it")

    baselines = (Baseline({"rho": 0.0, "gossip_steps": 1}, "DFedAvg (no SAM ascent, one "
                          "gossip step)"),
                 Baseline({"rho": 0.0}, "DFedAvg with Q gossip steps (no SAM ascent)"),
                 Baseline({"gossip_steps": 1}, "DFedSAM (one gossip step)"))
