"""Data and a partition given as objects, checked, and the record of the data a run trained on
(data.json): the partition's name and parameters, every node's size and label histogram, and a
fingerprint of the partition that a resume must match."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from p2pfl.config import OBJECT, Config, ConfigError, DataConfig
from p2pfl.core.federated import FederatedData
from p2pfl.data import PARTITION_PARAMS, PARTITIONS, Dataset, check_partition
from p2pfl.objects.records import class_path, read_record

DATA_RECORD = "data.json"


def tensor_digest(digest: Any, value: torch.Tensor) -> None:
    """Feed a tensor's shape, dtype and bytes to a hash.

    Parameters
    ----------
    digest : a hashlib object, updated.
    value : the tensor (copied to the CPU).
    """
    digest.update(str((tuple(value.shape), str(value.dtype))).encode())
    digest.update(value.detach().to("cpu").contiguous().numpy().tobytes())


def as_dataset(data: object) -> Dataset:
    """A Dataset from a Dataset or (x_train, y_train, x_test, y_test) (tensors or arrays).

    Parameters
    ----------
    data : a Dataset, or the four tensors or arrays.

    Returns
    -------
    Dataset, inputs float32 [n, *input_shape], labels int64 [n] in 0..num_classes - 1; checked
    (`check_dataset`).

    Raises
    ------
    ConfigError
        naming data for anything else, tensors that cannot be made, or what `check_dataset` and
        the inferred classes refuse.
    """
    if isinstance(data, Dataset):
        check_dataset(data)
        return data
    if not (isinstance(data, tuple | list) and len(data) == 4):
        raise ConfigError("data", "expected a p2pfl.data.Dataset or (x_train, y_train, x_test, "
                          f"y_test), got {type(data).__name__}")
    try:
        x_train, y_train, x_test, y_test = (torch.as_tensor(v) for v in data)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ConfigError("data", f"cannot make tensors of the data: {err}") from None
    _check_split(x_train, y_train, x_test, y_test)
    dataset = Dataset("object", x_train.float(), y_train.long(), x_test.float(), y_test.long(),
                      int(max(y_train.max(), y_test.max())) + 1, tuple(x_train.shape[1:]))
    check_dataset(dataset)
    _check_inferred_classes(dataset)
    return dataset


def _check_inferred_classes(data: Dataset) -> None:
    """Refuse labels whose inferred classes (0..largest label) would mislead: a test label that
    no training sample has (never trained, always wrong), or classes of which most have no
    training sample (labels that do not start at 0, or codes rather than classes)."""
    trained = torch.bincount(data.y_train, minlength=data.num_classes) > 0
    tested = torch.bincount(data.y_test, minlength=data.num_classes) > 0
    advice = ("map the labels to 0..K-1, or pass p2pfl.data.Dataset(..., num_classes=K) to "
              "train on them as they are")
    unseen = (tested & ~trained).nonzero().flatten().tolist()
    if unseen:
        raise ConfigError("data", f"test labels {_labels(unseen)} occur in no training sample "
                          f"(the training labels are {_labels(trained.nonzero().flatten())}): "
                          f"{advice}")
    empty = (~trained).nonzero().flatten().tolist()
    if 2 * len(empty) > data.num_classes:
        raise ConfigError("data", f"the labels make {data.num_classes} classes (0.."
                          f"{data.num_classes - 1}), {len(empty)} of which have no training "
                          f"sample ({_labels(empty)}): {advice}")


def _labels(labels: Any) -> str:
    """A short list of labels: runs of consecutive ones as a..b, at most 4 runs."""
    values = sorted(int(v) for v in labels)
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    shown = [f"{a}..{b}" if b > a else f"{a}" for a, b in runs[:4]]
    return ", ".join(shown) + (", ..." if len(runs) > 4 else "")


def _check_split(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
                 y_test: torch.Tensor) -> None:
    for name, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if x.is_meta or y.is_meta:
            raise ConfigError("data", f"{name}: tensors on the meta device hold no data")
        if (y.ndim != 1 or x.ndim < 2 or x.shape[:1] != y.shape or y.is_floating_point()
                or y.is_complex() or y.numel() == 0):
            raise ConfigError("data", f"{name}: expected inputs [n, ...] (at least one feature "
                              f"dimension) and integer labels [n], got {list(x.shape)} and "
                              f"{list(y.shape)} ({y.dtype})")
        if x.is_complex() or not (x.is_floating_point() or x.dtype in INTEGER_INPUTS):
            raise ConfigError("data", f"{name}: inputs must be real numbers, got {x.dtype}")


INTEGER_INPUTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def check_dataset(data: Dataset) -> None:
    """Refuse what would fail or silently mislead in a round.

    Parameters
    ----------
    data : the dataset.

    Raises
    ------
    ConfigError
        naming data and the problem: shapes that disagree, labels outside 0..num_classes - 1,
        more classes than training samples (a stray huge label), non-finite inputs.
    """
    _check_split(data.x_train, data.y_train, data.x_test, data.y_test)
    shape = tuple(data.input_shape)
    for name, x in (("train", data.x_train), ("test", data.x_test)):
        if tuple(x.shape[1:]) != shape:
            raise ConfigError("data", f"{name} inputs are {list(x.shape[1:])} per sample, but "
                              f"input_shape is {list(shape)}")
        bad = ~torch.isfinite(x.reshape(len(x), -1).float()).all(1)
        if bad.any():
            raise ConfigError("data", f"{name} inputs: {int(bad.sum())} samples hold NaN or "
                              f"infinite values (the first: sample {int(bad.nonzero()[0])})")
    low = int(min(data.y_train.min(), data.y_test.min()))
    high = int(max(data.y_train.max(), data.y_test.max()))
    if low < 0 or high >= data.num_classes:
        raise ConfigError("data", f"labels must be 0..num_classes - 1 = {data.num_classes - 1}, "
                          f"got {low}..{high}")
    if data.num_classes > len(data.y_train):
        raise ConfigError("data", f"the largest label {high} makes {data.num_classes} classes, "
                          f"more than the {len(data.y_train)} training samples: labels must be "
                          "0..num_classes - 1")


def resolve_data(cfg: Config, out: Path, resume: bool, data: object | None,
                 partition: object | None) -> tuple[Config, Dataset | None, object | None,
                                                    dict | None]:
    """The data and partition given as objects, checked and recorded.

    A partition is index lists (checked here: one per node, none empty, no sample twice) or a
    partitioner function (labels, num_nodes, rng) -> lists, called when the run is built.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    data : a Dataset or (x_train, y_train, x_test, y_test), or None.
    partition : index lists or a partitioner, or None.

    Returns
    -------
    tuple (config as recorded, dataset or None, partition or None, record to write or None).

    Raises
    ------
    ConfigError
        naming the field: "object" in the config with nothing passed, [data] settings the object
        replaces, a malformed partition, or data or partition other than the run had.
    """
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
        for key in ("partition", *PARTITION_PARAMS):
            if getattr(d, key) != getattr(default, key):
                raise ConfigError(f"data.{key}", f"is set ({getattr(d, key)!r}) but the "
                                  "partition is a Python object; leave it out")
        if callable(partition):
            rows = partition
            record["partitioner"] = class_path(partition) if isinstance(partition, type) else (
                f"{getattr(partition, '__module__', '')}.{getattr(partition, '__qualname__', '')}")
        else:
            try:
                rows = check_partition(partition, d.num_nodes,
                                       len(dataset.y_train) if dataset is not None else None,
                                       d.allow_overlap)
            except ValueError as err:
                raise ConfigError("partition", str(err)) from None
            for row in rows:
                tensor_digest(digest, torch.as_tensor(row))
        changes["partition"] = OBJECT
    record["fingerprint"] = digest.hexdigest()
    if recorded is not None and recorded.get("fingerprint", record["fingerprint"]) != record[
            "fingerprint"]:
        raise ConfigError("data", f"the data or partition differ from those {out} ran on: pass "
                          "the same ones")
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(d, **changes))
    return cfg, dataset, rows, record


def describe_partition(cfg: Config, data: FederatedData) -> dict[str, Any]:
    """The record of the partition a run trains on.

    Parameters
    ----------
    cfg : the run's config.
    data : the run's federated data.

    Returns
    -------
    dict: the partition's name and the parameters it reads, every node's number of training
    samples and label histogram, each node's local test size (when `data.local_test` > 0), and a
    SHA-256 of all of it with the index lists.
    """
    d = cfg.data
    reads = PARTITIONS[d.partition].params if d.partition in PARTITIONS else ()
    record: dict[str, Any] = {
        "partition": {"name": d.partition, **{k: getattr(d, k) for k in reads}},
        "sizes": data.sizes.tolist(),
        "label_counts": data.label_counts().tolist()}
    digest = hashlib.sha256(np.concatenate([data.sizes, *data.partition()]).tobytes())
    if data.local_test is not None:
        record["local_test"] = d.local_test
        record["local_test_sizes"] = [len(r) for r in data.local_test]
        digest.update(np.concatenate(data.local_test).tobytes())
    record["partition_sha256"] = digest.hexdigest()
    return record


def check_partition_record(out: Path, resume: bool, record: dict[str, Any]) -> None:
    """Refuse a resume whose partition differs from the one recorded in `out`.

    A run directory from before partitions were recorded is not checked.

    Parameters
    ----------
    out : the run directory.
    resume : whether the run resumes (else nothing is checked).
    record : this run's `describe_partition`.

    Raises
    ------
    ConfigError
        naming data when the SHA-256 differs.
    """
    recorded = (read_record(out / DATA_RECORD) if resume else None) or {}
    then = recorded.get("partition_sha256")
    if then is not None and then != record["partition_sha256"]:
        sizes = recorded.get("sizes", [])
        raise ConfigError("data", f"the partition differs from the one {out} ran on (sizes "
                          f"{sizes[:4]}..., now {record['sizes'][:4]}...): pass or configure "
                          "the same one, or start a new run")
