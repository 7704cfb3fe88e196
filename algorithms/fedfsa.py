"""FedFSA (Xing et al. 2025): MoFedSAM with layer-wise perturbation radii chosen by
perturbation sensitivity, evaluated as personalised FL.

Local step (MoFedSAM): e_k = rho_k g1_k / ||g1|| with the GLOBAL norm, rho_k = rho_larger for the
client's selected layers and rho (rho_default) elsewhere; d = alpha g(x + e) + (1 - alpha) Delta.
After the local phase every client scores each weight tensor k by its sensitivity
  paper (poster):        s_k = sum((w_k^E - w_k^0)^2), the inner product |dw_k . e_k| with the
                         round's change dw_k standing for the perturbation e_k
  reference_code:        s_k = mean((mm(w_k^E) - mm(w_k^0))^2), mm = min-max scaling of the tensor
(biases and normalisation / shortcut layers score -inf) and selects its top_c tensors for its
NEXT participation (none before its first).

Each client holds out `personal_fraction` of its samples as its own test split (the rest is its
training data). On evaluation rounds every client fine-tunes the classifier head (the last
layer) of the server model with plain SGD for the local epochs and is tested on its split:
`test_acc_personal` is the mean over clients (`test_acc_personal_global`: the server model on the
same splits). The fine-tuned copies are discarded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from algorithms.client_state import expand
from algorithms.fedcm import FedCM
from algorithms.server import ClientRound
from p2pfl.callbacks import Callback, RoundEnd
from p2pfl.context import RunContext
from p2pfl.core.federated import check_steps, steps_per_node
from p2pfl.core.metrics import evaluate_own
from p2pfl.core.population import Params, broadcast
from p2pfl.core.solver import LocalSolver
from p2pfl.core.terms import LocalTerms
from p2pfl.core.trainer import VectorizedTrainer
from p2pfl.errors import ConfigError
from p2pfl.options import option

UNSCORED = ("bias", "bn", "norm", "gn", "downsample", "shortcut")


def _minmax(w: torch.Tensor) -> torch.Tensor:
    """Min-max scaling of each row [m, n] to [0, 1] (NaN for a constant row)."""
    low = w.min(dim=1, keepdim=True).values
    high = w.max(dim=1, keepdim=True).values
    return (w - low) / (high - low)


def sensitivity(start: Params, trained: Params, normalise: bool) -> torch.Tensor:
    """Per-row sensitivity of every tensor [m, tensors] (params order); -inf for unscored ones.

    `normalise` False: the paper's sum of squared changes; True: the code's mean of squared
    changes of the min-max scaled tensors."""
    scores = []
    for k, w in trained.items():
        before = start[k].reshape(1, -1).expand(w.shape[0], -1)
        after = w.flatten(1)
        if any(tag in k.lower() for tag in UNSCORED):
            scores.append(torch.full((w.shape[0],), -torch.inf, dtype=w.dtype, device=w.device))
            continue
        if normalise:
            s = (_minmax(after) - _minmax(before)).square().mean(dim=1)
        else:
            s = (after - before).square().sum(dim=1)
        scores.append(torch.nan_to_num(s, nan=-torch.inf))
    return torch.stack(scores, dim=1)


def top_layers(scores: torch.Tensor, c: int) -> torch.Tensor:
    """Boolean [m, tensors]: each row's `c` highest scores (never a -inf one)."""
    c = min(c, scores.shape[1])
    selected = torch.zeros_like(scores, dtype=torch.bool)
    if c == 0:
        return selected
    top = scores.topk(c, dim=1).indices
    selected.scatter_(1, top, True)
    return selected & torch.isfinite(scores)


class FedFSA(FedCM):
    name = "fedfsa"
    source = "FedFSA: Xing et al. 2025, AAAI"

    @dataclass
    class Options(FedCM.Options):
        rho_larger: float = option(0.2, low=0, doc="radius of the top_c most sensitive layers")
        top_c: int = option(2, low=0, doc="number of layers with the larger radius")
        personal_fraction: float = option(0.3, low=0, high=1, low_open=True, high_open=True,
                                          doc="share of each client's data held out as its "
                                          "own test split")
    variants = ("paper", "reference_code")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        try:
            self.data, self.personal_test = ctx.data.held_out(self.cfg.personal_fraction,
                                                              ctx.cfg.seed, 1)
        except ValueError as err:
            raise ConfigError("algorithm.personal_fraction", str(err)) from None
        a = self.cfg
        try:  # the held-out split leaves smaller nodes: each must still take a step
            check_steps(steps_per_node(self.data.sizes, a.batch_size, a.local_epochs,
                                       a.local_steps, a.last_batch),
                        self.data.sizes, a.batch_size)
        except ValueError as err:
            raise ConfigError("algorithm.last_batch", str(err)) from None
        self.trainer = ctx.comm.clients_trainer(ctx.guard.install(
            VectorizedTrainer(ctx.forward, self.data, ctx.trainer.chunk_size,
                              gradients=ctx.trainer.gradients)))
        self.tuner = VectorizedTrainer(ctx.forward, self.data, ctx.trainer.chunk_size,
                                       gradients=ctx.trainer.gradients)
        self.selected = torch.zeros(ctx.num_nodes, len(self.server), dtype=torch.bool,
                                    device=ctx.device)
        last = list(self.server)[-1].rsplit(".", 1)[0]
        self.head = tuple(k for k in self.server if k.rsplit(".", 1)[0] == last)

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        a = self.cfg
        radii = torch.full(self.selected[nodes].shape, a.rho, device=ctx.device, dtype=ctx.dtype)
        radii[self.selected[nodes]] = a.rho_larger
        return replace(super().local_terms(ctx, nodes, start, t), ascent="layerwise",
                       radii=radii)

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        normalise = self.cfg.variant == "reference_code"
        scores = sensitivity(r.start, r.trained, normalise)
        self.selected[r.nodes] = top_layers(scores, self.cfg.top_c)
        super().aggregate(ctx, r)

    def personal_accuracy(self, ctx: RunContext, t: int) -> tuple[float, float]:
        """Mean over all clients of the accuracy of (fine-tuned head, server model) on their
        own test splits after round t. The fine-tuning runs outside the divergence guard: it
        changes nothing the run keeps."""
        a, nodes = self.cfg, torch.arange(ctx.num_nodes, device=ctx.device)
        tuned = broadcast(self.server, ctx.num_nodes)
        plan = self.plan(ctx, t, self.data)
        lrs = torch.full((ctx.num_nodes,), self.lr(t), device=ctx.device, dtype=ctx.dtype)
        solver = LocalSolver(weight_decay=a.weight_decay, clip_norm=a.clip_norm)
        self.tuner.train(tuned, nodes, plan, solver, lrs, LocalTerms(trainable=self.head))
        acc = [evaluate_own(ctx.forward, models, ctx.data.x_train, ctx.data.y_train,
                            self.personal_test, ctx.cfg.eval.batch_size, self.tuner.chunk_size)
               for models in (tuned, expand(self.server, ctx.num_nodes))]
        return acc[0].mean().item(), acc[1].mean().item()

    def callbacks(self, ctx: RunContext) -> list[Callback]:
        return [PersonalAccuracy()]

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"selected": self.selected.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.selected.copy_(state["selected"])


class PersonalAccuracy(Callback):
    """FedFSA's evaluation: test_acc_personal (each client's fine-tuned head on its own split)
    and test_acc_personal_global (the server model on the same splits), on evaluation rounds."""

    def after_round(self, end: RoundEnd) -> dict[str, float] | None:
        if not end.evaluating:
            return None
        personal, global_ = end.algorithm.personal_accuracy(end.ctx, end.t)
        return {"test_acc_personal": personal, "test_acc_personal_global": global_}
