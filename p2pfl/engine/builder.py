"""Building a run: config (and objects) -> data, topology schedule, model, population, trainer,
algorithm, all validated before any training starts."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import networkx as nx
import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import topologies as T
from algorithms import ALGORITHMS, Algorithm, Asynchronous
from algorithms.asynchronous import NEEDS_CLOCK, NEEDS_TIME
from p2pfl.config import OBJECT, Config, ConfigError, DataConfig
from p2pfl.context import RunContext
from p2pfl.core.federated import FederatedData, check_steps, steps_per_node
from p2pfl.core.gradients import local_gradients
from p2pfl.core.guard import Guard
from p2pfl.core.memory import check_fits, plan_chunks
from p2pfl.core.mixing import Comm, LocalComm, tile_width
from p2pfl.core.models import (
    build_model,
    mixed_precision,
    named_failures,
    stacked_forward,
    uses_batch_statistics,
)
from p2pfl.core.population import Population
from p2pfl.core.reference import LoopTrainer
from p2pfl.core.seeding import stream_seed
from p2pfl.core.trainer import Trainer, VectorizedTrainer
from p2pfl.data import PARTITION_PARAMS, PARTITIONS, Dataset, check_partition, partition
from p2pfl.engine.datasets import named_dataset
from p2pfl.engine.stacked import Stack
from p2pfl.engine.threats import byzantine_of, check_one_process, privacy_of
from p2pfl.engine.topology import check_topology, needs_class_counts, schedule_for
from p2pfl.errors import UserCodeError
from p2pfl.objects import Parts
from p2pfl.scale.distributed import DistComm
from p2pfl.scale.network import Clock

LOCAL_TEST_KEY = 2  # the "eval" stream key of the local test split (FedFSA's own split is 1)


def resolve_device(name: str) -> torch.device:
    """The device a config's `device` names.

    Parameters
    ----------
    name : "auto" (CUDA when torch sees one, else the CPU), "cpu", "cuda", ...

    Returns
    -------
    torch.device.

    Raises
    ------
    ConfigError
        naming device for 'cuda' when torch sees no CUDA device.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "'cuda' requested but torch sees no CUDA device")
    return torch.device(name)


def _partition(cfg: Config, dataset: Dataset, given: object | None = None) -> list[np.ndarray]:
    """One index array per node into `dataset`'s training set: the configured partition, or
    `given` (index lists, or a partitioner function called with the configured seed)."""
    d = cfg.data
    labels = dataset.y_train.numpy()
    if given is None:
        _check_partition_params(d)
    try:
        if given is not None and not callable(given):
            return check_partition(given, d.num_nodes, len(labels), d.allow_overlap)
        params = {k: getattr(d, k) for k in PARTITION_PARAMS}
        return partition(labels, d.num_nodes, given or d.partition, allow_overlap=d.allow_overlap,
                         seed=stream_seed(cfg.seed, "partition"), **params)
    except ValueError as err:
        raise ConfigError("partition" if given is not None else "data", str(err)) from None
    except Exception as err:  # a partition function of one's own, failing in its own code
        if not callable(given):
            raise
        name = getattr(given, "__qualname__", type(given).__name__)
        raise UserCodeError(f"partition function {name}", err) from err


def _check_partition_params(d: DataConfig) -> None:
    """Refuse a partition parameter set away from its default that the partition does not
    read (it would be silently ignored)."""
    reads = PARTITIONS[d.partition].params if d.partition in PARTITIONS else ()
    default = DataConfig()
    if d.allow_overlap:
        raise ConfigError("data.allow_overlap", f"is for a partition given as an object; "
                          f"{d.partition!r} never gives a sample to two nodes")
    for key in PARTITION_PARAMS:
        if key not in reads and getattr(d, key) != getattr(default, key):
            raise ConfigError(f"data.{key}", f"is set ({getattr(d, key)!r}) but partition "
                              f"{d.partition!r} does not read it (it reads: "
                              f"{', '.join(reads) or 'nothing'})")


def _load_data(cfg: Config, device: torch.device, dtype: torch.dtype,
               dataset: Dataset | None = None, given: object | None = None) -> FederatedData:
    """The run's federated data: the partition, then each node's local test share held out
    when `data.local_test` > 0."""
    dataset = dataset if dataset is not None else named_dataset(cfg, dtype)
    data = FederatedData(dataset, _partition(cfg, dataset, given), device, dtype)
    if cfg.data.local_test > 0:
        try:
            data, tests = data.held_out(cfg.data.local_test, cfg.seed, LOCAL_TEST_KEY)
        except ValueError as err:
            raise ConfigError("data.local_test", str(err)) from None
        data.local_test = tests
    return data


def federated_data(cfg: Config, dtype: torch.dtype = torch.float32) -> FederatedData:
    """The data `cfg` trains on (its dataset, partition and local test split) on the CPU.

    Without a model: what `p2pfl data describe` summarises.

    Parameters
    ----------
    cfg : the config.
    dtype : the inputs' dtype.

    Returns
    -------
    FederatedData.
    """
    return _load_data(cfg, torch.device("cpu"), dtype)


def class_counts(cfg: Config, dataset: Dataset | None = None) -> np.ndarray:
    """Training samples of each class on each node of the run of `cfg`.

    Its partition after the local test split (what `build` trains on), computed on the CPU without
    a model. This is what a topology built from the partition (a builder taking `class_counts`) is
    given.

    Parameters
    ----------
    cfg : the config.
    dataset : used instead of loading `cfg.data.name`, or None.

    Returns
    -------
    int64 [num_nodes, K] array.
    """
    return _load_data(cfg, torch.device("cpu"), torch.float32, dataset).label_counts()


def check_variants(cfgs: Sequence[tuple[str, Config]], named_topology: bool = True,
                   named_data: bool = True) -> None:
    """Before the first of several runs starts: the checks of `build` that need no model.

    The data and its partition, the topology and the algorithm's mixing, for every (name, config),
    a failure naming the run. A dataset is loaded once for all; a part given as an object is
    checked when its run is built.

    Parameters
    ----------
    cfgs : (run name, config) pairs.
    named_topology : whether the topology is the config's named one (else given as an object).
    named_data : whether the data is the config's named one.

    Raises
    ------
    ConfigError
        whose field starts with the run's name.
    """
    datasets: dict[tuple, Dataset] = {}
    for name, cfg in cfgs:
        try:
            algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
            if isinstance(algorithm, Asynchronous) and not cfg.network.enabled:
                raise ConfigError("network.enabled", NEEDS_CLOCK.format(name=algorithm.name))
            if isinstance(algorithm, Asynchronous) and cfg.network.step_s == 0:
                raise ConfigError("network.step_s", NEEDS_TIME.format(name=algorithm.name))
            counts = None
            if named_data:
                d = cfg.data
                key = (d.name, d.root, d.synthetic_train, d.synthetic_test,
                       cfg.seed if d.name == "synthetic" else None)
                if key not in datasets:
                    datasets[key] = named_dataset(cfg, torch.float32)
                if needs_class_counts(cfg):
                    counts = class_counts(cfg, datasets[key])
                else:
                    _partition(cfg, datasets[key])
            if named_topology and (counts is not None or not needs_class_counts(cfg)):
                check_topology(algorithm, schedule_for(cfg, algorithm, counts), cfg.rounds)
        except ConfigError as err:
            raise ConfigError(f"{name} {err.field}", err.message) from None


def build(cfg: Config, dataset: Dataset | None = None, parts: Parts | None = None,
          chunks: Sequence[int] | None = None, stack: Stack | None = None
          ) -> tuple[RunContext, Algorithm]:
    """Everything a run needs, validated before any training starts.

    Parameters
    ----------
    cfg : the config.
    dataset : used instead of loading `cfg.data.name` (the benchmark loads a dataset once for
        many builds, or supplies CIFAR-shaped synthetic data); it is partitioned as configured.
    parts : what was given as objects (p2pfl.objects): a topology schedule (decentralized
        algorithms only), a model, a dataset and a partition, each run instead of the config's
        named one.
    chunks : (train, eval), replaces the planned chunk sizes (a resume batches nodes as the run
        it continues did).
    stack : the Stack (p2pfl.engine.stacked) whose other members' local phases this run's are
        trained with; chunks are then planned for all of them.

    Returns
    -------
    tuple (RunContext, Algorithm).

    Raises
    ------
    ConfigError
        naming the field of whatever cannot be run (data, partition, topology, model, executor,
        ...).
    UserCodeError
        when code given as an object (a partition function, a schedule) fails.
    """
    parts = parts or Parts()
    schedule = parts.schedule
    device = resolve_device(cfg.device)
    dtype = getattr(torch, cfg.engine.dtype)
    objects = {} if parts.compressor is None else {"compressor": parts.compressor}
    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm, **objects)
    data = _load_data(cfg, device, dtype,
                      parts.dataset if parts.dataset is not None else dataset, parts.partition)
    a = cfg.algorithm
    try:
        check_steps(steps_per_node(data.sizes, a.batch_size, a.local_epochs, a.local_steps,
                                a.last_batch), data.sizes, a.batch_size)
    except ValueError as err:
        raise ConfigError("algorithm.last_batch", str(err)) from None
    if schedule is None:  # after the data: a topology may be built from its partition
        schedule = schedule_for(cfg, algorithm,
                                data.label_counts() if needs_class_counts(cfg) else None)
    elif algorithm.mixing == "server":
        raise ConfigError("topology", f"{algorithm.name} is centralized and runs on the star "
                          "(hub = server); a topology object is for decentralized algorithms")
    check_topology(algorithm, schedule, cfg.rounds)
    if parts.model is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(stream_seed(cfg.seed, "init"))
            model = build_model(cfg.model.name, data.input_shape, data.num_classes)
        model = model.to(device=device, dtype=dtype)
    else:
        model = _own_model(parts.model, data, device, dtype)
    comm = _comm(cfg, device, dtype)
    check_one_process(cfg, isinstance(comm, DistComm))
    first, rows = (comm.shard.lo, comm.shard.rows) if isinstance(comm, DistComm) else (
        0, cfg.data.num_nodes)
    num_params = sum(p.numel() for p in model.parameters())
    scratch = rows * tile_width(rows, max(p.numel() for p in model.parameters()), device,
                                dtype.itemsize)
    check_fits("data.num_nodes", f"a population of {rows} models of {num_params} "
               "parameters (and its mixing buffer)", (rows * num_params + scratch)
               * dtype.itemsize, device)
    population = Population(model, rows, device, dtype, first, cfg.data.num_nodes)
    try:
        forward = stacked_forward(model)
    except ValueError as err:
        raise ConfigError("model", str(err)) from None
    bf16 = cfg.engine.precision == "bf16"
    if bf16:
        forward = mixed_precision(forward, device.type)
    if cfg.engine.executor == "loop":
        trainer: Trainer = LoopTrainer(model, data, cfg.data.num_nodes, bf16)
    else:
        if chunks is None and cfg.engine.chunk_size:
            chunks = (cfg.engine.chunk_size, cfg.engine.chunk_size)
        elif chunks is None:
            plan = plan_chunks(forward, {k: v[:1] for k, v in population.params.items()},
                               data.input_shape, rows * (stack.size if stack else 1),
                               cfg.algorithm.batch_size,
                               cfg.eval.batch_size, algorithm.solver.rho > 0, device,
                               ragged=not data.balanced)
            chunks = (plan.train, plan.eval)
        if cfg.engine.compile:
            forward = torch.compile(forward)
        if parts.model is not None:
            forward = named_failures(forward, f"model {type(model).__name__}")
        gradients = local_gradients(model, forward, hand_written=not (bf16 or cfg.engine.compile))
        trainer = VectorizedTrainer(forward, data, *chunks, gradients=gradients,
                                    batch_statistics=uses_batch_statistics(model))
    if stack is not None:
        trainer = stack.member(trainer, None if cfg.engine.compile else
                               (type(model), repr(model), dtype, device, bf16))
    guard = Guard(cfg.data.num_nodes, device, cfg.engine.max_loss)
    ctx = RunContext(device, dtype, data, population, forward, guard.wrap(trainer), comm,
                     schedule, guard, network_clock(cfg, algorithm, schedule.n, data.sizes,
                                                   population.num_params,
                                                   population.flat.dtype, parts.underlay),
                     uses_batch_statistics(model), cfg.seed, cfg.topology.link_drop,
                     cfg.topology.node_drop, cfg.eval.batch_size, byzantine_of(cfg, schedule),
                     privacy_of(cfg))
    algorithm.setup(ctx)
    return ctx, algorithm


def _comm(cfg: Config, device: torch.device, dtype: torch.dtype) -> Comm:
    """The run's communication: LocalComm, or DistComm in a process of a distributed launch."""
    if not dist.is_initialized():
        return LocalComm(device, dtype, cfg.engine.mixing)
    if cfg.engine.executor == "loop":
        raise ConfigError("engine.executor", "the 'loop' executor runs in one process; a "
                          "distributed run uses 'vectorized'")
    if cfg.network.enabled and cfg.network.overlap:
        raise ConfigError("network.overlap", "messages in flight across rounds are simulated in "
                          "one process; a distributed run takes network.overlap = false")
    return DistComm(device, dtype, cfg.engine.mixing, cfg.data.num_nodes)


def network_clock(cfg: Config, algorithm: Algorithm, n: int, sizes: np.ndarray,
                  num_params: int, dtype: torch.dtype, underlay: nx.Graph | None = None
                  ) -> Clock | None:
    """The simulated clock of a run with [network] enabled (None without).

    A message is what the algorithm says (`message_bytes`: one model in the run's dtype,
    Push-Sum adds its float64 weight), `exchanges` times a round one after the other (gossip:
    gossip_steps); the underlay is the one given as an object (p2pfl.objects.underlay), else the
    one the config names.

    Parameters
    ----------
    cfg : the run's config.
    algorithm : its algorithm.
    n : graph nodes of its schedule (the star's server included).
    sizes : int [num_nodes], each node's training samples (its local steps follow).
    num_params : values in one model copy.
    dtype : the models' dtype.
    underlay : an underlay object, or None.

    Returns
    -------
    Clock, or None.

    Raises
    ------
    ConfigError
        naming network.underlay when the underlay has fewer nodes than the run.
    """
    if not cfg.network.enabled:
        return None
    size = algorithm.message_bytes(num_params, dtype)
    a = cfg.algorithm
    steps = steps_per_node(sizes, a.batch_size, a.local_epochs, a.local_steps, a.last_batch)
    if algorithm.mixing == "server":  # the star: the server (node 0) takes no local step
        steps = np.concatenate(([0], steps))
    if underlay is None and cfg.network.underlay:
        underlay = T.underlay(cfg.network.underlay)
    if underlay is not None and underlay.number_of_nodes() < n:
        which = ("the underlay object" if cfg.network.underlay == OBJECT
                 else repr(cfg.network.underlay))
        raise ConfigError("network.underlay", f"{which} has {underlay.number_of_nodes()} nodes, "
                          f"fewer than the run's {n} (node i sits at its node i)")
    return Clock(cfg.network, n, cfg.seed, steps, size, algorithm.exchanges, underlay)


def _own_model(model: nn.Module, data: FederatedData, device: torch.device,
               dtype: torch.dtype) -> nn.Module:
    """A copy of a researcher's model on the run's device, checked to map a batch of two inputs
    to logits over the data's classes with a gradient for every parameter (the check draws from
    its own generator and leaves the global random state as it was)."""
    model = copy.deepcopy(model).to(device=device, dtype=dtype)
    try:
        stacked_forward(model)  # refuses BatchNorm running statistics first
    except ValueError as err:
        raise ConfigError("model", str(err)) from None
    probe = torch.randn(2, *data.input_shape, generator=torch.Generator().manual_seed(0))
    x = probe.to(device=device, dtype=dtype)
    name = type(model).__name__
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        try:
            logits = model(x)
            shape = tuple(logits.shape)
            if shape == (2, data.num_classes):
                grads = torch.autograd.grad(logits.float().square().sum(),
                                            list(model.parameters()), allow_unused=True)
        except Exception as err:  # any failure of the user's forward is a one-line config error
            raise ConfigError("model", f"{name} failed on a batch of shape {list(x.shape)}: "
                              f"{type(err).__name__}: {err}") from None
    if shape != (2, data.num_classes):
        raise ConfigError("model", f"{name} maps a batch of shape {list(x.shape)} to "
                          f"{list(shape)}; expected [2, {data.num_classes}] logits")
    unused = [k for (k, _), g in zip(model.named_parameters(), grads) if g is None]
    if unused:
        raise ConfigError("model", f"parameter {unused[0]} of {name} is not used by forward "
                          "(it would get no gradient): remove it or register it as a buffer")
    return model
