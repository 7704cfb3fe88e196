"""DFedSAM and DFedSAM-MGS (Shi et al. 2023).

DFedSAM: K local SAM steps of radius rho (one global norm, same minibatch for both passes), then
x_i <- sum_j W_ij y_j^K. DFedSAM-MGS: Q = `gossip_steps` exchanges over the round's W_t,
x <- W_t^Q y, costing Q model copies per edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.decentralized import Gossip
from algorithms.options import Robust, Sam
from p2pfl.options import AlgorithmOptions, option


class DFedSAM(Gossip):
    name = "dfedsam"
    source = "DFedSAM: Shi et al. 2023, arXiv 2302.04083"

    @dataclass
    class Options(Sam, Robust, AlgorithmOptions):
        pass


class DFedSAMMGS(Gossip):
    name = "dfedsam_mgs"
    source = "DFedSAM-MGS: Shi et al. 2023, arXiv 2302.04083"

    @dataclass
    class Options(DFedSAM.Options):
        gossip_steps: int = option(1, low=1, doc="gossip exchanges Q per round (x <- W^Q y)")
