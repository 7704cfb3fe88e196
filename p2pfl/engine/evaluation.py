"""The built-in evaluation, a round callback: the average model on the whole test set and every
node's own model on a seeded test subset, on evaluation rounds."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import numpy as np
import torch

from p2pfl.callbacks import Callback, RoundEnd
from p2pfl.context import RunContext
from p2pfl.core.metrics import evaluate, evaluate_own, evaluate_sums, squared_distance
from p2pfl.core.population import Params
from p2pfl.core.seeding import numpy_rng


def eval_subset(ctx: RunContext, local_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The seeded test subset on which every node's own model is evaluated.

    Parameters
    ----------
    ctx : the run.
    local_samples : samples in the subset; 0: all.

    Returns
    -------
    tuple (inputs [s, *input_shape], labels [s]).
    """
    n_test = len(ctx.data.y_test)
    size = local_samples or n_test
    if size >= n_test:
        return ctx.data.x_test, ctx.data.y_test
    idx = numpy_rng(ctx.seed, "eval").choice(n_test, size=size, replace=False)
    idx = torch.as_tensor(np.sort(idx), device=ctx.device)
    return ctx.data.x_test[idx], ctx.data.y_test[idx]


def node_spread(acc: torch.Tensor) -> dict[str, float]:
    """The spread of per-node accuracies.

    Parameters
    ----------
    acc : [N] per-node accuracies.

    Returns
    -------
    dict: test_acc_node_mean, test_acc_node_worst10 (the mean of the lowest tenth, at least one
    node) and test_acc_node_std (population standard deviation).
    """
    worst = acc.sort().values[:max(1, math.ceil(0.1 * len(acc)))]
    return {"test_acc_node_mean": acc.mean().item(), "test_acc_node_worst10": worst.mean().item(),
            "test_acc_node_std": acc.std(unbiased=False).item()}


def honest_metrics(ctx: RunContext, local: Params, local_acc: torch.Tensor) -> dict[str, float]:
    """The honest nodes' accuracy and consensus, in a run with Byzantine nodes (one process).

    Parameters
    ----------
    ctx : the run.
    local : name -> [N, *shape], every node's model.
    local_acc : [N] their accuracies on the evaluation subset.

    Returns
    -------
    dict: test_acc_honest_mean, test_acc_honest_min, and consensus_dist_honest, the mean squared
    distance of the honest models to their average.
    """
    honest = ~ctx.byzantine.mask(ctx.num_nodes, ctx.device)
    models = {k: v[honest] for k, v in local.items()}
    average = {k: v.mean(0) for k, v in models.items()}
    count = int(honest.sum())
    return {"test_acc_honest_mean": local_acc[honest].mean().item(),
            "test_acc_honest_min": local_acc[honest].min().item(),
            "consensus_dist_honest": (squared_distance(models, average) / count).item()}


class Evaluation(Callback):
    """test_acc / test_loss of the average model, test_acc_local_mean / _min of the nodes' own
    models, their consensus distance to the average, and eval_s (seconds spent here). With
    Byzantine nodes, the same over the honest nodes (`honest_metrics`). With
    `data.local_test` > 0, also each node's model (`Algorithm.node_models`) on the node's own
    test split: `node_spread` of those accuracies."""

    def __init__(self, ctx: RunContext, local_samples: int) -> None:
        self.local_eval = eval_subset(ctx, local_samples)

    def after_round(self, end: RoundEnd) -> Mapping[str, float] | None:
        if not end.evaluating:
            return None
        start = time.perf_counter()
        ctx, ev = end.ctx, end.cfg.eval
        chunk = ctx.trainer.eval_chunk_size if ctx.trainer.vectorized else 1
        average = end.average_model()
        # the test set in whole batches, split over the processes (one process: all of it)
        n_test, size = len(ctx.data.y_test), ev.batch_size
        first, last = ctx.comm.share(math.ceil(n_test / size))
        part = slice(first * size, min(last * size, n_test))
        correct, loss_sum = evaluate_sums(
            ctx.forward, {k: v.unsqueeze(0) for k, v in average.items()},
            ctx.data.x_test[part], ctx.data.y_test[part], size, 1)
        local = end.local_models()
        local_acc, _ = evaluate(ctx.forward, local, *self.local_eval, ev.batch_size, chunk)
        # sums over the processes' shares (one process: all of it), then the means
        sums = ctx.comm.all_sum(torch.cat([
            correct.double(), loss_sum, local_acc.double().sum().view(1),
            loss_sum.new_tensor([float(len(local_acc))]),
            squared_distance(local, average).view(1)]))
        acc, loss, count = sums[0].float() / n_test, sums[1] / n_test, sums[3]
        lowest = ctx.comm.all_min(local_acc.min() if len(local_acc) else
                                  local_acc.new_tensor(torch.inf))
        record = {"test_acc": acc.item(), "test_loss": loss.item(),
                  "test_acc_local_mean": (sums[2] / count).item(),
                  "test_acc_local_min": lowest.item(),
                  "consensus_dist": (sums[4] / count).item()}
        if ctx.byzantine is not None:
            record |= honest_metrics(ctx, local, local_acc)
        if ctx.data.local_test is not None:
            record |= node_spread(self.node_accuracy(end, chunk))
        return record | {"eval_s": time.perf_counter() - start}

    @staticmethod
    def node_accuracy(end: RoundEnd, chunk: int) -> torch.Tensor:
        """Accuracy of every node's model on its own local test split, all N nodes: [N]."""
        ctx = end.ctx
        held = ctx.all_nodes()
        tests = [ctx.data.local_test[i] for i in held.tolist()]
        acc = evaluate_own(ctx.forward, end.algorithm.node_models(ctx), ctx.data.x_train,
                           ctx.data.y_train, tests, ctx.eval_batch_size, chunk,
                           ctx.batch_statistics)
        every = torch.zeros(ctx.num_nodes, device=ctx.device, dtype=torch.float64)
        every[held] = acc.double()
        return ctx.comm.all_sum(every)
