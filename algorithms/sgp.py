"""SGP, Stochastic Gradient Push (Assran et al. 2019).

Gradient at the de-biased z_i = x_i / w_i, step on the numerator x_i, then (x, w) pushed over a
column-stochastic P. SGP proper is one step a round (`local_steps = 1`); more steps make it local
SGP, which is `osgp`.
"""

from __future__ import annotations

from algorithms.decentralized import PushSum


class SGP(PushSum):
    name = "sgp"
    source = "SGP: Assran et al. 2019, arXiv 1811.10792"
