"""SGP, Stochastic Gradient Push (Assran et al. 2019; spec 2.5).

Gradients at the de-biased z_i = x_i / w_i, steps on the numerator x_i, then (x, w) pushed over a
column-stochastic P. With one local step per round this is SGP; with K > 1 it is local SGP.
"""

from __future__ import annotations

from algorithms.decentralized import PushSum


class SGP(PushSum):
    name = "sgp"
