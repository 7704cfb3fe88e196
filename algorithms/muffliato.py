"""Private gossip (Muffliato: Cyffers, Even, Bellet, Massoulie, NeurIPS 2022), [privacy].

After its local phase each node clips its round update d_i = y_i - x_i to norm `clip` and adds
Gaussian noise N(0, (sigma clip)^2 I), then the nodes gossip the noisy models as usual
(x <- W^Q y). Two datasets of node j are neighbouring when they differ anywhere (node-level), so
j's clipped update moves by at most Delta = 2 clip, and Delta / std = 2 / sigma. The run's pairwise
loss is Muffliato's accounting of every round's W and Q (topologies/privacy.py) composed over
rounds: the Renyi DP of order alpha of node j's data in node i's view is alpha c_ij with
c = (2 / sigma^2) sum over rounds of S(W_t, Q), reported as (epsilon, delta)-DP in privacy.json.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from p2pfl.context import Privacy, RunContext
from p2pfl.core.population import Params, per_node_sq_norm, row_scale
from p2pfl.core.seeding import torch_generator
from topologies.mixing import Matrix
from topologies.privacy import gossip_exposure, rdp_to_dp

SENSITIVITY = 2.0  # in units of clip: two clipped updates differ by at most 2 clip


def privatize(ctx: RunContext, t: int, start: Params, online: torch.Tensor) -> None:
    """Clip every online node's round update and add the noise, in place.

    x_i <- x_i^0 + min(1, clip / ||d_i||) d_i + sigma clip xi_i, d_i = x_i - x_i^0, with xi drawn
    from the run's (seed, "privacy", t) stream for all N nodes (an offline node keeps its model).

    Parameters
    ----------
    ctx : the run, with `ctx.privacy`.
    t : round, from 0.
    start : name -> [N, *shape], the models before the local phase.
    online : int64 [m], the nodes that trained (and send).
    """
    privacy = ctx.privacy
    params = ctx.population.params
    update = {k: v - start[k] for k, v in params.items()}
    norm = per_node_sq_norm(update).sqrt()
    sends = torch.zeros(ctx.num_nodes, dtype=ctx.dtype, device=ctx.device)
    sends[online] = 1
    scale = torch.where((norm > privacy.clip) & (sends > 0), privacy.clip / norm,
                        torch.ones_like(norm))
    generator = torch_generator(ctx.seed, "privacy", t)
    for k, v in params.items():
        noise = torch.randn(v.shape, generator=generator, dtype=v.dtype).to(v.device)
        v.copy_(start[k] + row_scale(scale, v) * update[k]
                + row_scale(sends * privacy.sigma * privacy.clip, v) * noise)


class PrivacyLedger:
    """The run's Muffliato exposure so far: the sum of S(W_t, Q) over its rounds ([n, n])."""

    def __init__(self, n: int) -> None:
        self.exposure = np.zeros((n, n))
        np.fill_diagonal(self.exposure, np.inf)
        self.rounds = 0
        self._last: tuple[sp.csr_array, int, np.ndarray] | None = None  # a static graph's S, once

    def add(self, W: Matrix, steps: int) -> None:
        """Account one round that gossiped `steps` times with W.

        Parameters
        ----------
        W : [n, n] the round's mixing matrix, dense or scipy.sparse.
        steps : gossip steps after the noise.
        """
        M, last = sp.csr_array(W), self._last
        same = (last is not None and last[1] == steps and last[0].shape == M.shape
                and (last[0] != M).nnz == 0)
        exposure = last[2] if same else gossip_exposure(M, steps)
        self._last = (M, steps, exposure)
        self.exposure = self.exposure + exposure
        self.rounds += 1

    def epsilon(self, privacy: Privacy) -> np.ndarray:
        """[n, n] (epsilon, privacy.delta)-DP of node j's data seen by node i so far (inf on the
        diagonal).

        Parameters
        ----------
        privacy : the run's noise.

        Returns
        -------
        float64 [n, n] array.
        """
        return rdp_to_dp(self.exposure * SENSITIVITY**2 / (2 * privacy.sigma**2), privacy.delta)

    def largest(self, privacy: Privacy) -> float:
        """The largest loss between two distinct nodes so far.

        Parameters
        ----------
        privacy : the run's noise.

        Returns
        -------
        float, epsilon.
        """
        eps = self.epsilon(privacy)
        return float(eps[~np.eye(len(eps), dtype=bool)].max(initial=0.0))

    def record(self, privacy: Privacy, steps: int) -> dict[str, Any]:
        """What privacy.json holds.

        Parameters
        ----------
        privacy : the run's noise.
        steps : gossip steps a round.

        Returns
        -------
        dict: the settings, `epsilon` [n][n] (row: the observer i, column: the data owner j;
        null on the diagonal), its largest and mean off-diagonal values, and `epsilon_local`,
        the loss of a node that saw j's noisy updates themselves every round (no amplification).
        """
        eps = self.epsilon(privacy)
        off = ~np.eye(len(eps), dtype=bool)
        rows = [[None if i == j else float(v) for j, v in enumerate(row)]
                for i, row in enumerate(eps)]
        local = rdp_to_dp(self.rounds * SENSITIVITY**2 / (2 * privacy.sigma**2), privacy.delta)
        return {"accounting": "Muffliato pairwise network DP (Cyffers et al. 2022, Theorem 1), "
                              "composed over rounds; docs/robustness.md",
                "sigma": privacy.sigma, "clip": privacy.clip, "delta": privacy.delta,
                "sensitivity": SENSITIVITY * privacy.clip,
                "noise_std": privacy.sigma * privacy.clip, "rounds": self.rounds,
                "gossip_steps": steps, "epsilon_max": float(eps[off].max(initial=0.0)),
                "epsilon_mean": float(eps[off].mean()) if off.any() else 0.0,
                "epsilon_local": float(local), "epsilon": rows}

    def state_dict(self) -> dict[str, Any]:
        """The exposure and the rounds counted, for a checkpoint.

        Returns
        -------
        dict.
        """
        return {"exposure": torch.from_numpy(self.exposure.copy()), "rounds": self.rounds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned.

        Parameters
        ----------
        state : a `state_dict`.
        """
        self.exposure = state["exposure"].numpy().copy()
        self.rounds = int(state["rounds"])
        self._last = None
