"""Push-Sum messages in flight (overlap Push-Sum, Assran et al. 2019): a message sent in round t
that arrives d rounds late is added to its receiver's numerator and weight at the end of round
t + d. When d is known as the message is sent, what is in flight is one stacked buffer per
arrival round (numerators [N, *shape] in the run's dtype, weights [N] in float64); when it is
known only on arrival (the flow network), it is the senders' z [N, *shape] and w [N] of every
round with a message still in flight, with the shares still in flight. Never a Python object
per message; the mass sum_i w_i + (weights in flight) stays N.
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
    """The Push-Sum mass sent but not yet arrived: by arrival round when a message's delay is
    known when it is sent (`mix`), else by the round it was sent (`mix_arrived`: the senders'
    z and w then, and the shares P_ji still in flight)."""

    def __init__(self) -> None:
        self.due: dict[int, tuple[Params, torch.Tensor]] = {}  # round -> (numerators, weights)
        self.sent: dict[int, tuple[Params, torch.Tensor, sp.csr_array]] = {}  # round -> (z, w, P)
        self._spare: list[Params] = []  # consumed buffers, reused (fresh ones page-fault)

    def __bool__(self) -> bool:
        return bool(self.due) or bool(self.sent)

    def weight(self) -> float:
        """Total Push-Sum weight in flight."""
        sent = sum(float((P @ w.cpu().numpy()).sum()) for _, w, P in self.sent.values())
        return float(sum(w.sum().item() for _, w in self.due.values())) + sent

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
        return self._set(ctx, new_x, new_w)  # a node without mass keeps its z

    def mix_arrived(self, ctx: RunContext, t: int, P: Any,
                    sent: tuple[np.ndarray, np.ndarray],
                    arrived: tuple[np.ndarray, np.ndarray, np.ndarray],
                    weights: torch.Tensor) -> torch.Tensor:
        """End of round t when the network says only which messages have arrived: send the
        population's (x, w) = (w z, w) over P, the messages `sent` in flight, add the messages
        `arrived` (of this round or earlier ones, from their senders' z and w then), and set the
        population to z' = x' / w'.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        P : [N, N] column-stochastic, dense or scipy.sparse.
        sent : (src, dst) int arrays: the round's messages (the other entries of P, what a node
            keeps, arrive at once).
        arrived : (src, dst, round sent) int arrays: the messages taken at the end of round t.
        weights : [N] float64, the Push-Sum weights w.

        Returns
        -------
        [N] float64 tensor, w'.
        """
        params = ctx.population.params
        src, dst = sent
        parts = split_by_delay(P, (src, dst, np.ones(len(src), dtype=np.int64)))
        if 1 in parts and parts[1].nnz:
            self.sent[t] = ({k: v.clone() for k, v in params.items()}, weights.clone(), parts[1])
        new_w, new_x = torch.zeros_like(weights), None
        a_src, a_dst, a_round = arrived
        sources = [(parts[0], params, weights)] if 0 in parts else []
        for s in np.unique(a_round).tolist():
            if s not in self.sent:  # its messages carry shares of 0 (a weight-0 edge)
                continue
            z_s, w_s, pending = self.sent[s]
            at = a_round == s
            rows, cols = a_dst[at], a_src[at]
            M = sp.csr_array((np.asarray(pending[rows, cols]).ravel(), (rows, cols)),
                             shape=pending.shape)
            sources.append((M, z_s, w_s))
            pending = sp.csr_array(pending - M)
            pending.eliminate_zeros()
            if pending.nnz:
                self.sent[s] = (z_s, w_s, pending)
            else:
                del self.sent[s]
        for part, z, w in sources:
            M = ctx.comm.matrix(part, dtype=torch.float64)
            new_w += M @ w
            X_op = ctx.comm.matrix(diag_scale(M, w, torch.ones_like(w)))
            fresh = new_x is None
            new_x = ctx.comm.product(X_op, z, self._buffer(params) if fresh else new_x,
                                     add=not fresh)
        return self._set(ctx, new_x, new_w)

    def _set(self, ctx: RunContext, new_x: Params | None, new_w: torch.Tensor) -> torch.Tensor:
        """z <- x' / w' where a node has mass (else it keeps its z); returns w'."""
        params = ctx.population.params
        has_mass = new_w > 0
        if new_x is not None:
            scale = torch.where(has_mass, 1.0 / new_w, 0.0).to(ctx.dtype)
            for k, v in params.items():
                shape = (-1, *([1] * (v.dim() - 1)))
                v.copy_(torch.where(has_mass.view(shape), new_x[k] * scale.view(shape), v))
            self._spare.append(new_x)
        return new_w

    def state_dict(self) -> dict[str, Any]:
        return {"due": {int(t): {"x": {k: v.clone() for k, v in x.items()}, "w": w.clone()}
                        for t, (x, w) in self.due.items()},
                "sent": {int(t): {"z": {k: v.clone() for k, v in z.items()}, "w": w.clone(),
                                  "P": _csr_state(P)} for t, (z, w, P) in self.sent.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        due = state.get("due", {}) if "sent" in state else state  # a checkpoint before "sent"
        self.due = {int(t): ({k: v.clone() for k, v in s["x"].items()}, s["w"].clone())
                    for t, s in due.items()}
        self.sent = {int(t): ({k: v.clone() for k, v in s["z"].items()}, s["w"].clone(),
                              _csr_from(s["P"])) for t, s in state.get("sent", {}).items()}


def _csr_state(A: sp.csr_array) -> dict[str, Any]:
    return {"data": torch.from_numpy(A.data.copy()), "indices": torch.from_numpy(A.indices.copy()),
            "indptr": torch.from_numpy(A.indptr.copy()), "shape": list(A.shape)}


def _csr_from(state: dict[str, Any]) -> sp.csr_array:
    return sp.csr_array((state["data"].cpu().numpy(), state["indices"].cpu().numpy(),
                         state["indptr"].cpu().numpy()), shape=tuple(state["shape"]))
