"""The node population sharded over torch.distributed processes (ranks).

Rank r of R owns the contiguous block of nodes `Shard.bounds(r)`: their parameter rows and their
local phase. Everything else a round needs is replicated, computed alike on every rank from the
same seeds: the graph and mixing matrix, the minibatch plans and fault draws (drawn for all N
nodes, so they never depend on R), the Push-Sum weights (N float64 scalars: every rank applies
the same P to the same w, so no weight needs to travel), the server model of a centralized
algorithm and its per-client state.

What crosses ranks:
- mixing (`DistComm.mix`): for a round's W, the rows of the nodes i that send to a node j of
  another rank (W[j, i] != 0), each row once per receiving rank, point to point
  (`batch_isend_irecv`). This never moves more bytes than an all-gather (which sends every row
  to every rank), so no all-gather is used (docs/distributed.md);
- reductions: the average model (a sum of each rank's weighted rows), the local evaluation's
  sums, the nodes' losses and divergence records, and the sampled clients' trained models of a
  centralized round (each client trained by the rank that owns it);
- the names of the population's checkpoint files: each rank writes its rows (p2pfl.engine.checkpoint
  `save_shard`), rank 0 the checkpoint that lists them, so a run resumes on any R.

Launch with `torchrun --nproc-per-node R -m p2pfl run CONFIG` (or `p2pfl run CONFIG --nproc R`,
`p2pfl.scale.launch`); a single process never imports torch.distributed's process group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

from p2pfl.core.mixing import LocalComm
from p2pfl.core.population import Params
from p2pfl.core.terms import LocalTerms
from p2pfl.errors import ConfigError, PeerLost
from p2pfl.scale.processes import first_line


@dataclass(frozen=True)
class Shard:
    """The nodes of rank `rank` of `world`: a contiguous block [lo, hi) of `num_nodes`; the first
    num_nodes % world ranks hold one node more."""

    rank: int
    world: int
    num_nodes: int

    def bounds(self, rank: int) -> tuple[int, int]:
        """[lo, hi) of `rank`'s block."""
        base, extra = divmod(self.num_nodes, self.world)
        lo = rank * base + min(rank, extra)
        return lo, lo + base + (rank < extra)

    @property
    def lo(self) -> int:
        return self.bounds(self.rank)[0]

    @property
    def hi(self) -> int:
        return self.bounds(self.rank)[1]

    @property
    def rows(self) -> int:
        return self.hi - self.lo

    def mine(self, nodes: torch.Tensor) -> torch.Tensor:
        """bool [m]: which of `nodes` (ids) this rank owns."""
        return (nodes >= self.lo) & (nodes < self.hi)


class DistComm(LocalComm):
    """`Comm` for a population sharded over the ranks of the default process group.

    Parameter blocks are this rank's rows [rows, *shape]; matrices are the full [N, N] operators
    (every rank builds the same). `gossip_bytes` and `other_bytes` count what this rank sent to
    other ranks since the last `take_bytes`: mixing rows, and the payload of every collective
    it joined.
    """

    def __init__(self, device: torch.device, dtype: torch.dtype, mixing: str,
                 num_nodes: int) -> None:
        super().__init__(device, dtype, mixing)
        self.shard = Shard(dist.get_rank(), dist.get_world_size(), num_nodes)
        self.rank, self.world = self.shard.rank, self.shard.world
        if self.shard.world > num_nodes:
            raise ConfigError("data.num_nodes", f"{self.shard.world} ranks for {num_nodes} nodes:"
                              " every rank needs at least one node")
        self._buffers: dict[tuple, torch.Tensor] = {}
        self.gossip_bytes = 0  # mixing rows sent to other ranks
        self.other_bytes = 0  # collective payloads

    # --- accounting and failure -------------------------------------------------------------

    def take_bytes(self) -> tuple[int, int]:
        """(mixing, collective) bytes sent by this rank since the last call."""
        taken = self.gossip_bytes, self.other_bytes
        self.gossip_bytes = self.other_bytes = 0
        return taken

    def _collective(self, op: str, tensor: torch.Tensor, *args: object) -> None:
        """Run dist.<op>(tensor, *args); a rank that is gone is one PeerLost line."""
        self.other_bytes += tensor.numel() * tensor.element_size()
        try:
            getattr(dist, op)(tensor, *args)
        except (RuntimeError, ValueError) as err:
            raise PeerLost(f"rank {self.shard.rank} lost another rank during {op}: "
                           f"{first_line(err)}") from None

    # --- reductions ---------------------------------------------------------------------------

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        self._collective("all_reduce", tensor)
        return tensor

    def all_max(self, tensor: torch.Tensor) -> torch.Tensor:
        self._collective("all_reduce", tensor, dist.ReduceOp.MAX)
        return tensor

    def all_min(self, tensor: torch.Tensor) -> torch.Tensor:
        self._collective("all_reduce", tensor, dist.ReduceOp.MIN)
        return tensor

    def node_sum(self, params: Params, weights: torch.Tensor) -> Params:
        """sum_i weights[i] * x_i over all N nodes: this rank's rows weighted, then summed over
        the ranks (one all-reduce of the flat model)."""
        local = self.weighted_sum(params, weights[self.shard.lo:self.shard.hi])
        flat = torch.cat([v.reshape(-1) for v in local.values()])
        self.all_sum(flat)
        out, offset = {}, 0
        for k, v in local.items():
            out[k] = flat[offset:offset + v.numel()].view_as(v)
            offset += v.numel()
        return out

    def share(self, count: int) -> tuple[int, int]:
        return Shard(self.rank, self.world, count).bounds(self.rank)

    def clients_trainer(self, trainer: Any) -> Any:
        return ShardedTrainer(trainer, self)

    # --- the population ---------------------------------------------------------------------

    def gather_objects(self, value: Any) -> list[Any] | None:
        gathered = [None] * self.world if self.rank == 0 else None
        try:
            dist.gather_object(value, gathered, dst=0)
        except (RuntimeError, ValueError) as err:
            raise PeerLost(f"rank {self.rank} lost another rank during a checkpoint: "
                           f"{first_line(err)}") from None
        return gathered

    # --- mixing -------------------------------------------------------------------------------

    def mix(self, W: torch.Tensor, params: Params, steps: int = 1) -> None:
        """X <- W^steps @ X on the sharded rows: each product exchanges the rows it needs."""
        plan = ExchangePlan(W, self.shard, self.dtype, self.device)
        for _ in range(steps):
            received = self._exchange(plan, params)
            for k, block in params.items():
                flat = block.view(block.shape[0], -1)
                out = self._buffer(("out",), flat.shape)
                self._product(plan, flat, received[k], out, add=False)
                flat.copy_(out)

    def product(self, W: torch.Tensor, params: Params, out: Params, add: bool = False) -> Params:
        plan = ExchangePlan(W, self.shard, self.dtype, self.device)
        received = self._exchange(plan, params)
        for k, block in params.items():
            target = out[k].view(block.shape[0], -1)
            self._product(plan, block.view(block.shape[0], -1), received[k], target, add)
        return out

    @staticmethod
    def _product(plan: ExchangePlan, own: torch.Tensor, received: torch.Tensor,
                 out: torch.Tensor, add: bool) -> None:
        """out <- W_own @ own + W_received @ received (+ out when `add`): this rank's rows of
        W @ X for one block (own [rows, w], received [needed, w], out [rows, w])."""
        torch.addmm(out, plan.own, own, beta=1 if add else 0, out=out)
        if plan.needed:
            out.addmm_(plan.received, received)

    def _buffer(self, key: tuple, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """A reused buffer of `shape` for `key` (fresh large buffers page-fault every round)."""
        numel = math.prod(shape)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.numel() < numel:
            buffer = self._buffers[key] = torch.empty(numel, device=self.device,
                                                      dtype=self.dtype)
        return buffer[:numel].view(shape)

    def _exchange(self, plan: ExchangePlan, params: Params) -> Params:
        """The rows this rank needs from the others, per block [needed, w] in the plan's column
        order: one message per block and peer, point to point."""
        received = {k: self._buffer(("recv", k), (plan.needed, v[0].numel()))
                    for k, v in params.items()}
        if not plan.needed and not plan.send:
            return received
        ops = []
        for k, block in params.items():
            flat = block.view(block.shape[0], -1)
            for peer, local_rows in plan.send.items():
                message = self._buffer(("send", peer, k), (len(local_rows), flat.shape[1]))
                torch.index_select(flat, 0, local_rows, out=message)
                self.gossip_bytes += message.numel() * message.element_size()
                ops.append(dist.P2POp(dist.isend, message, peer))
            offset = 0
            for peer, count in plan.receive.items():
                ops.append(dist.P2POp(dist.irecv, received[k][offset:offset + count], peer))
                offset += count
        try:
            for request in dist.batch_isend_irecv(ops):
                request.wait()
        except (RuntimeError, ValueError) as err:
            raise PeerLost(f"rank {self.shard.rank} lost another rank during mixing: "
                           f"{first_line(err)}") from None
        return received


class ShardedTrainer:
    """Trains rows of any nodes (a centralized round's sampled clients) where they are held:
    each rank trains the rows of its nodes with `inner`, then one all-reduce of the rows
    (zeros where a rank trained none: the sum is exact) gives every rank all trained rows, their
    losses and the in-place dual updates of their terms."""

    def __init__(self, inner: Any, comm: DistComm) -> None:
        self.inner, self.comm = inner, comm

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def train(self, params: Params, nodes: torch.Tensor, plan: Any, solver: Any,
              lr: torch.Tensor, terms: LocalTerms | None = None) -> torch.Tensor:
        mine = self.comm.shard.mine(nodes)
        rows = {k: v[mine] for k, v in params.items()}
        local_terms = () if terms is None else (terms.rows(mine),)
        losses = (self.inner.train(rows, nodes[mine], plan, solver, lr[mine], *local_terms)
                  if mine.any() else lr.new_zeros(0))
        outputs = [(params, rows)]
        if terms is not None:  # the terms' in-place state (LocalTerms.mutable)
            outputs += list(zip(terms.mutable(), local_terms[0].mutable()))
        full = [v for whole, _ in outputs for v in whole.values()]
        width = sum(v[0].numel() for v in full)
        flat = torch.zeros(len(nodes), width + 1, device=lr.device, dtype=lr.dtype)
        offset = 0
        for whole, part in outputs:
            for k, v in part.items():
                n = whole[k][0].numel()
                flat[mine, offset:offset + n] = v.reshape(len(v), n).to(flat.dtype)
                offset += n
        flat[mine, width] = losses.to(flat.dtype)
        self.comm.all_sum(flat)
        offset = 0
        for v in full:
            n = v[0].numel()
            v.copy_(flat[:, offset:offset + n].view_as(v))
            offset += n
        return flat[:, width].clone()


class ExchangePlan:
    """What one product with W [N, N] moves: the rows this rank sends to each peer (positions
    in its block), how many it receives from each (`needed` in all, ordered by peer and id),
    and its rows of W split into the columns of its own nodes (`own`) and of the received ones
    (`received`)."""

    def __init__(self, W: torch.Tensor, shard: Shard, dtype: torch.dtype,
                 device: torch.device) -> None:
        csr = _scipy(W)
        n, R, me = csr.shape[0], shard.world, shard.rank
        bounds = [shard.bounds(r) for r in range(R)]
        # wanted[s, i]: a node of rank s receives from node i
        wanted = np.zeros((R, n), dtype=bool)
        for s, (lo, hi) in enumerate(bounds):
            wanted[s, csr[lo:hi].indices] = True
        lo, hi = bounds[me]
        self.send = {s: torch.as_tensor(np.flatnonzero(wanted[s, lo:hi]), device=device)
                     for s in range(R) if s != me and wanted[s, lo:hi].any()}
        incoming = [np.flatnonzero(wanted[me, a:b]) + a for r, (a, b) in enumerate(bounds)
                    if r != me]
        self.receive = {r: int(wanted[me, a:b].sum()) for r, (a, b) in enumerate(bounds)
                        if r != me and wanted[me, a:b].any()}
        received = np.concatenate([np.zeros(0, dtype=np.int64), *incoming]).astype(np.int64)
        self.needed = len(received)
        block = csr[lo:hi]
        self.own = _operator(block[:, lo:hi], W.layout, dtype, device)  # [rows, rows]
        self.received = _operator(block[:, received], W.layout, dtype, device)  # [rows, needed]


def _operator(block: sp.csr_array, layout: torch.layout, dtype: torch.dtype,
              device: torch.device) -> torch.Tensor:
    """A block of W as a torch operator in W's layout (dense or CSR)."""
    if layout == torch.sparse_csr:
        return torch.sparse_csr_tensor(
            torch.from_numpy(block.indptr.astype(np.int64)),
            torch.from_numpy(block.indices.astype(np.int64)), torch.from_numpy(block.data),
            size=block.shape, check_invariants=False).to(device=device, dtype=dtype)
    return torch.from_numpy(block.toarray()).to(device=device, dtype=dtype)


def _scipy(W: torch.Tensor) -> sp.csr_array:
    """W [N, N] (dense or CSR torch) as a scipy CSR array on the host, in float64."""
    if W.layout == torch.sparse_csr:
        return sp.csr_array((W.values().double().cpu().numpy(), W.col_indices().cpu().numpy(),
                             W.crow_indices().cpu().numpy()), shape=tuple(W.shape))
    return sp.csr_array(W.double().cpu().numpy())
