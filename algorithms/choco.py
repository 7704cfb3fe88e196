"""CHOCO-SGD (Koloskova, Stich and Jaggi 2019): gossip of compressed differences with error
feedback, over a symmetric doubly-stochastic W.

"Decentralized stochastic optimization and gossip algorithms with compressed communication",
ICML 2019, Algorithm 2. Every node i keeps a public estimate x^_i of its model, known to its
neighbours (x^ = 0 at the start); round t is

    x_i^{t+1/2} = x_i^t - lr g_i(x_i^t)                      (the local phase)
    q_i = Q(x_i^{t+1/2} - x^_i)                              (sent to every neighbour)
    x^_j <- x^_j + q_j                                       (at i and at every neighbour of j)
    x_i^{t+1} = x_i^{t+1/2} + gamma sum_j W_ij (x^_j - x^_i)

with the consensus step gamma = `consensus_lr`. Since every neighbour applies the same q_j, one
x^_j per node stands for all copies of it: x^ is [N, d] and the last line is one product
x <- x + gamma (W - I) x^. What Q drops is not lost: it stays in x_i - x^_i and is sent in later
rounds (the error feedback). The mean of the x_i is changed only by the local phase (the columns
of W - I sum to 0).

Q is a compressor (p2pfl.core.compression): `compressor` names a built-in one, or a compressor
object is passed to `p2pfl.run(..., compressor=...)`. Each message is the compressor's payload of
the node's row, counted in `bytes_sent` and timed by the simulated network by its exact size.
The whole model is one vector of d values (parameter tensors concatenated in order). One local
step a round (`local_steps = 1`) is the paper's form; with more, the phase's result is compressed.

Every neighbour must receive every q_j for the copies of x^_j to agree: lost messages and offline
nodes (`topology.link_drop`, `node_drop`) are refused, and so is a schedule whose graph changes
(a new neighbour would lack the q_j sent before).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.base import RoundReport
from algorithms.decentralized import Gossip
from algorithms.tracking import refuse_unless_single_vectorized
from p2pfl.context import RunContext
from p2pfl.core.compression import COMPRESSORS, Compressor, named_compressor
from p2pfl.core.population import Params
from p2pfl.core.seeding import torch_generator
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions, option

OBJECT = "object"  # `compressor` when the compressor is an object passed to p2pfl.run


def flatten(params: Params) -> torch.Tensor:
    """The rows of every block side by side (a copy).

    Parameters
    ----------
    params : name -> [N, *shape].

    Returns
    -------
    [N, d] tensor, d the values of one model, blocks in the order of `params`.
    """
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], dim=1)


def add_flat(params: Params, rows: torch.Tensor) -> None:
    """params += rows, split back into the blocks in order.

    Parameters
    ----------
    params : name -> [N, *shape], changed in place.
    rows : [N, d] tensor, blocks in the order of `params` (as `flatten`).
    """
    start = 0
    for v in params.values():
        width = v[0].numel()
        v.view(v.shape[0], -1).add_(rows[:, start:start + width])
        start += width


class Choco(Gossip):
    name = "choco"
    source = "CHOCO-SGD: Koloskova, Stich, Jaggi 2019, ICML, Algorithm 2"

    @dataclass
    class Options(AlgorithmOptions):
        consensus_lr: float = option(0.05, low=0, high=1, low_open=True,
                                     doc="CHOCO's consensus step gamma (tune per compressor "
                                     "and graph)")
        compressor: str = option("top_k", choices=(*COMPRESSORS, OBJECT),
                                 doc="the message compressor Q (object: passed to p2pfl.run)")
        compress_fraction: float = option(0.01, low=0, high=1, low_open=True,
                                          doc="top_k / random_k: fraction of coordinates sent")
        compress_bits: int = option(4, low=1, high=16, doc="qsgd: bits per quantization level")

    READS = {"top_k": ("compress_fraction",), "random_k": ("compress_fraction",), "sign": (),
             "qsgd": ("compress_bits",), OBJECT: ()}  # compressor -> the options it reads

    def check_options(self, cfg: AlgorithmOptions) -> None:
        """Refuse a compressor option the chosen compressor does not read, unless at default."""
        super().check_options(cfg)
        defaults = {f.name: f.default for f in dataclasses.fields(self.Options)}
        for key in ("compress_fraction", "compress_bits"):
            if key not in self.READS[cfg.compressor] and getattr(cfg, key) != defaults[key]:
                raise ConfigError(f"algorithm.{key}", f"compressor {cfg.compressor!r} does not "
                                  f"read {key}: leave it at {defaults[key]!r}")

    def __init__(self, cfg: AlgorithmOptions, compressor: Compressor | None = None) -> None:
        """`compressor`: a Compressor object of one's own, with `cfg.compressor` "object" (the
        config records that one was given); otherwise the named one is built."""
        super().__init__(cfg)
        if compressor is not None and cfg.compressor != OBJECT:
            raise ConfigError("algorithm.compressor", f"is {cfg.compressor!r} but a compressor "
                              "object was passed too: give one of them")
        self.compressor = compressor if cfg.compressor == OBJECT else named_compressor(
            cfg.compressor, cfg.compress_fraction, cfg.compress_bits)

    def message_bytes(self, num_params: int, dtype: torch.dtype) -> int:
        """The payload of one node's row: a draw of N(0, 1) values compressed (exact for every
        built-in compressor, whose sizes do not depend on the values)."""
        generator = torch_generator(0, "compress")
        row = torch.randn(1, num_params, generator=generator, dtype=torch.float64).to(dtype)
        return _bytes(self._compressor().bits(self._compressor().compress(row, generator)))[0]

    def _compressor(self) -> Compressor:
        if self.compressor is None:
            raise ConfigError("algorithm.compressor", "is 'object' but no compressor was passed: "
                              "p2pfl.run(cfg, out, compressor=...)")
        return self.compressor

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self._compressor()
        refuse_unless_single_vectorized(ctx, self.name)
        for key in ("link_drop", "node_drop"):
            if getattr(ctx, key) > 0:
                raise ConfigError(f"topology.{key}", f"{self.name} needs every neighbour to "
                                  "receive every compressed update (their copies of x^ must "
                                  "agree): leave it at 0")
        if ctx.schedule.period != 1:
            raise ConfigError("topology", f"{self.name} runs on a static graph: on one that "
                              "changes, a new neighbour lacks the compressed updates sent before")
        self.estimate = torch.zeros(ctx.num_nodes, ctx.population.num_params,
                                    device=ctx.device, dtype=ctx.dtype)

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        nodes, losses = self.local_phase(ctx, t, faults)
        params = ctx.population.params
        compressor = self._compressor()
        payload = compressor.compress(flatten(params) - self.estimate,
                                      torch_generator(ctx.seed, "compress", t))
        self.estimate += compressor.decompress(payload).to(self.estimate.dtype)
        W, _ = self.gossip_matrix(ctx, graph, faults)
        mixed = ctx.comm.product(W, {"x": self.estimate}, {"x": torch.empty_like(self.estimate)})
        add_flat(params, mixed["x"].sub_(self.estimate).mul_(self.cfg.consensus_lr))
        src, _, _ = T.messages(graph)
        sent = int(np.sum(_bytes(compressor.bits(payload))[src]))
        return RoundReport(nodes, losses, len(src), bytes_sent=sent)

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        """`estimate_gap`: sqrt(mean_i ||x_i - x^_i||^2), what the estimates still owe."""
        gap = (flatten(ctx.population.params) - self.estimate).double().square().sum(1).mean()
        return {"estimate_gap": float(gap) ** 0.5}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "estimate": self.estimate.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.estimate.copy_(state["estimate"])


def _bytes(bits: torch.Tensor | np.ndarray) -> np.ndarray:
    """Whole bytes of each message: int64 [m]."""
    bits = np.asarray(torch.as_tensor(bits).cpu(), dtype=np.int64)
    return (bits + 7) // 8
