"""Files a named part of a run reads (a topology's edge or adjacency file, a dataset on disk, a
shipped underlay), recorded by content (inputs.json) so that a resume cannot silently continue on
other ones."""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from pathlib import Path
from typing import Any

from p2pfl.config import OBJECT, Config, ConfigError
from p2pfl.core.federated import FederatedData
from p2pfl.objects.data import tensor_digest
from p2pfl.objects.records import read_record
from p2pfl.report.results import file_sha256
from topologies.underlays import FOLDER as UNDERLAY_FOLDER

INPUTS_RECORD = "inputs.json"
FILE_TOPOLOGIES = ("from_edges", "from_adjacency")
# digests of datasets already hashed in this process (the cells of a study share one), by the
# id of the training inputs tensor: (a weak reference to it, the other three tensors, the four's
# in-place versions, sha256); an entry leaves with its tensor
_DIGESTS: dict[int, tuple] = {}


def with_absolute_paths(cfg: Config) -> Config:
    """`cfg` with a relative topology.path and data.root made absolute.

    Against the working directory, so that the run's config.json names the same files from
    anywhere.

    Parameters
    ----------
    cfg : the config.

    Returns
    -------
    Config.
    """
    topology, data = cfg.topology, cfg.data
    if cfg.topology.name in FILE_TOPOLOGIES and topology.path:
        topology = dataclasses.replace(topology, path=str(Path(topology.path).absolute()))
    if data.root:
        data = dataclasses.replace(data, root=str(Path(data.root).absolute()))
    return dataclasses.replace(cfg, topology=topology, data=data)


def describe_inputs(cfg: Config, data: FederatedData) -> dict[str, Any]:
    """The record of the parts `cfg` reads from disk.

    A file topology, and a named dataset (its tensors as loaded; synthetic data is made from the
    seed, and data given as an object is in data.json).

    Parameters
    ----------
    cfg : the run's config.
    data : the run's federated data.

    Returns
    -------
    dict, {"topology.path": {path, sha256}, "data": {name, sha256}, "network.underlay": {path,
    sha256}} (each where it applies).
    """
    record: dict[str, Any] = {}
    if cfg.topology.name in FILE_TOPOLOGIES:
        path = Path(cfg.topology.path)
        record["topology.path"] = {"path": str(path), "sha256": file_sha256(path)}
    if cfg.data.name not in ("synthetic", OBJECT):
        record["data"] = {"name": cfg.data.name, "sha256": data_sha256(data)}
    named = cfg.network.underlay not in ("", OBJECT)  # an object has its own underlay.json
    if cfg.network.enabled and named:
        path = UNDERLAY_FOLDER / f"{cfg.network.underlay}.gml"
        record["network.underlay"] = {"path": str(path), "sha256": file_sha256(path)}
    return record


def data_sha256(data: FederatedData) -> str:
    """SHA-256 of the training and test tensors.

    Taken once per set of tensors and in-place version in this process.

    Parameters
    ----------
    data : the run's federated data.

    Returns
    -------
    str, hex digest.
    """
    tensors = (data.x_train, data.y_train, data.x_test, data.y_test)
    versions = tuple(t._version for t in tensors)
    key = id(data.x_train)
    held = _DIGESTS.get(key)
    if (held is not None and held[0]() is data.x_train and held[2] == versions
            and all(a is b for a, b in zip(held[1], tensors[1:]))):
        return held[3]
    digest = hashlib.sha256()
    for value in tensors:
        tensor_digest(digest, value)
    gone = weakref.ref(data.x_train, lambda _: _DIGESTS.pop(key, None))
    _DIGESTS[key] = (gone, tensors[1:], versions, digest.hexdigest())
    return digest.hexdigest()


def check_inputs(out: Path, resume: bool, record: dict[str, Any]) -> None:
    """Refuse a resume whose input files differ from those recorded in `out`.

    Parameters
    ----------
    out : the run directory.
    resume : whether the run resumes (else nothing is checked).
    record : this run's `describe_inputs`.

    Raises
    ------
    ConfigError
        naming the input (topology.path, data) whose SHA-256 differs.
    """
    recorded = (read_record(out / INPUTS_RECORD) if resume else None) or {}
    for key, now in record.items():
        then = recorded.get(key)
        if then is None or then["sha256"] == now["sha256"]:
            continue
        what = f"the file {now['path']}" if "path" in now else f"the {now['name']} data as loaded"
        raise ConfigError(key, f"{what} differs from what {out} ran on (SHA-256 "
                          f"{then['sha256'][:12]}..., now {now['sha256'][:12]}...): restore it, or "
                          "start a new run")
