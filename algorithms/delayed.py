"""Push-Sum messages in flight (overlap Push-Sum, Assran et al. 2019): a message sent in round t
that arrives d rounds late is added to its receiver's numerator and weight at the end of round
t + d. What is in flight is one stacked buffer per arrival round (numerators [N, *shape] in the
run's dtype, weights [N] in float64), never a Python object per message; the mass
sum_i w_i + (weights in flight) stays N.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from p2pfl.context import RunContext
from p2pfl.core.mixing import diag_scale
from p2pfl.core.population import Params


def split_by_delay(P: Any, delays: tuple[np.ndarray, np.ndarray, np.ndarray]
                   ) -> dict[int, sp.csr_array]:
    """P split into one matrix per delay.

    Entries without a delay (the diagonal, what a node keeps) arrive at once (d = 0).

    Parameters
    ----------
    P : [N, N] dense or scipy.sparse, P[j, i] = share of i sent to j.
    delays : (src, dst, late) int arrays [e]: message src -> dst arrives `late` rounds late.

    Returns
    -------
    dict {d: [N, N] scipy CSR of the entries of the messages i -> j that arrive d rounds late};
    the matrices sum to P.
    """
    coo = sp.coo_array(P)
    src, dst, late = delays
    n = coo.shape[0]
    lookup = sp.csr_array((late + 1, (dst, src)), shape=(n, n))  # 0: not listed
    d = np.asarray(lookup[coo.row, coo.col]).ravel().astype(np.int64) - 1
    d[d < 0] = 0
    return {int(k): sp.csr_array((coo.data[d == k], (coo.row[d == k], coo.col[d == k])),
                                 shape=(n, n)) for k in np.unique(d)}


class InFlight:
    """The Push-Sum mass sent but not yet arrived, by arrival round."""

    def __init__(self) -> None:
        self.due: dict[int, tuple[Params, torch.Tensor]] = {}  # round -> (numerators, weights)
        self._spare: list[Params] = []  # consumed buffers, reused (fresh ones page-fault)

    def __bool__(self) -> bool:
        return bool(self.due)

    def weight(self) -> float:
        """Total Push-Sum weight in flight."""
        return float(sum(w.sum().item() for _, w in self.due.values()))

    def _buffer(self, params: Params) -> Params:
        return self._spare.pop() if self._spare else {k: torch.empty_like(v)
                                                      for k, v in params.items()}

    def mix(self, ctx: RunContext, t: int, P: Any,
            delays: tuple[np.ndarray, np.ndarray, np.ndarray],
            weights: torch.Tensor) -> torch.Tensor:
        """End of round t: send the population's (x, w) = (w z, w) over P with `delays`, take what
        arrives now, and set the population to z' = x' / w'.

        Each delay class is one product accumulated into its arrival round's buffer.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        P : [N, N] column-stochastic, dense or scipy.sparse.
        delays : (src, dst, late) int arrays: message src -> dst arrives `late` rounds late.
        weights : [N] float64, the Push-Sum weights w.

        Returns
        -------
        [N] float64 tensor, w'.
        """
        params = ctx.population.params
        new_x, new_w = self.due.pop(t, (None, torch.zeros_like(weights)))
        for d, P_d in sorted(split_by_delay(P, delays).items()):
            M = ctx.comm.matrix(P_d, dtype=torch.float64)
            w_d = M @ weights
            X_op = ctx.comm.matrix(diag_scale(M, weights, torch.ones_like(weights)))
            if d == 0:
                new_w += w_d
                fresh = new_x is None
                new_x = ctx.comm.product(X_op, params, self._buffer(params) if fresh else new_x,
                                         add=not fresh)
            elif t + d in self.due:
                xs, ws = self.due[t + d]
                ctx.comm.product(X_op, params, xs, add=True)
                ws += w_d
            else:
                self.due[t + d] = (ctx.comm.product(X_op, params, self._buffer(params)), w_d)
        has_mass = new_w > 0  # a node that kept nothing and received nothing keeps its z
        if new_x is not None:
            scale = torch.where(has_mass, 1.0 / new_w, 0.0).to(ctx.dtype)
            for k, v in params.items():
                shape = (-1, *([1] * (v.dim() - 1)))
                v.copy_(torch.where(has_mass.view(shape), new_x[k] * scale.view(shape), v))
            self._spare.append(new_x)
        return new_w

    def state_dict(self) -> dict[str, Any]:
        return {int(t): {"x": {k: v.clone() for k, v in x.items()}, "w": w.clone()}
                for t, (x, w) in self.due.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.due = {int(t): ({k: v.clone() for k, v in s["x"].items()}, s["w"].clone())
                    for t, s in state.items()}
