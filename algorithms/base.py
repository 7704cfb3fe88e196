"""What every algorithm is: its local solver, its round, and the models it is evaluated on.

The kinds of round built on it:
- `decentralized.Gossip`: all nodes train, then mix with a doubly-stochastic W (D-PSGD family).
- `decentralized.PushSum`: all nodes train at their de-biased models, then mix (x, w) with a
  column-stochastic W.
- `server.Server`: sampled clients train from the server model on a star whose hub is the server;
  the server aggregates their updates.

A concrete algorithm picks a kind and, at most, overrides a hook or two (see `fedavg.py`).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.baselines import Baseline, baseline_line
from p2pfl.callbacks import Callback
from p2pfl.context import RunContext
from p2pfl.core.federated import BatchPlan, FederatedData
from p2pfl.core.population import Params
from p2pfl.core.solver import LocalSolver
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions

if TYPE_CHECKING:
    from p2pfl.config import Config


@dataclass
class RoundReport:
    """What happened in one round: who trained, their losses, what was sent."""

    nodes: torch.Tensor  # int64 [m], the nodes that trained
    losses: torch.Tensor  # [m], each node's mean training loss over its local steps
    copies_sent: int  # model copies sent over all links
    scalars_sent: int = 0  # float64 scalars sent besides the copies (push-sum weights)
    bytes_sent: int | None = None  # set when messages are not whole copies (compressed)


def value_bytes(dtype: torch.dtype) -> int:
    """Bytes of one value of a floating-point `dtype`.

    Parameters
    ----------
    dtype : a floating-point torch dtype.

    Returns
    -------
    int, bytes per value (4 for float32, 8 for float64).
    """
    return torch.finfo(dtype).bits // 8


def directed_edge_count(graph: nx.Graph) -> int:
    """Messages of one gossip exchange: every edge of an undirected graph carries two.

    Parameters
    ----------
    graph : the round's graph (self-loops are not messages).

    Returns
    -------
    int, number of messages.
    """
    edges = graph.number_of_edges() - nx.number_of_selfloops(graph)
    return edges if graph.is_directed() else 2 * edges


def require_one_local_step(cfg: AlgorithmOptions, rule: str, otherwise: str = "") -> None:
    """Refuse `local_steps` other than 1, for an algorithm whose rule applies one gradient per
    exchange.

    Parameters
    ----------
    cfg : the algorithm's options.
    rule : what the algorithm does, the start of the message (e.g. "sgp takes one local step a
        round").
    otherwise : what to run instead, appended to the message ("" for nothing).

    Raises
    ------
    ConfigError
        naming algorithm.local_steps unless it is 1.
    """
    if cfg.local_steps != 1:
        raise ConfigError("algorithm.local_steps", f"{rule} (got local_steps = "
                          f"{cfg.local_steps}, local_epochs = {cfg.local_epochs}): set "
                          f"local_steps = 1{otherwise}")


class Algorithm(ABC):
    """An FL algorithm: its local solver, its round, and the models it is evaluated on."""

    name: ClassVar[str]
    source: ClassVar[str] = ""  # "<name>: <authors> <year>, <where>" (`p2pfl algorithms`)
    mixing: ClassVar[str]  # "doubly_stochastic" | "column_stochastic" | "push_pull" | "server"
    supports_overlap: ClassVar[bool] = False  # mixes messages that arrive rounds late
    # The [algorithm] fields it reads, with defaults and limits: a subclass that reads more
    # declares `@dataclass class Options(<groups>, Parent.Options)` (algorithms/options.py).
    Options: ClassVar[type[AlgorithmOptions]] = AlgorithmOptions
    # variant -> fields of Options read only in that form (`algorithm.variant`)
    form_options: ClassVar[dict[str, tuple[str, ...]]] = {}
    variants: ClassVar[tuple[str, ...]] = ("paper",)  # the values `algorithm.variant` takes
    # the form an unset `algorithm.variant` means (the one under which the paper's setting trains)
    default_variant: ClassVar[str] = "paper"
    # the values `algorithm.order` takes (an algorithm with both a local update and a mixing whose
    # order has two forms; algorithms/options.py Order), and the one of its paper, which "" means
    orders: ClassVar[tuple[str, ...]] = ()
    paper_order: ClassVar[str] = ""
    # The settings of its own options that turn its terms off and what it then computes, the
    # most specific first (algorithms/baselines.py); read from the class itself only, never
    # inherited: a subclass is another algorithm and declares its own.
    baselines: ClassVar[tuple[Baseline, ...]] = ()

    def __init__(self, cfg: AlgorithmOptions) -> None:
        if not isinstance(cfg, self.Options):
            raise TypeError(f"{self.name} takes {self.Options.__qualname__}, got "
                            f"{type(cfg).__qualname__}")
        if cfg.variant == "":
            cfg = dataclasses.replace(cfg, variant=self.default_variant)
        if getattr(cfg, "order", None) == "":
            cfg = dataclasses.replace(cfg, order=self.paper_order)
        self.check_options(cfg)
        self.cfg = cfg
        self.solver = LocalSolver(momentum=getattr(cfg, "momentum", 0.0),
                                  rho=getattr(cfg, "rho", 0.0), weight_decay=cfg.weight_decay,
                                  clip_norm=cfg.clip_norm)

    def check_options(self, cfg: AlgorithmOptions) -> None:
        """Check the options against the forms this algorithm has.

        Parameters
        ----------
        cfg : the algorithm's options.

        Raises
        ------
        ConfigError
            naming algorithm.variant for a form this algorithm does not have, algorithm.order for an
            order it does not have, algorithm.last_batch when it is not 'keep' with local_steps > 0,
            and algorithm.<key> for a field read only in another form unless it is at its default.
        """
        if cfg.variant not in self.variants:
            raise ConfigError("algorithm.variant", f"{self.name} has no {cfg.variant!r} form "
                              f"(allowed: {', '.join(self.variants)})")
        order = getattr(cfg, "order", "")
        if order and order not in self.orders:
            raise ConfigError("algorithm.order", f"{self.name} has no {order!r} order (allowed: "
                              f"{', '.join(self.orders)}; '' = its paper's, "
                              f"{self.paper_order!r})")
        if cfg.local_steps > 0 and cfg.last_batch != "keep":
            raise ConfigError("algorithm.last_batch", f"is {cfg.last_batch!r} but local_steps = "
                              f"{cfg.local_steps} takes full batches across epochs: leave it "
                              "at 'keep' or set local_steps = 0")
        defaults = {f.name: f.default for f in dataclasses.fields(self.Options)}
        in_form = self.form_options.get(cfg.variant, ())
        for key in {k for keys in self.form_options.values() for k in keys} - set(in_form):
            value, default = getattr(cfg, key), defaults[key]
            if value != default:
                forms = [v for v, keys in self.form_options.items() if key in keys]
                raise ConfigError(f"algorithm.{key}", f"{self.name} reads {key} only in its "
                                  f"{' / '.join(map(repr, forms))} form (got {value!r} with "
                                  f"variant {cfg.variant!r}); leave it at {default!r} or set "
                                  "algorithm.variant (docs/algorithms-centralized.md)")

    def baseline(self) -> str:
        """The line a run logs once when its options set this algorithm back to a baseline.

        Returns
        -------
        str, naming the algorithm, the settings and what it then computes (`baselines`, of
        this class itself); "" when its options keep its own terms.
        """
        return baseline_line(self.name, vars(type(self)).get("baselines", ()), self.cfg)

    @classmethod
    def implied(cls, cfg: Config) -> dict[str, Any]:
        """Dotted-key settings that choosing this algorithm implies.

        They apply where `cfg` leaves them at their defaults (when the config is loaded, so
        config.json records them).

        Parameters
        ----------
        cfg : the run's config.

        Returns
        -------
        dict {dotted key: value}; empty by default.
        """
        return {}

    def message_bytes(self, num_params: int, dtype: torch.dtype) -> int:
        """Bytes of one message on one link (one exchange) for the simulated network.

        Parameters
        ----------
        num_params : values in a model copy.
        dtype : the models' dtype.

        Returns
        -------
        int, bytes; by default a model copy of `num_params` values of `dtype`.
        """
        return num_params * value_bytes(dtype)

    @property
    def exchanges(self) -> int:
        """Message exchanges a round, one after the other: the simulated clock waits for each
        (one by default)."""
        return 1

    def setup(self, ctx: RunContext) -> None:
        """Allocate algorithm state (called once before round 0)."""

    def lr(self, t: int) -> float:
        """Local learning rate of round t (decayed once per round).

        Parameters
        ----------
        t : round, from 0.

        Returns
        -------
        float, lr * lr_decay ** t.
        """
        return self.cfg.lr * self.cfg.lr_decay**t

    def plan(self, ctx: RunContext, t: int, data: FederatedData | None = None) -> BatchPlan:
        """The minibatches of round t of every node of `data`.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        data : the nodes' data (default: the run's).

        Returns
        -------
        BatchPlan, from the options' batch size, local epochs or steps and last batch rule.
        """
        a = self.cfg
        return (data or ctx.data).plan(ctx.seed, t, a.batch_size, a.local_epochs,
                                       a.local_steps, a.last_batch)

    def train(self, ctx: RunContext, params: Params, nodes: torch.Tensor, t: int,
              lr: torch.Tensor) -> torch.Tensor:
        """Run the local phase of round t for `nodes` on `params` (in place).

        Parameters
        ----------
        ctx : the run.
        params : the models trained: name -> [m, *shape], rows as `nodes`.
        nodes : int64 [m], the nodes that train.
        t : round, from 0.
        lr : [m] step size of each node.

        Returns
        -------
        [m] tensor, each node's mean training loss over its local steps.
        """
        return ctx.trainer.train(params, nodes, self.plan(ctx, t), self.solver, lr)

    @abstractmethod
    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        """Local phase and communication of round t over `graph`.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        graph : the round's graph.
        faults : the lost messages and offline nodes the engine drew (`RunContext.faults`).

        Returns
        -------
        RoundReport, who trained, their losses and what was sent.
        """

    @abstractmethod
    def average_model(self, ctx: RunContext) -> Params:
        """The model whose accuracy is `test_acc`.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        Params, name -> [*shape].
        """

    @abstractmethod
    def local_models(self, ctx: RunContext) -> Params:
        """The nodes' own models for `test_acc_local_mean`.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        Params, name -> [m, *shape].
        """

    def node_models(self, ctx: RunContext) -> Params:
        """The model each node this process holds would use on its own data.

        Its own model (decentralized) or the server's (centralized), for `test_acc_node_*` on the
        nodes' local test splits.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        Params, name -> [rows, *shape], rows as `ctx.all_nodes()`.
        """
        return ctx.population.params

    def selection_losses(self) -> np.ndarray | None:
        """The nodes' latest training losses for loss-based neighbour selection.

        Returns
        -------
        [N] float array, or None (not tracked, or no node has trained yet).
        """
        return None

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        """Algorithm-specific per-round metrics (cheap ones: every round).

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        dict {metric name: value}; empty by default.
        """
        return {}

    def files(self, ctx: RunContext) -> dict[str, Any]:
        """JSON records the algorithm leaves in the run directory when the run finishes.

        E.g. a private gossip run's privacy.json (algorithms/muffliato.py).

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        dict {file name: JSON-serialisable record}; empty by default.
        """
        return {}

    def callbacks(self, ctx: RunContext) -> list[Callback]:
        """Round callbacks the algorithm adds after the built-in evaluation.

        E.g. a metric that needs its own evaluation, such as FedFSA's personal accuracy.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        list of Callback; empty by default.
        """
        return []

    def divergence_hint(self, t: int, nodes: list[int]) -> str:
        """What in this algorithm's state of round t may explain `nodes` going non-finite.

        Parameters
        ----------
        t : round, from 0.
        nodes : the nodes that went non-finite.

        Returns
        -------
        str, a short clause for the one-line divergence message ("" if nothing to say).
        """
        return ""

    def state_dict(self) -> dict[str, Any]:
        """The algorithm's state for a checkpoint (tensors cloned); empty by default.

        Returns
        -------
        dict, what `load_state_dict` restores.
        """
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned.

        Parameters
        ----------
        state : a `state_dict` of this algorithm.
        """
