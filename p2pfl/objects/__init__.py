"""A run's parts given as Python objects (`p2pfl.run(cfg, out, topology=..., model=...,
data=..., partition=..., algorithm=..., callbacks=[...])`).

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
partition of one's own (one index list per node, any lengths, or a partitioner function
(labels, num_nodes, rng) -> lists) are recorded in data.json by their shapes and fingerprints; a
resume needs them passed again, unchanged. Every run's data.json also records the partition it
trained on (sizes, label histograms, a fingerprint that a resume must match).

An underlay (a networkx graph with `capacity_gbps` and `latency_s` on its links, the physical
network of the flow model) is recorded in underlay.json with every link: config.json says
`network.underlay = "object"`, and a resume rebuilds it (a graph passed again must be the same).

A compressor object (p2pfl.core.compression.Compressor, for choco) is recorded in
compressor.json by its class, source and plain attributes; a resume needs it passed again.

An algorithm class of one's own (registered, or passed) is recorded in algorithm.json and round
callbacks in callbacks.json, by class path and a fingerprint of their source (and a callback's
plain attributes); a resume needs them passed again (or, for a registered algorithm, imported).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import networkx as nx
from torch import nn

import topologies as T
from p2pfl.callbacks import Callback
from p2pfl.config import Config
from p2pfl.data import Dataset
from p2pfl.objects.code import (
    ALGORITHM_RECORD,
    CALLBACKS_RECORD,
    COMPRESSOR_RECORD,
    resolve_algorithm,
    resolve_callbacks,
    resolve_compressor,
)
from p2pfl.objects.data import (
    DATA_RECORD,
    check_partition_record,
    describe_partition,
    resolve_data,
)
from p2pfl.objects.model import MODEL_RECORD, resolve_model
from p2pfl.objects.topology import RECORD, resolve_topology
from p2pfl.objects.underlay import UNDERLAY_RECORD, resolve_underlay

__all__ = ["DATA_RECORD", "Parts", "check_partition_record", "describe_partition", "resolve"]


@dataclasses.dataclass(frozen=True)
class Parts:
    """What the engine runs instead of the config's names, and the records that say so."""

    schedule: T.Schedule | None = None
    model: nn.Module | None = None
    dataset: Dataset | None = None
    partition: object | None = None  # index lists (one per node, checked) or a partitioner
    callbacks: tuple[Callback, ...] = ()
    compressor: object | None = None  # p2pfl.core.compression.Compressor
    underlay: nx.Graph | None = None  # the flow network's physical links
    records: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # file -> record


def resolve(cfg: Config, out: Path, resume: bool, topology: object | None = None,
            model: object | None = None, data: object | None = None,
            partition: object | None = None, algorithm: type | None = None,
            callbacks: Sequence[Any] | None = None, compressor: object | None = None,
            underlay: object | None = None) -> tuple[Config, Parts]:
    """The config to record and run, and the parts given as objects.

    On resume, each part is checked against `out`'s records.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    topology, model, data, partition, algorithm, callbacks, compressor, underlay : the parts
        given as Python objects, None where the config names them.

    Returns
    -------
    tuple (config as recorded, Parts with the objects and the records to write).

    Raises
    ------
    ConfigError
        naming the part that is malformed or differs from the one the run had.
    """
    cfg, schedule, topology_record = resolve_topology(cfg, out, resume, topology)
    cfg, module, model_record = resolve_model(cfg, out, resume, model)
    cfg, dataset, rows, data_record = resolve_data(cfg, out, resume, data, partition)
    cfg, algorithm_record = resolve_algorithm(cfg, out, resume, algorithm)
    hooks, callbacks_record = resolve_callbacks(out, resume, callbacks)
    cfg, compressor, compressor_record = resolve_compressor(cfg, out, resume, compressor)
    cfg, physical, underlay_record = resolve_underlay(cfg, out, resume, underlay)
    records = {name: r for name, r in ((RECORD, topology_record), (MODEL_RECORD, model_record),
                                       (DATA_RECORD, data_record),
                                       (ALGORITHM_RECORD, algorithm_record),
                                       (CALLBACKS_RECORD, callbacks_record),
                                       (COMPRESSOR_RECORD, compressor_record),
                                       (UNDERLAY_RECORD, underlay_record)) if r is not None}
    return cfg, Parts(schedule, module, dataset, rows, tuple(hooks), compressor, physical,
                      records)
