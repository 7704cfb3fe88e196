"""The local phases of an event-driven run: each node's phase in progress, computed lazily and
in batches.

A phase of node i begins at a simulated instant by reading the node's model (a snapshot into a
stacked buffer [N, *shape]), and ends `Clock.phase_s` later with its offset y^K - x_read. What
it computes depends only on what it read, the node's data and its phase index k (its minibatches
are those of round k's plan, its step size the algorithm's for phase k), not on when the
computation runs. So the engine computes phases only when an offset is needed, and then every
phase that has begun and is not computed yet, in one batched call of the run's trainer (rows of
different phase indices take their own round's minibatches), and every begun phase at each mark
(`Simulation.advance`): with nodes of near-equal speeds a batch holds nearly every node even when
no two events coincide. The buffer then holds the offset in place of the snapshot.

An algorithm that leaves a node's row alone while its phase is in progress, except at a mark
(`Asynchronous.snapshot_in_row`), saves passes over the rows per phase: the snapshot is the row
itself, not copied, and the phase holds its result y^K (not its offset) in a payload slot of
the run's `Mailbox` (`slot`): a batch of phases is gathered into a run of free slots and trained
there, not copied back, and the algorithm reads the results as payloads, in the same sparse
product as its messages (`result_slots`). The state (buffer, times, step sizes, losses, slots)
is a checkpoint's; a snapshot that is still its node's model is saved once, as the population's
row (the results: with the mailbox's payloads).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from algorithms.asynchronous import Asynchronous
from p2pfl.context import RunContext
from p2pfl.core.federated import BatchPlan
from p2pfl.core.population import Params, copy_rows, row_block, same_rows
from p2pfl.scale.mailbox import Mailbox


def mixed_plan(plans: dict[int, BatchPlan], nodes: np.ndarray, k: np.ndarray) -> BatchPlan:
    """One plan whose row of node nodes[e] is that of round k[e]'s plan.

    Plans of one run differ only in their minibatch rows (the steps and widths depend on the
    nodes' sizes and the options alone).

    Parameters
    ----------
    plans : {round: its BatchPlan}, holding every value of `k`.
    nodes : int64 [m], node ids.
    k : int64 [m], the round of each.

    Returns
    -------
    BatchPlan over all nodes (rows of other nodes: those of the plan of k[0]).
    """
    rounds = np.unique(k)
    base = plans[int(rounds[0])]
    if len(rounds) == 1:
        return base
    ids, lengths = base.ids.clone(), base.lengths.clone()
    for r in rounds[1:].tolist():
        rows = torch.as_tensor(nodes[k == r], device=ids.device)
        ids[:, rows] = plans[r].ids[:, rows]
        lengths[rows] = plans[r].lengths[rows]
    return BatchPlan(ids, lengths, base.steps_of, base.widths, base.uniform)


class Phases:
    """Every node's latest local phase (module docstring).

    Parameters
    ----------
    ctx : the run.
    algorithm : its asynchronous algorithm (step sizes, plans, solver).
    offset : graph node id of row 0 (the star: 1).
    pool : the run's mailbox, whose slots hold the results with `snapshot_in_row`.
    """

    def __init__(self, ctx: RunContext, algorithm: Asynchronous, offset: int,
                 pool: Mailbox) -> None:
        self.ctx, self.algorithm, self.offset, self.pool = ctx, algorithm, offset, pool
        self.in_row = algorithm.snapshot_in_row  # an uncomputed phase's snapshot is its row
        # what a computed phase holds: its offset y^K - x_read in its node's buffer row; with
        # in_row, its result y^K in its payload slot of the pool
        n = ctx.num_nodes
        self.slot = np.full(n, -1, dtype=np.int64)  # with in_row: the pool slot (-1: none)
        self.buffer: Params = {} if self.in_row else {
            k: torch.empty_like(v) for k, v in ctx.population.params.items()}
        self._scratch: Params = {}  # [N, *shape] where a batch cannot train in place (lazily)
        self.phase = np.full(n, -1, dtype=np.int64)  # index of the latest phase (-1: none yet)
        self.read = np.zeros(n)  # when it read its model (s)
        self.due = np.full(n, np.inf)  # when it ends (inf: ended, or none)
        self.computed = np.ones(n, dtype=bool)
        self.lr = np.zeros(n)
        self.loss = np.full(n, np.nan)
        self.steps = np.zeros(n, dtype=np.int64)  # local steps of the ended phases
        self.steps_of = np.broadcast_to(np.asarray(ctx.clock.steps), (ctx.clock.n,))[offset:]
        self._plans: dict[int, BatchPlan] = {}

    def begin(self, nodes: np.ndarray, now: float | np.ndarray, models: Params | None = None
              ) -> None:
        """Begin the next phase of `nodes` at `now`, from their rows or from `models`.

        Parameters
        ----------
        nodes : int64 [m], distinct rows.
        now : the instant (s), or float64 [m], each node's.
        models : name -> [m, *shape] written into the rows first, or None.
        """
        ctx = self.ctx
        index = torch.as_tensor(nodes, device=ctx.device)
        if models is not None:
            ctx.population.write(index, models)
        self.phase[nodes] += 1
        k = self.phase[nodes]
        if self.in_row:  # the ended phases' results have been read
            held = self.slot[nodes]
            self.pool.release_slots(held[held >= 0])
            self.slot[nodes] = -1
        self.lr[nodes] = self.algorithm.phase_lr(ctx, nodes, k).double().cpu().numpy()
        if not self.in_row:
            copy_rows(self.buffer, index, ctx.population.params, index)  # the snapshots
        self.read[nodes] = now
        self.due[nodes] = now + ctx.clock.phase_s(k, nodes + self.offset)
        self.computed[nodes] = False

    def end(self, nodes: np.ndarray) -> None:
        """The phases of `nodes` end (computed first if they are not)."""
        self.compute(nodes)
        self.due[nodes] = np.inf
        self.steps[nodes] += self.steps_of[nodes]

    def compute(self, nodes: np.ndarray | None = None) -> None:
        """Compute, if one of `nodes` needs it (None: any), every begun phase not yet computed
        (one batch).

        Parameters
        ----------
        nodes : int64 [m], rows whose offsets are needed, or None.
        """
        if nodes is not None and self.computed[nodes].all():
            return
        ctx, algorithm = self.ctx, self.algorithm
        pending = np.flatnonzero(~self.computed)
        if not len(pending):
            return
        k = self.phase[pending]
        for r in np.unique(k).tolist():
            self._plan(r)
        index = torch.as_tensor(pending, device=ctx.device)
        slots = self.pool.claim(len(pending), high=True) if self.in_row else pending
        run = self.pool.run_of(slots) if self.in_row else None
        store = self.pool.pool if self.in_row else self.buffer
        read = ctx.population.params if self.in_row else self.buffer  # the snapshots
        if run is None and not self._scratch:
            self._scratch = {k: torch.empty_like(v) for k, v in read.items()}
        rows = {name: torch.index_select(b, 0, index, out=(
            store[name][run] if run is not None else self._scratch[name][:len(pending)]))
            for name, b in read.items()}  # trained in place, in the slots where they are a run
        lr = torch.as_tensor(self.lr[pending], device=ctx.device, dtype=ctx.dtype)
        losses = ctx.trainer.train(rows, index, mixed_plan(self._plans, pending, k),
                                   algorithm.solver, lr)
        if not self.in_row:  # results stay results while the rows are the snapshots
            block = row_block(self.buffer)
            for start in range(0, len(pending), block):  # offsets, a block at a time
                part = index[start:start + block]
                for name, b in read.items():
                    rows[name][start:start + len(part)].sub_(b.index_select(0, part))
        self.slot[pending] = slots if self.in_row else -1
        if run is None:
            at = torch.as_tensor(slots, device=ctx.device)
            for name, b in store.items():
                b.index_copy_(0, at, rows[name])
        self.loss[pending] = losses.detach().double().cpu().numpy()
        self.computed[pending] = True
        alive = self.phase[self.phase >= 0].min(initial=0)  # plans no phase will need again
        self._plans = {r: p for r, p in self._plans.items() if r >= alive}

    def _plan(self, k: int) -> BatchPlan:
        if k not in self._plans:
            self._plans[k] = self.algorithm.plan(self.ctx, k)
        return self._plans[k]

    def offsets(self, nodes: np.ndarray) -> Params:
        """The offsets y^K - x_read of the latest phases of `nodes`: name -> [m, *shape] (a view
        for one node, valid until it begins again); not with `snapshot_in_row`, whose phases
        hold their results (`result_slots`)."""
        if self.in_row:
            raise TypeError("phases of an algorithm with snapshot_in_row hold their results: "
                            "read them with result_slots")
        self.compute(nodes)
        if len(nodes) == 1:
            i = int(nodes[0])
            return {name: b[i:i + 1] for name, b in self.buffer.items()}
        index = torch.as_tensor(nodes, device=self.ctx.device)
        return {name: b.index_select(0, index) for name, b in self.buffer.items()}

    def result_slots(self, nodes: np.ndarray) -> np.ndarray:
        """With `snapshot_in_row`: the pool slots [m] holding the results y^K of the latest
        phases of `nodes` (computed first); valid until the nodes begin again."""
        self.compute(nodes)
        return self.slot[nodes]

    def state_dict(self) -> dict[str, Any]:
        """The phases' arrays, and the buffer rows that are not the nodes' models: a snapshot
        still holding the same bits as its node's population row (nothing has changed the row
        since the phase read it) is not saved again (`stored`: the rows saved, in `buffer`);
        with `snapshot_in_row`, the slots (the pool is the mailbox's state).

        Returns
        -------
        dict of tensors.
        """
        arrays = {k: torch.from_numpy(getattr(self, k).copy()) for k in (
            "phase", "read", "due", "computed", "lr", "loss", "steps")}
        if self.in_row:
            return arrays | {"slot": torch.from_numpy(self.slot.copy())}
        rows = torch.arange(len(self.phase), device=self.ctx.device)
        stored = rows[~same_rows(self.buffer, rows, self.ctx.population.params, rows)]
        return arrays | {"stored": stored.cpu(),
                         "buffer": {k: v.index_select(0, stored) for k, v in self.buffer.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a `state_dict` back, once the population and the mailbox are restored: the rows
        not stored are the population's (a checkpoint from before `stored` holds the whole
        buffer; one from before `slot`, with `snapshot_in_row`, the computed phases' offsets
        or, where `offset_held` is False, results in the buffer: they move to slots, the
        offsets as the results that end the same, `Asynchronous.results_of_offsets`).

        Parameters
        ----------
        state : what `state_dict` returned.
        """
        for k in ("phase", "read", "due", "computed", "lr", "loss", "steps"):
            setattr(self, k, state[k].cpu().numpy().copy())
        if "slot" in state:
            self.slot = state["slot"].cpu().numpy().copy()
            return
        saved = {k: v.to(self.ctx.device) for k, v in state["buffer"].items()}
        buffer = {k: v.clone() for k, v in (saved if "stored" not in state  # the whole buffer
                                            else self.ctx.population.params).items()}
        if "stored" in state:
            stored = state["stored"].to(self.ctx.device)
            for k, v in buffer.items():
                v.index_copy_(0, stored, saved[k])
        if not self.in_row:
            self.buffer = buffer
            return
        need = np.flatnonzero(self.computed & (self.phase >= 0))
        device = self.ctx.device
        rows = {k: v.index_select(0, torch.as_tensor(need, device=device))
                for k, v in buffer.items()}
        # older: every computed phase held its offset
        held = state.get("offset_held", state["computed"]).cpu().numpy()[need]
        if held.any():
            at = torch.as_tensor(np.flatnonzero(held), device=device)
            adopted = self.algorithm.results_of_offsets(
                self.ctx, need[held], {k: v.index_select(0, at) for k, v in rows.items()})
            for k, v in rows.items():
                v.index_copy_(0, at, adopted[k])
        self.slot[need] = self.pool.claim(len(need))
        for k, v in self.pool.pool.items():
            v.index_copy_(0, torch.as_tensor(self.slot[need], device=device), rows[k])
