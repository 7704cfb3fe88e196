"""OSGP in the DFedSGPSM paper's sense: local SGP.

K local SGD steps on the numerator x_i with gradients at z_i = x_i / w_i, then one Push-Sum
mixing of (x, w) over a column-stochastic P. Not Assran's overlapped SGP.
"""

from __future__ import annotations

from algorithms.decentralized import PushSum


class OSGP(PushSum):
    name = "osgp"
    source = "OSGP (local SGP) as the DFedSGPSM paper runs it: arXiv 2310.05093"
