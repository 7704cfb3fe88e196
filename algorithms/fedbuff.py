"""FedBuff, buffered asynchronous aggregation (Nguyen et al., AISTATS 2022), on the star.

The server keeps a model w and a buffer. `concurrency` C clients train at any time (the paper's
Algorithm 1):

- a client downloads w (a snapshot of version v, sent by the server), runs its local steps from
  it with step size lr * lr_decay^v (the decay is per server step, as FedAvg's per round) and
  sends back its update Delta = y^K - w (the paper's Delta has the other sign and the server
  subtracts it);
- the server adds s(tau) Delta to the buffer, with tau the staleness of the update (server steps
  since the client's download, tau = version now - v) and s(tau) = (1 + tau)^-a (the paper's
  polynomial weighting, a = 1/2; a = 0 turns it off);
- after every K = `buffer_size` updates it steps w <- w + server_lr * buffer / K and empties the
  buffer (a new version);
- for every update received it samples a new client, uniformly among those not training, and
  sends it the model.

On the simulated clock a download and an upload each take a transfer and the training its compute
time; updates that arrive at the same instant are added in client order (a step may fall between
them: later ones see the new version), and the clients that replace them are drawn at the end of
the instant and get the model as it is then. Client i is graph node i + 1 of the star (node 0 is
the server); its population row holds the model it works from (the server's, as downloaded,
while it trains; then the model it trained). The run records the age of
each update added (its arrival minus the download's send time) and, as `staleness_mean` /
`staleness_max`, tau in server steps (none of them at a mark where no update arrived).

The server steps on a full buffer only, as the paper's: K updates from any clients (a client
reports again each time it is drawn, so K may exceed the number of clients), and none is applied
before. A buffer that is not full when the run ends is not applied (a step with fewer than K
updates is none the paper takes): each row records `buffered`, the updates waiting in it, and
the run's end says in the log how many were left, and when the server never stepped (a run
shorter than K updates: every metric is then the initial model's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from algorithms.asynchronous import Asynchronous, Instant
from algorithms.client_state import expand
from algorithms.options import ServerStep
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.core.seeding import numpy_rng
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions, option

if TYPE_CHECKING:
    from p2pfl.scale.mailbox import Delivery


def staleness_weight(tau: np.ndarray, exponent: float) -> np.ndarray:
    """FedBuff's polynomial staleness weight s(tau) = (1 + tau)^-exponent.

    Parameters
    ----------
    tau : int array, staleness in server steps (>= 0).
    exponent : a >= 0 (the paper's 1/2; 0: every weight 1).

    Returns
    -------
    float64 array, the weights in (0, 1].

    Examples
    --------
    >>> staleness_weight(np.array([0, 3]), 0.5).tolist()
    [1.0, 0.5]
    """
    return (1.0 + np.asarray(tau, dtype=np.float64)) ** -exponent


class FedBuff(Asynchronous):
    """Buffered asynchronous aggregation with staleness weighting (module docstring)."""

    name = "fedbuff"
    source = "FedBuff: Nguyen et al. 2022, AISTATS, arXiv 2106.06639"
    mixing = "server"
    transfers = 2  # a nominal round: the download, the local steps, the upload

    @dataclass
    class Options(ServerStep, AlgorithmOptions):
        buffer_size: int = option(10, low=1, doc="K: client updates per server step (the "
                                  "paper's 10)")
        concurrency: int = option(10, low=1, doc="C: clients training at any time")
        staleness_exponent: float = option(0.5, low=0, doc="a of the staleness weight "
                                           "(1 + tau)^-a (the paper's 1/2; 0: none)")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        n = ctx.num_nodes
        if self.cfg.concurrency > n:
            raise ConfigError("algorithm.concurrency", f"is {self.cfg.concurrency} but there are "
                              f"{n} clients: at most {n} can train at once")
        self.server = {k: v[0].clone() for k, v in ctx.population.params.items()}
        self.buffer = {k: torch.zeros_like(v) for k, v in self.server.items()}
        self.buffered = 0  # updates in the buffer
        self.version = 0  # server steps so far
        self.dispatches = 0  # client draws so far
        self.busy = np.zeros(n, dtype=bool)  # training, or its download or update in flight
        self.trained = np.zeros(n, dtype=bool)
        self.read_version = np.zeros(n, dtype=np.int64)  # the version each client downloaded
        self.sent_at = np.zeros(n)  # when its download was sent (s)
        self.taus: list[int] = []  # staleness of the updates added since the last record
        self.tags: list[int] = []  # and the versions they were trained from

    def start(self, ctx: RunContext, ev: Instant) -> None:
        self.dispatch(ctx, ev, self.cfg.concurrency)

    def phase_lr(self, ctx: RunContext, nodes: np.ndarray, k: np.ndarray) -> torch.Tensor:
        """lr * lr_decay ** v, v the server version each client downloaded: the step size
        decays per server step (as FedAvg's per round), not per participation of the client.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m], clients (rows).
        k : int64 [m], their phase indices (not used).

        Returns
        -------
        [m] tensor in the run's dtype.
        """
        v = self.read_version[nodes].astype(np.float64)
        return torch.as_tensor(self.cfg.lr * self.cfg.lr_decay ** v, device=ctx.device,
                               dtype=ctx.dtype)

    def mark_lr(self, t: int) -> float:
        """The step size of the updates the server added since the previous mark (their mean;
        none: that of a client downloading now, lr * lr_decay ** version).

        Parameters
        ----------
        t : the mark, from 0 (not used).

        Returns
        -------
        float.
        """
        v, count = np.unique(self.tags if self.tags else [self.version], return_counts=True)
        steps = self.cfg.lr * self.cfg.lr_decay ** v.astype(np.float64)
        return float(steps[0]) if len(v) == 1 else float(np.average(steps, weights=count))

    def dispatch(self, ctx: RunContext, ev: Instant, count: int) -> None:
        """Sample `count` clients among those not busy and send them the server model.

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        count : clients to start.
        """
        idle = np.flatnonzero(~self.busy)
        rng = numpy_rng(ctx.seed, "participation", self.dispatches)
        chosen = np.sort(rng.choice(idle, size=min(count, len(idle)), replace=False))
        self.dispatches += 1
        self.busy[chosen] = True
        self.read_version[chosen] = self.version
        self.sent_at[chosen] = ev.time(np.zeros(1, dtype=np.int64))[0]  # the server's instant
        clients, server = chosen + 1, np.zeros_like(chosen)
        model = {k: v.unsqueeze(0) for k, v in self.server.items()}
        ev.send(server, clients, ev.phase(chosen) + 1, payload=model,
                owner=np.zeros_like(chosen), copies=1)

    def phase_end(self, ctx: RunContext, ev: Instant, nodes: np.ndarray) -> None:
        offsets = ev.offsets(nodes)
        index = torch.as_tensor(nodes, device=ctx.device)
        for name, v in ctx.population.params.items():  # the model it trained
            v[index] += offsets[name]
        clients, server = nodes + 1, np.zeros_like(nodes)
        ev.send(clients, server, ev.phase(nodes), payload=offsets,
                tag=self.read_version[nodes], copies=1)

    def arrive(self, ctx: RunContext, ev: Instant, messages: Delivery) -> None:
        down = messages.dst > 0
        if down.any():  # downloads: the clients begin training from the model they got
            rows = ev.payload(messages.slot[down])
            ev.begin(messages.dst[down] - 1, models=rows)
        up = ~down
        if up.any():
            self.receive(ctx, ev, messages.src[up] - 1, messages.slot[up])

    def receive(self, ctx: RunContext, ev: Instant, clients: np.ndarray,
                slots: np.ndarray) -> None:
        """Add the clients' updates to the buffer in client order, step the server after every
        K of them, and start as many new clients.

        Parameters
        ----------
        ctx : the run.
        ev : the instant.
        clients : int64 [R], the clients whose update arrived (rows), sorted.
        slots : int64 [R], their payload slots.
        """
        updates, (_, tags, _) = ev.payload(slots), ev.slot_info(slots)
        K, start = self.cfg.buffer_size, 0
        while start < len(clients):
            stop = start + min(K - self.buffered, len(clients) - start)
            tau = self.version - tags[start:stop]
            weights = torch.as_tensor(staleness_weight(tau, self.cfg.staleness_exponent),
                                      device=ctx.device, dtype=ctx.dtype)
            added = ctx.comm.weighted_sum({k: v[start:stop] for k, v in updates.items()},
                                          weights)
            for k, b in self.buffer.items():
                b += added[k]
            self.taus += tau.tolist()
            self.tags += tags[start:stop].tolist()
            self.buffered += stop - start
            if self.buffered == K:
                for k, w in self.server.items():
                    w.add_(self.buffer[k], alpha=self.cfg.server_lr / K)
                    self.buffer[k].zero_()
                self.buffered, self.version = 0, self.version + 1
            start = stop
        ev.mixed(ev.time(np.zeros(1, dtype=np.int64))[0] - self.sent_at[clients])
        self.busy[clients] = False
        self.trained[clients] = True
        self.dispatch(ctx, ev, len(clients))

    def average_model(self, ctx: RunContext) -> Params:
        return self.server

    def local_models(self, ctx: RunContext) -> Params:
        nodes = np.flatnonzero(self.trained) if self.trained.any() else np.arange(ctx.num_nodes)
        return ctx.population.rows(torch.as_tensor(nodes, device=ctx.device))

    def node_models(self, ctx: RunContext) -> Params:
        """Every client deploys the server model."""
        return expand(self.server, ctx.population.num_nodes)

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        """The server's version, the updates in its buffer, and the staleness tau (server steps)
        of the updates added since the previous mark (mean, max; left out when none was)."""
        taus, self.taus, self.tags = self.taus, [], []
        stale = ({"staleness_mean": float(np.mean(taus)), "staleness_max": max(taus)}
                 if taus else {})
        return {"server_version": self.version, "buffered": self.buffered, **stale}

    def left_undone(self, ctx: RunContext) -> str:
        """The updates still in the buffer (not applied), and whether the server never stepped.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        str, one line; "" when the buffer is empty.
        """
        if not self.buffered:
            return ""
        K = self.cfg.buffer_size
        line = (f"fedbuff: {self.buffered} of the {self.version * K + self.buffered} client "
                f"updates received were still in the buffer at the end, not applied (the server "
                f"steps on K = buffer_size = {K})")
        if self.version == 0:
            line += ("; the server never stepped: every metric is the initial model's (lower "
                     "buffer_size or run more rounds)")
        return line

    def state_dict(self) -> dict[str, Any]:
        arrays = {k: torch.from_numpy(getattr(self, k).copy())
                  for k in ("busy", "trained", "read_version", "sent_at")}
        return arrays | {"server": {k: v.clone() for k, v in self.server.items()},
                         "buffer": {k: v.clone() for k, v in self.buffer.items()},
                         "buffered": self.buffered, "version": self.version,
                         "dispatches": self.dispatches, "taus": list(self.taus),
                         "tags": list(self.tags)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k in ("busy", "trained", "read_version", "sent_at"):
            setattr(self, k, state[k].cpu().numpy().copy())
        self.server = {k: v.clone() for k, v in state["server"].items()}
        self.buffer = {k: v.clone() for k, v in state["buffer"].items()}
        self.buffered, self.version = int(state["buffered"]), int(state["version"])
        self.dispatches, self.taus = int(state["dispatches"]), list(state["taus"])
        self.tags = list(state["tags"])
