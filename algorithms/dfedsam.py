"""DFedSAM and DFedSAM-MGS (Shi et al. 2023; spec 2.4).

DFedSAM: K local SAM steps of radius rho (one global norm, same minibatch for both passes), then
x_i <- sum_j W_ij y_j^K. DFedSAM-MGS: Q = `gossip_steps` exchanges over the round's W_t,
x <- W_t^Q y, costing Q model copies per edge.
"""

from __future__ import annotations

from algorithms.decentralized import Gossip


class DFedSAM(Gossip):
    name = "dfedsam"
    options = ("rho",)


class DFedSAMMGS(Gossip):
    name = "dfedsam_mgs"
    options = ("rho", "gossip_steps")
