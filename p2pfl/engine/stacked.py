"""Stacked experiments: E independent runs side by side, their local phases trained as one
population of E x N nodes.

Each experiment is a whole `p2pfl.run` (its own data plan, topology, algorithm state, run
directory and checkpoints) in its own thread; one member runs at a time (a baton passed at every
trainer call), so members never compete for the cores, and code that keeps global state (torch's
global RNG at model init, the dataset cache, pyplot) never runs in two members at once. A
`Stack` holds every trainer call of a member until each member still running is waiting in one,
then trains all waiting calls of one kind (same model shape, dtype, device, training data and
local solver) as ONE call of the vectorized trainer over the stacked rows, and hands each member
its rows back. A member's trainer is a `StackedTrainer` around its own (`Stack.member`, where
the run is built). Nodes train independently, so every member's numbers are those of its run alone,
up to rounding (equal to 1e-12 in float64). Members of different kinds are trained one kind
after the other; a member that cannot be batched (the per-node loop executor, torch.compile, a
step with an algorithm's additional terms) trains on its own as it would alone.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from p2pfl.core.federated import BatchPlan
from p2pfl.core.population import Params
from p2pfl.core.solver import LocalSolver
from p2pfl.core.trainer import Trainer, VectorizedTrainer
from p2pfl.errors import RunInterrupted


@dataclass(eq=False)
class _Call:
    """One member's waiting trainer call and, once trained, its result."""

    kind: Hashable
    trainer: Trainer  # the member's own
    params: Params
    nodes: torch.Tensor
    plan: BatchPlan
    solver: LocalSolver
    lr: torch.Tensor
    done: bool = False
    result: torch.Tensor | None = None
    error: BaseException | None = None


def merge_plans(plans: Sequence[BatchPlan]) -> BatchPlan:
    """The plans of E experiments as one plan over their nodes, experiment after experiment.

    Node i of plan e is row sum_{f<e} N_f + i. Steps are padded to the longest K and batches to
    the widest B, padding repeating a valid row with length 0 (weighted 0).

    Parameters
    ----------
    plans : the experiments' BatchPlans.

    Returns
    -------
    BatchPlan over sum_e N_e nodes.
    """
    k_max = max(p.steps for p in plans)
    width = max(p.ids.shape[2] for p in plans)
    ids, lengths = [], []
    for p in plans:
        k, n, b = p.ids.shape
        padded = p.ids[:1, :, :1].expand(k_max, n, width).clone()
        padded[:k, :, :b] = p.ids
        padded[:k, :, b:] = p.ids[:, :, :1]
        ids.append(padded)
        lengths.append(torch.nn.functional.pad(p.lengths, (0, k_max - k)))
    widths, uniform = [], []
    for step in range(k_max):
        live = [p for p in plans if step < p.steps]
        widths.append(max((p.widths[step] for p in live), default=1))
        uniform.append(all(p.uniform[step] and p.widths[step] == widths[-1] for p in live))
    return BatchPlan(torch.cat(ids, dim=1), torch.cat(lengths), np.concatenate(
        [p.steps_of for p in plans]), tuple(widths), tuple(uniform))


class StackedTrainer:
    """A member's trainer in a Stack: its plain local phases wait for the other members' and
    are trained with them (`Stack.member`); a phase with an algorithm's terms trains alone.
    Everything but `train` is the member's own trainer's."""

    def __init__(self, inner: VectorizedTrainer, stack: Stack, kind: Hashable) -> None:
        self.inner, self.stack, self.kind = inner, stack, kind

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def train(self, params: Params, nodes: torch.Tensor, plan: BatchPlan, solver: LocalSolver,
              lr: torch.Tensor, terms: Any = None) -> torch.Tensor:
        if terms is not None:  # an algorithm's own terms: trained as alone
            return self.inner.train(params, nodes, plan, solver, lr, terms)
        return self.stack.wait(_Call(self.kind, self.inner, params, nodes, plan, solver, lr))


class Stack:
    """The meeting point of `size` member runs (threads): see the module docstring. A member
    joins when its trainer is built (`member`) and leaves when its run ends, however it ends
    (`leave`); a member whose trainer cannot be batched leaves at once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._live = size
        self._left: set[int] = set()
        self._waiting: list[_Call] = []
        self._shared: list[torch.Tensor] = []  # training tensors, one copy per distinct value
        self._cond = threading.Condition()
        self._aborted = False

    def member(self, trainer: Trainer, kind: Hashable | None) -> Trainer:
        """`trainer` as a member of the stack: its local phases batched with the other members' of
        the same `kind`.

        Its training tensors are replaced by an equal tensor shared with members that hold the same
        values.

        Parameters
        ----------
        trainer : the run's trainer.
        kind : what must match for batching; None (or a trainer that is not vectorized): this member
            is not batched, leaves now, and `trainer` is returned as it is.

        Returns
        -------
        Trainer, a StackedTrainer (or `trainer`).
        """
        if kind is None or not isinstance(trainer, VectorizedTrainer):
            self.leave()
            return trainer
        data = trainer.data
        with self._cond:
            data.x_train, data.y_train = self._share(data.x_train), self._share(data.y_train)
        return StackedTrainer(trainer, self, (kind, id(data.x_train), id(data.y_train)))

    def turn(self) -> threading.Condition:
        """The baton: a member holds it (`with stack.turn():`) whenever it runs; waiting in a
        trainer call hands it on."""
        return self._cond

    def leave(self) -> None:
        """The calling member's run ended (or is not batched); idempotent."""
        with self._cond:
            me = threading.get_ident()
            if me in self._left:
                return
            self._left.add(me)
            self._live -= 1
            if self._waiting and len(self._waiting) >= self._live:
                self._train_waiting()

    def abort(self) -> None:
        """Stop every member at its next trainer call (RunInterrupted)."""
        with self._cond:
            self._aborted = True
            self._cond.notify_all()

    def _share(self, tensor: torch.Tensor) -> torch.Tensor:
        for held in self._shared:
            if held is tensor or (held.shape == tensor.shape and held.dtype == tensor.dtype
                                  and held.device == tensor.device and torch.equal(held, tensor)):
                return held
        self._shared.append(tensor)
        return tensor

    def wait(self, call: _Call) -> torch.Tensor:
        """Hold `call` until every live member waits, train the waiting calls.

        Parameters
        ----------
        call : this member's local phase.

        Returns
        -------
        [m] tensor, its losses.

        Raises
        ------
        RunInterrupted
            when the stack is stopped; the call's own error when its training failed.
        """
        with self._cond:
            self._waiting.append(call)
            if len(self._waiting) >= self._live:
                self._train_waiting()
            while not call.done and not self._aborted:
                self._cond.wait()
            if not call.done:
                raise RunInterrupted("the stacked runs were stopped",
                                     "each keeps its last checkpoint")
        if call.error is not None:
            raise call.error
        return call.result

    def _train_waiting(self) -> None:
        """Train every waiting call, one batched call per kind; wake their members."""
        groups: dict[Hashable, list[_Call]] = {}
        for call in self._waiting:
            groups.setdefault((call.kind, call.solver, call.lr.dtype), []).append(call)
        self._waiting = []
        for calls in groups.values():
            try:
                self._train_together(calls)
            except BaseException as err:  # every member of the batch sees the failure
                for call in calls:
                    call.error = err
            for call in calls:
                call.done = True
        self._cond.notify_all()

    @staticmethod
    def _train_together(calls: list[_Call]) -> None:
        if len(calls) == 1:
            c = calls[0]
            c.result = c.trainer.train(c.params, c.nodes, c.plan, c.solver, c.lr)
            return
        offsets = np.cumsum([0] + [len(c.plan.steps_of) for c in calls])
        nodes = torch.cat([c.nodes + int(o) for c, o in zip(calls, offsets)])
        params = {k: torch.cat([c.params[k] for c in calls]) for k in calls[0].params}
        losses = calls[0].trainer.train(params, nodes, merge_plans([c.plan for c in calls]),
                                calls[0].solver, torch.cat([c.lr for c in calls]))
        start = 0
        for c in calls:
            rows = slice(start, start + len(c.nodes))
            for k, v in c.params.items():
                v.copy_(params[k][rows])
            c.result = losses[rows]
            start = rows.stop

