"""Personalised evaluation of a server algorithm (the FedFSA paper's protocol, for any method).

Each client holds out a share of its samples as its own test split and trains on the rest. On
evaluation rounds every client fine-tunes the classifier head (the last layer) of the server
model with plain SGD for the local epochs of the round (or `personal_epochs` epochs) and is
tested on its split:
`test_acc_personal` is the mean over clients, `test_acc_personal_global` the server model on
the same splits. The fine-tuned copies are discarded: the run's state never sees them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from algorithms.client_state import expand
from p2pfl.callbacks import Callback, RoundEnd
from p2pfl.context import RunContext
from p2pfl.core.federated import check_steps, steps_per_node
from p2pfl.core.metrics import evaluate_own
from p2pfl.core.population import Params, broadcast
from p2pfl.core.solver import LocalSolver
from p2pfl.core.terms import LocalTerms
from p2pfl.core.trainer import Trainer, VectorizedTrainer
from p2pfl.errors import ConfigError

if TYPE_CHECKING:
    from algorithms.server import Server

SPLIT_KEY = 1  # the random stream of the held-out splits: (seed, "eval", 1)


class PersonalSplits:
    """The clients' held-out test splits and the trainer that fine-tunes the head on the rest.

    `data` is what the clients train on (each node's samples minus its split), `tests[i]` the
    dataset rows of client i's split (int64 [n_test_i]). `epochs` > 0 fine-tunes for that many
    epochs instead of the round's local epochs / steps."""

    def __init__(self, ctx: RunContext, fraction: float, batch_size: int, local_epochs: int,
                 local_steps: int, last_batch: str, epochs: int = 0) -> None:
        if not ctx.trainer.vectorized:
            raise ConfigError("algorithm.personal_fraction", "the personalised evaluation runs "
                              "on the 'vectorized' executor only")
        try:
            self.data, self.tests = ctx.data.held_out(fraction, ctx.seed, SPLIT_KEY)
        except ValueError as err:
            raise ConfigError("algorithm.personal_fraction", str(err)) from None
        self.epochs = epochs
        try:  # the held-out split leaves smaller nodes: each must still take a step
            plans = [(local_epochs, local_steps)] + ([(epochs, 0)] if epochs else [])
            for e, k in plans:
                check_steps(steps_per_node(self.data.sizes, batch_size, e, k, last_batch),
                            self.data.sizes, batch_size)
        except ValueError as err:
            raise ConfigError("algorithm.last_batch", str(err)) from None
        self.tuner = VectorizedTrainer(ctx.forward, self.data, ctx.trainer.chunk_size,
                                       gradients=ctx.trainer.gradients,
                                       batch_statistics=ctx.batch_statistics)

    def trainer(self, ctx: RunContext) -> Trainer:
        """A guarded trainer of the clients' local phases on `data`."""
        return ctx.guard.wrap(VectorizedTrainer(ctx.forward, self.data,
                                                   ctx.trainer.chunk_size,
                                                   gradients=ctx.trainer.gradients,
                                                   batch_statistics=ctx.batch_statistics))

    def tune(self, server: Server, ctx: RunContext, t: int, epochs: int | None = None,
             whole: bool = False) -> Params:
        """Every client's copy of the server model after round t with its head fine-tuned on its
        training share.

        The fine-tuning runs outside the divergence guard: it changes nothing the run keeps.

        Parameters
        ----------
        server : the server algorithm.
        ctx : the run.
        t : round, from 0.
        epochs : epochs of fine-tuning (None: the evaluation's own, `self.epochs` or the round's
            local phase).
        whole : tune every parameter, not only the head (the parameters of the last layer).

        Returns
        -------
        Params, name -> [N, *shape].
        """
        a, nodes = server.cfg, torch.arange(ctx.num_nodes, device=ctx.device)
        tuned = broadcast(server.server, ctx.num_nodes)
        last = list(server.server)[-1].rsplit(".", 1)[0]
        head = tuple(k for k in server.server if k.rsplit(".", 1)[0] == last)
        lrs = torch.full((ctx.num_nodes,), server.lr(t), device=ctx.device, dtype=ctx.dtype)
        solver = LocalSolver(weight_decay=a.weight_decay, clip_norm=a.clip_norm)
        epochs = self.epochs if epochs is None else epochs
        plan = (self.data.plan(ctx.seed, t, a.batch_size, epochs, 0, a.last_batch)
                if epochs else server.plan(ctx, t, self.data))
        self.tuner.train(tuned, nodes, plan, solver, lrs,
                         LocalTerms(trainable=None if whole else head))
        return tuned

    def own_accuracy(self, ctx: RunContext, models: Params) -> torch.Tensor:
        """Accuracy of client i's model `models[k][i]` on client i's split: float32 [N]."""
        return evaluate_own(ctx.forward, models, ctx.data.x_train, ctx.data.y_train, self.tests,
                            ctx.eval_batch_size, self.tuner.chunk_size,
                            ctx.batch_statistics)

    def accuracy(self, server: Server, ctx: RunContext, t: int) -> tuple[float, float]:
        """Mean over all clients of the accuracy on their own splits after round t.

        Parameters
        ----------
        server : the server algorithm.
        ctx : the run.
        t : round, from 0.

        Returns
        -------
        tuple (with the fine-tuned head, with the server model).
        """
        acc = [self.own_accuracy(ctx, models).mean().item()
               for models in (self.tune(server, ctx, t), expand(server.server, ctx.num_nodes))]
        return acc[0], acc[1]


class PersonalAccuracy(Callback):
    """test_acc_personal and test_acc_personal_global of a server algorithm with
    `personal_fraction` > 0, on evaluation rounds."""

    def after_round(self, end: RoundEnd) -> dict[str, float] | None:
        if not end.evaluating:
            return None
        personal, global_ = end.algorithm.personal.accuracy(end.algorithm, end.ctx, end.t)
        return {"test_acc_personal": personal, "test_acc_personal_global": global_}
