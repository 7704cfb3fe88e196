"""SGP, Stochastic Gradient Push (Assran et al. 2019), and local SGP (OSGP).

Gradient at the de-biased z_i = x_i / w_i, step on the numerator x_i, then (x, w) pushed over a
column-stochastic P. SGP proper takes one local step a round (`local_steps = 1`, enforced); K > 1
steps before each push is local SGP, `osgp`, as the DFedSGPSM paper runs it as a baseline (not
Assran's overlapped SGP).
"""

from __future__ import annotations

from algorithms.base import require_one_local_step
from algorithms.decentralized import PushSum
from p2pfl.options import AlgorithmOptions


class OSGP(PushSum):
    name = "osgp"
    source = "OSGP (local SGP) as the DFedSGPSM paper runs it: arXiv 2310.05093"


class SGP(PushSum):
    name = "sgp"
    source = "SGP: Assran et al. 2019, arXiv 1811.10792"

    def check_options(self, cfg: AlgorithmOptions) -> None:
        super().check_options(cfg)
        require_one_local_step(cfg, "sgp takes one local step a round",
                               ", or run K steps a round as local SGP, osgp")
