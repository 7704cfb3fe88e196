"""Datasets (loading, normalisation) and their partitioning among nodes."""

from p2pfl.data.files import DATASETS, DEBIAN_FASHION_MNIST, DatasetNotFoundError, find_dataset_dir
from p2pfl.data.loaders import SYNTHETIC_SHAPE, Dataset, load_dataset
from p2pfl.data.partition import (
    PARTITION_PARAMS,
    PARTITIONS,
    Partitioner,
    by_group,
    check_partition,
    dirichlet_prior,
    iid,
    label_dirichlet,
    partition,
    pathological,
    quantity_dirichlet,
    quantity_lognormal,
    shards,
    subsample,
)

__all__ = [
    "DATASETS",
    "DEBIAN_FASHION_MNIST",
    "PARTITIONS",
    "PARTITION_PARAMS",
    "SYNTHETIC_SHAPE",
    "Dataset",
    "DatasetNotFoundError",
    "Partitioner",
    "by_group",
    "check_partition",
    "dirichlet_prior",
    "find_dataset_dir",
    "iid",
    "label_dirichlet",
    "load_dataset",
    "partition",
    "pathological",
    "quantity_dirichlet",
    "quantity_lognormal",
    "shards",
    "subsample",
]
