"""Private gossip (Muffliato: Cyffers, Even, Bellet, Massoulie, NeurIPS 2022), [privacy].

After its local phase each node clips its round update d_i = y_i - x_i to norm `clip` and adds
Gaussian noise N(0, (sigma clip)^2 I), then the nodes gossip the noisy models as usual
(x <- W^Q y). Two datasets of node j are neighbouring when they differ anywhere (node-level), so
j's clipped update moves by at most Delta = 2 clip, and Delta / std = 2 / sigma. The run's pairwise
loss is the exposure S of every round's W, Q and online nodes (topologies/privacy.py, in the
run's `[privacy] accounting`): the Renyi DP of order alpha of node j's data in node i's view is
alpha c_ij with c = (2 / sigma^2) S_ij, reported as (epsilon, delta)-DP in privacy.json. The
default accounting, "reach", is a bound for the run however the updates depend on what the nodes
received; "linear" is the exact loss of the same messages if the updates were fixed values.
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
from topologies.privacy import Reach, gaussian_coefficient, linear_exposure, rdp_to_dp

SENSITIVITY = 2.0  # in units of clip: two clipped updates differ by at most 2 clip
THREAT_MODEL = ("honest-but-curious observer i: knows its own data, updates and noise, and sees "
                "every message it receives in every round; node-level neighbouring datasets of "
                "the owner j")
ACCOUNTING_MEANING = {
    "reach": "a bound for this run: j's noisy releases up to the last one that reached i "
             "(post-processing and adaptive composition), never above epsilon_local",
    "linear": "the exact divergence of i's linear Gaussian view if the updates were fixed "
              "values (as in gossip averaging); training updates depend on what was received, "
              "so only 'reach' is proven for the run itself",
}


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
    """The run's pairwise exposure so far, in the run's accounting (topologies/privacy.py).

    "reach" is kept round by round ([n, n] integers); "linear" keeps each round's W and online
    nodes and computes the exact view when asked (cached until the next round).
    """

    def __init__(self, n: int, accounting: str = "reach") -> None:
        self.accounting = accounting
        self.reach = Reach(n)
        self.mixings: list[sp.csr_array] = []  # "linear" only
        self._linear: tuple[int, np.ndarray] | None = None  # (rounds, S) of the last request

    @property
    def rounds(self) -> int:
        """Rounds accounted so far."""
        return self.reach.rounds

    def add(self, W: Matrix, steps: int, online: np.ndarray) -> None:
        """Account one round: the online nodes released, then `steps` gossip steps with W.

        Parameters
        ----------
        W : [n, n] the round's mixing matrix, dense or scipy.sparse.
        steps : gossip steps after the noise.
        online : bool [n], the nodes that added noise this round.
        """
        self.steps = steps
        self.reach.add(W, steps, online)
        if self.accounting == "linear":
            self.mixings.append(sp.csr_array(W, dtype=np.float64))

    def exposure(self) -> np.ndarray:
        """S [n, n] so far (inf on the diagonal).

        Returns
        -------
        float64 [n, n] array.
        """
        if self.accounting == "reach" or not self.mixings:
            return self.reach.exposure()
        if self._linear is None or self._linear[0] != self.rounds:
            self._linear = (self.rounds, linear_exposure(self.mixings, self.steps,
                                                         self.reach.online))
        return self._linear[1]

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
        coefficient = gaussian_coefficient(SENSITIVITY, privacy.sigma)
        return rdp_to_dp(self.exposure() * coefficient, privacy.delta)

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
        the loss of a node that saw the noisy updates themselves of the node that released most
        (no amplification; no pairwise value exceeds it).
        """
        eps = self.epsilon(privacy)
        off = ~np.eye(len(eps), dtype=bool)
        rows = [[None if i == j else float(v) for j, v in enumerate(row)]
                for i, row in enumerate(eps)]
        coefficient = gaussian_coefficient(SENSITIVITY, privacy.sigma)
        local = rdp_to_dp(self.reach.releases().max(initial=0.0) * coefficient, privacy.delta)
        return {"accounting": privacy.accounting, "accounting_meaning": ACCOUNTING_MEANING[
                    privacy.accounting],
                "threat_model": THREAT_MODEL,
                "sigma": privacy.sigma, "clip": privacy.clip, "delta": privacy.delta,
                "sensitivity": SENSITIVITY * privacy.clip,
                "noise_std": privacy.sigma * privacy.clip, "rounds": self.rounds,
                "gossip_steps": steps, "epsilon_max": float(eps[off].max(initial=0.0)),
                "epsilon_mean": float(eps[off].mean()) if off.any() else 0.0,
                "epsilon_local": float(local), "epsilon": rows}

    def state_dict(self) -> dict[str, Any]:
        """The reach state and, for "linear", the rounds' W, for a checkpoint.

        Returns
        -------
        dict of tensors.
        """
        state = {k: torch.from_numpy(np.ascontiguousarray(v))
                 for k, v in self.reach.state_dict().items()}
        if self.accounting == "linear":
            n = len(self.reach.latest)
            stacked = (np.stack([M.toarray() for M in self.mixings]) if self.mixings
                       else np.zeros((0, n, n)))
            state["mixings"] = torch.from_numpy(stacked)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned.

        Parameters
        ----------
        state : a `state_dict`.
        """
        self.reach.load_state_dict({k: state[k].numpy() for k in ("latest", "online")})
        if self.accounting == "linear":
            self.mixings = [sp.csr_array(W) for W in state["mixings"].numpy()]
        self._linear = None
