"""A run's topology and model given as Python objects (`p2pfl.run(cfg, out, topology=...,
model=...)`).

The object (a networkx graph, a sequence of graphs, a mixing matrix, a callable t -> graph or a
`topologies.Schedule`) becomes the schedule the engine runs. config.json then says
`topology.name = "object"`, and topology.json records what the object was: its class, size,
period, a fingerprint of its first graphs and, when it is periodic, every graph of its period as
an edge list with weights. A resume rebuilds a periodic topology from that record, or checks a
passed object against the fingerprint; it never silently continues on another graph.

A model (any `torch.nn.Module` without BatchNorm running statistics) is recorded in model.json:
its class, parameter shapes and a fingerprint of its initial state. A run directory never imports
code, so a resume needs the model passed again, with the same class and initial parameters.

Data (a `p2pfl.data.Dataset`, or tensors (x_train, y_train, x_test, y_test)) and, optionally, a
partition of one's own (one index list per node, all of one length) are recorded in data.json by
their shapes and fingerprints; a resume needs them passed again, unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import networkx as nx
import torch
from torch import nn

import topologies as T
from p2pfl.config import OBJECT, Config, ConfigError, DataConfig, ModelConfig, TopologyConfig
from p2pfl.data import Dataset

RECORD = "topology.json"
MODEL_RECORD = "model.json"
DATA_RECORD = "data.json"
FINGERPRINT_ROUNDS = 16  # graphs hashed for an aperiodic schedule (and a period above MAX_PERIOD)
MAX_PERIOD = 1000  # longest period whose graphs are stored for a rebuild
_PER_ROUND = ("link_drop", "node_drop")  # topology fields that still apply to an object


def edge_list(G: nx.Graph) -> list[list[Any]]:
    """[[u, v, weight or None], ...] sorted: an undirected edge once, as u < v."""
    rows = []
    for u, v, w in G.edges(data="weight"):
        if not G.is_directed() and u > v:
            u, v = v, u
        rows.append([int(u), int(v), None if w is None else float(w)])
    return sorted(rows, key=lambda r: (r[0], r[1]))


def describe(schedule: T.Schedule) -> dict[str, Any]:
    """The record of `schedule`: class, size, period, fingerprint, and its graphs if periodic.
    Refuses a schedule that gives two different graphs for round 0 (a resume could not
    reproduce it)."""
    period = schedule.period
    stored = period is not None and period <= MAX_PERIOD
    rounds = period if stored else FINGERPRINT_ROUNDS
    graphs = [edge_list(schedule.at(t)) for t in range(rounds)]
    if edge_list(schedule.at(0)) != graphs[0]:
        raise ConfigError("topology", "the topology object gave two different graphs for round 0:"
                          " make round t's graph a function of t alone (seed its randomness "
                          "with t)")
    blob = json.dumps([schedule.n, schedule.directed, graphs]).encode()
    cls = type(schedule)
    record: dict[str, Any] = {
        "class": f"{cls.__module__}.{cls.__qualname__}", "n": schedule.n,
        "directed": schedule.directed, "period": period, "rounds_fingerprinted": rounds,
        "fingerprint": hashlib.sha256(blob).hexdigest()}
    if stored:
        record["graphs"] = graphs
    return record


def rebuild(record: dict[str, Any]) -> T.Schedule:
    """The periodic schedule stored in `record` (its "graphs")."""
    graphs = []
    for edges in record["graphs"]:
        G = nx.DiGraph() if record["directed"] else nx.Graph()
        G.add_nodes_from(range(record["n"]))
        for u, v, w in edges:
            G.add_edge(u, v, **({} if w is None else {"weight": w}))
        graphs.append(G)
    return T.cycle(graphs)


def _as_object_config(cfg: Config) -> Config:
    """`cfg` with topology.name = "object"; refuses topology settings an object would ignore."""
    from algorithms import ALGORITHMS

    default = TopologyConfig()
    algorithm = ALGORITHMS.get(cfg.algorithm.name)
    implied = ("", "random", *([] if algorithm is None else
                               [algorithm.implied(cfg).get("topology.selection", "random")]))
    for field in dataclasses.fields(TopologyConfig):
        value = getattr(cfg.topology, field.name)
        ignored = field.name not in ("name", *_PER_ROUND) and value != getattr(default, field.name)
        if ignored and not (field.name == "selection" and value in implied):
            raise ConfigError(f"topology.{field.name}", f"is set ({value!r}) but the topology is a "
                              "Python object, which it does not shape; leave it out")
    kept = {k: getattr(cfg.topology, k) for k in _PER_ROUND}
    topology = TopologyConfig(name=OBJECT, selection="random", **kept)
    return dataclasses.replace(cfg, topology=topology)


def _read(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError("resume", f"{path} is not valid JSON: {err}") from None


def resolve_topology(cfg: Config, out: Path, resume: bool,
                     topology: object | None) -> tuple[Config, T.Schedule | None, dict | None]:
    """(config as recorded, schedule to run or None for a named topology, record to write)."""
    recorded = _read(out / RECORD) if resume else None
    if topology is None:
        if cfg.topology.name != OBJECT:
            return cfg, None, None
        if recorded is not None and "graphs" in recorded:
            return cfg, rebuild(recorded), recorded
        if recorded is None:
            raise ConfigError("topology.name", f"{OBJECT!r} means a topology passed to "
                              "p2pfl.run(cfg, out, topology=...); none was passed")
        raise ConfigError("topology", f"{out} ran on a {recorded['class']} object that "
                          f"{RECORD} cannot rebuild (aperiodic): pass it again, "
                          "p2pfl.run(cfg, out, topology=..., resume=True)")
    try:
        schedule = T.as_schedule(topology)
    except (TypeError, ValueError) as err:  # ParameterError is a ValueError
        raise ConfigError("topology", str(err)) from None
    if schedule.n != cfg.data.num_nodes:
        raise ConfigError("topology", f"the topology has {schedule.n} nodes, data.num_nodes is "
                          f"{cfg.data.num_nodes}")
    cfg = _as_object_config(cfg)
    try:
        record = describe(schedule)
    except ValueError as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError("topology", str(err)) from None
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("topology", f"the topology object differs from the one {out} ran on "
                          f"({recorded['class']}, graphs of rounds 0-"
                          f"{recorded['rounds_fingerprinted'] - 1} differ): pass the same one")
    return cfg, schedule, record


def describe_model(model: nn.Module) -> dict[str, Any]:
    """Class, parameter shapes and SHA-256 of the initial state (parameters and buffers)."""
    digest = hashlib.sha256()
    shapes = {}
    for name, value in model.state_dict().items():
        shapes[name] = list(value.shape)
        digest.update(name.encode())
        digest.update(value.detach().to("cpu", torch.float64).contiguous().numpy().tobytes())
    cls = type(model)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "shapes": shapes,
            "num_params": sum(p.numel() for p in model.parameters()),
            "fingerprint": digest.hexdigest()}


def resolve_model(cfg: Config, out: Path, resume: bool,
                  model: object | None) -> tuple[Config, nn.Module | None, dict | None]:
    """(config as recorded, model to run or None for a named one, record to write)."""
    recorded = _read(out / MODEL_RECORD) if resume else None
    if model is None:
        if cfg.model.name != OBJECT:
            return cfg, None, None
        if recorded is None:
            raise ConfigError("model.name", f"{OBJECT!r} means a model passed to "
                              "p2pfl.run(cfg, out, model=...); none was passed")
        raise ConfigError("model", f"{out} ran a {recorded['class']} given as a Python object and"
                          " a run directory never imports code: pass it again, "
                          "p2pfl.run(cfg, out, model=..., resume=True)")
    if not isinstance(model, nn.Module):
        raise ConfigError("model", f"expected a torch.nn.Module, got {type(model).__name__}")
    record = describe_model(model)
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("model", f"the model differs from the one {out} started from "
                          f"({recorded['class']}; class, shapes or initial parameters): pass "
                          "the same one")
    return dataclasses.replace(cfg, model=ModelConfig(name=OBJECT)), model, record


def _tensor_digest(digest: Any, value: torch.Tensor) -> None:
    digest.update(str((tuple(value.shape), str(value.dtype))).encode())
    digest.update(value.detach().to("cpu").contiguous().numpy().tobytes())


def as_dataset(data: object) -> Dataset:
    """A Dataset from a Dataset or (x_train, y_train, x_test, y_test) (tensors or arrays):
    inputs as float32 [n, *input_shape], labels int64 [n] in 0..num_classes - 1."""
    if isinstance(data, Dataset):
        return data
    if not (isinstance(data, tuple | list) and len(data) == 4):
        raise ConfigError("data", "expected a p2pfl.data.Dataset or (x_train, y_train, x_test, "
                          f"y_test), got {type(data).__name__}")
    try:
        x_train, y_train, x_test, y_test = (torch.as_tensor(v) for v in data)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError("data", f"cannot make tensors of the data: {err}") from None
    for name, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if y.ndim != 1 or x.shape[:1] != y.shape or y.is_floating_point() or y.numel() == 0:
            raise ConfigError("data", f"{name}: expected inputs [n, ...] and integer labels [n], "
                              f"got {list(x.shape)} and {list(y.shape)} ({y.dtype})")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise ConfigError("data", f"train inputs are {list(x_train.shape[1:])} per sample, test "
                          f"inputs {list(x_test.shape[1:])}")
    low = int(min(y_train.min(), y_test.min()))
    if low < 0:
        raise ConfigError("data", f"labels must be 0..num_classes - 1, got {low}")
    return Dataset("object", x_train.float(), y_train.long(), x_test.float(), y_test.long(),
                   int(max(y_train.max(), y_test.max())) + 1, tuple(x_train.shape[1:]))


def as_partition(partition: object, num_nodes: int, num_train: int | None) -> torch.Tensor:
    """int64 [num_nodes, m]: one index list per node, all of one length, no index twice, every
    index below `num_train` (unchecked while None: the named dataset is not loaded yet)."""
    try:
        rows = (torch.stack([torch.as_tensor(r) for r in partition])
                if isinstance(partition, list | tuple) else torch.as_tensor(partition))
    except (TypeError, ValueError, RuntimeError):
        raise ConfigError("partition", "expected one index list per node, all of one length "
                          "(unequal local datasets are not supported)") from None
    if rows.ndim != 2 or rows.is_floating_point():
        raise ConfigError("partition", f"expected integer indices [num_nodes, m], got shape "
                          f"{list(rows.shape)} ({rows.dtype})")
    if rows.shape[0] != num_nodes or rows.shape[1] == 0:
        raise ConfigError("partition", f"has {rows.shape[0]} lists of {rows.shape[1]}; "
                          f"data.num_nodes is {num_nodes}")
    if rows.min() < 0 or (num_train is not None and rows.max() >= num_train):
        raise ConfigError("partition", "indices must be in 0..n_train - 1, got "
                          f"{int(rows.min())}..{int(rows.max())}")
    if rows.unique().numel() != rows.numel():
        raise ConfigError("partition", "an index is given to more than one node (or twice)")
    return rows.long()


def resolve_data(cfg: Config, out: Path, resume: bool, data: object | None,
                 partition: object | None) -> tuple[Config, Dataset | None, torch.Tensor | None,
                                                    dict | None]:
    """(config as recorded, dataset or None, partition or None, record to write)."""
    recorded = _read(out / DATA_RECORD) if resume else None
    if data is None and partition is None:
        if OBJECT not in (cfg.data.name, cfg.data.partition):
            return cfg, None, None, None
        what = "data" if cfg.data.name == OBJECT else "partition"
        if recorded is None:
            raise ConfigError(f"data.{'name' if what == 'data' else 'partition'}", f"{OBJECT!r} "
                              f"means {what} passed to p2pfl.run(cfg, out, {what}=...); none "
                              "was passed")
        raise ConfigError("data", f"{out} ran on {what} given as Python objects: pass them "
                          f"again, p2pfl.run(cfg, out, {what}=..., resume=True)")
    dataset = as_dataset(data) if data is not None else None
    d, default = cfg.data, DataConfig()
    changes: dict[str, Any] = {}
    if dataset is not None:
        for key in ("root", "synthetic_train", "synthetic_test"):
            if getattr(d, key) != getattr(default, key):
                raise ConfigError(f"data.{key}", f"is set ({getattr(d, key)!r}) but the data is "
                                  "a Python object; leave it out")
        changes["name"] = OBJECT
    digest = hashlib.sha256()
    record: dict[str, Any] = {}
    if dataset is not None:
        for value in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test):
            _tensor_digest(digest, value)
        record |= {"num_train": len(dataset.y_train), "num_test": len(dataset.y_test),
                   "input_shape": list(dataset.input_shape), "num_classes": dataset.num_classes}
    rows = None
    if partition is not None:
        for key in ("partition", "alpha", "classes_per_node"):
            if getattr(d, key) != getattr(default, key):
                raise ConfigError(f"data.{key}", f"is set ({getattr(d, key)!r}) but the "
                                  "partition is a Python object; leave it out")
        rows = as_partition(partition, d.num_nodes,
                            len(dataset.y_train) if dataset is not None else None)
        _tensor_digest(digest, rows)
        changes["partition"] = OBJECT
        record["per_node"] = rows.shape[1]
    record["fingerprint"] = digest.hexdigest()
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("data", f"the data or partition differ from those {out} ran on: pass "
                          "the same ones")
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(d, **changes))
    return cfg, dataset, rows, record


@dataclasses.dataclass(frozen=True)
class Parts:
    """What the engine runs instead of the config's names, and the records that say so."""

    schedule: T.Schedule | None = None
    model: nn.Module | None = None
    dataset: Dataset | None = None
    partition: torch.Tensor | None = None  # int64 [num_nodes, m]
    records: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def resolve(cfg: Config, out: Path, resume: bool, topology: object | None = None,
            model: object | None = None, data: object | None = None,
            partition: object | None = None) -> tuple[Config, Parts]:
    """The config to record and run, and the parts given as objects (checked against `out`'s
    records on resume)."""
    cfg, schedule, topology_record = resolve_topology(cfg, out, resume, topology)
    cfg, module, model_record = resolve_model(cfg, out, resume, model)
    cfg, dataset, rows, data_record = resolve_data(cfg, out, resume, data, partition)
    records = {name: r for name, r in ((RECORD, topology_record), (MODEL_RECORD, model_record),
                                       (DATA_RECORD, data_record)) if r is not None}
    return cfg, Parts(schedule, module, dataset, rows, records)
