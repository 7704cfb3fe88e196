"""Data and a partition given as objects, checked, and their record (data.json)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import torch

from p2pfl.config import OBJECT, Config, ConfigError, DataConfig
from p2pfl.data import Dataset
from p2pfl.objects.records import read_record

DATA_RECORD = "data.json"


def tensor_digest(digest: Any, value: torch.Tensor) -> None:
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
    recorded = read_record(out / DATA_RECORD) if resume else None
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
            tensor_digest(digest, value)
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
        tensor_digest(digest, rows)
        changes["partition"] = OBJECT
        record["per_node"] = rows.shape[1]
    record["fingerprint"] = digest.hexdigest()
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("data", f"the data or partition differ from those {out} ran on: pass "
                          "the same ones")
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(d, **changes))
    return cfg, dataset, rows, record
