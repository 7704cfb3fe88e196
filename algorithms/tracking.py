"""Gradient tracking: what DSGT (and GT-DSGD, DIGing), Push-DIGing and Push-Pull share.

Each node i keeps a tracker y_i of the network's average gradient and the gradient g_i of its
latest local phase. In the papers' form (one local step a round) round k is

    y_i^k = (M y^{k-1})_i + g_i(x_i^k) - g_i(x_i^{k-1})       (y^0 = g(x^0))
    x_i^{k+1/2} = x_i^k - lr * y_i^k

followed by the algorithm's mixing of x and of y (GT-DSGD mixes y^k first and steps x along the
mixed tracker: algorithms/dsgt.py). The engine trains that step as an SGD step with
the per-node linear term c_i = (M y^{k-1})_i - g_i^{k-1} (a `Linear` correction): the direction is
g_i(x_i^k) + c_i = y_i^k. After the phase the step taken gives y_i^k = (x_i^k - x_i^{k+1/2}) /
(K_i lr_i) and g_i^k = y_i^k - c_i, so sum_i y_i^k = sum_i g_i^k whenever the mixing keeps sums
(every column of M sums to 1). With K > 1 local steps (not in the papers) the correction is held
through the phase and g_i^k is the mean gradient of the node's K_i steps.

A node that does not train (offline) keeps y_i^k = (M y^{k-1})_i and g_i^k = g_i^{k-1}, its
gradient unchanged, as the papers' update with x_i unchanged gives. Weight decay is part of the
tracked gradient; clipping would make the direction other than the tracker, so it is refused.
"""

from __future__ import annotations

from typing import Any

import torch

from algorithms.base import value_bytes
from p2pfl.context import RunContext
from p2pfl.core.population import Params, row_scale
from p2pfl.core.terms import Linear, LocalTerms
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions


class Trackers:
    """y (the trackers as the latest mixing left them) and g (each node's latest gradient), one
    stacked tensor [N, *shape] per parameter, zeros before round 0; and `step` [N], the length
    K_i lr_i of each node's latest local phase along y_i (read in the round that sets it, so not
    part of the state)."""

    def __init__(self, like: Params) -> None:
        self.y: Params = {k: torch.zeros_like(v) for k, v in like.items()}
        self.g: Params = {k: torch.zeros_like(v) for k, v in like.items()}
        first = next(iter(like.values()))
        self.step = first.new_zeros(first.shape[0])

    def correction(self, nodes: torch.Tensor) -> Params:
        """c_i = y_i - g_i of `nodes` [m]: name -> [m, *shape]."""
        return {k: v[nodes] - self.g[k][nodes] for k, v in self.y.items()}

    def absorb(self, nodes: torch.Tensor, correction: Params, before: Params, after: Params,
               step: torch.Tensor) -> None:
        """y_i = (before_i - after_i) / step_i and g_i = y_i - c_i for `nodes`.

        Their local phase moved `before` to `after` by the direction y_i times step_i (K_i lr_i).

        Parameters
        ----------
        nodes : int64 [m].
        correction : name -> [m, *shape], c.
        before, after : name -> [m, *shape], the models before and after the local phase.
        step : [m], K_i lr_i.
        """
        self.step.index_copy_(0, nodes, step.to(self.step.dtype))
        for k, y in self.y.items():
            tracked = (before[k] - after[k]) / row_scale(step.to(y.dtype), y[nodes])
            y.index_copy_(0, nodes, tracked)
            self.g[k].index_copy_(0, nodes, tracked - correction[k])

    def state_dict(self) -> dict[str, Any]:
        return {"y": {k: v.clone() for k, v in self.y.items()},
                "g": {k: v.clone() for k, v in self.g.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in ("y", "g"):
            for k, v in getattr(self, name).items():
                v.copy_(state[name][k])


class Tracking:
    """The tracker part of a gradient-tracking algorithm, mixed into a round kind
    (`class DSGT(Tracking, Gossip)`): its state, its local phase, and what it refuses."""

    supports_overlap = False

    def message_bytes(self, num_params: int, dtype: torch.dtype) -> int:
        """A model copy and a tracker (and what the round kind adds, such as a weight)."""
        return super().message_bytes(num_params, dtype) + num_params * value_bytes(dtype)

    def check_options(self, cfg: AlgorithmOptions) -> None:
        super().check_options(cfg)
        if cfg.clip_norm > 0:
            raise ConfigError("algorithm.clip_norm", f"{self.name} steps along its tracker; "
                              "clipping would step elsewhere and break the tracking: leave "
                              "clip_norm at 0")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        refuse_unless_single_vectorized(ctx, self.name)
        self.trackers = Trackers(ctx.population.params)

    def train(self, ctx: RunContext, params: Params, nodes: torch.Tensor, t: int,
              lr: torch.Tensor) -> torch.Tensor:
        """The local phase along y_i: SGD with the linear term c_i; the trackers then take the
        step's direction (module docstring)."""
        plan = self.plan(ctx, t)
        correction = self.trackers.correction(nodes)
        before = {k: v.clone() for k, v in params.items()}
        losses = ctx.trainer.train(params, nodes, plan, self.solver, lr,
                                   LocalTerms((Linear(correction),)))
        steps = torch.as_tensor(plan.node_steps(nodes), device=lr.device, dtype=lr.dtype)
        self.trackers.absorb(nodes, correction, before, params, steps * lr)
        return losses

    def tracker_metrics(self, ctx: RunContext) -> dict[str, float]:
        """`tracking_error`: ||mean_i y_i - mean_i g_i|| over all parameters (0 up to rounding
        while the mixing keeps sums; the check of the invariant in every run)."""
        sq = sum((y.mean(0) - self.trackers.g[k].mean(0)).double().square().sum()
                 for k, y in self.trackers.y.items())
        return {"tracking_error": float(sq) ** 0.5}

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        return {**super().metrics(ctx), **self.tracker_metrics(ctx)}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "trackers": self.trackers.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.trackers.load_state_dict(state["trackers"])


def refuse_unless_single_vectorized(ctx: RunContext, name: str) -> None:
    """Refuse a loop or a distributed run.

    Per-node state beside the population lives in one process, and the local terms need the
    vectorized trainer.

    Parameters
    ----------
    ctx : the run.
    name : the algorithm's name, for the error.

    Raises
    ------
    ConfigError
        naming engine.executor for a non-vectorized trainer, launch for more than one process.
    """
    if not ctx.trainer.vectorized:
        raise ConfigError("engine.executor", f"{name} runs on the 'vectorized' executor only")
    if ctx.comm.world > 1:
        raise ConfigError("launch", f"{name} keeps per-node state beside the models in one "
                          "process; run it without torchrun")
