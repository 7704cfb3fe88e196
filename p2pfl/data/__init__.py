"""Datasets (loading, normalisation) and their partitioning among nodes."""

from p2pfl.data.loaders import (
    DATASETS,
    DEBIAN_FASHION_MNIST,
    SYNTHETIC_SHAPE,
    Dataset,
    DatasetNotFoundError,
    find_dataset_dir,
    load_dataset,
)
from p2pfl.data.partition import PARTITIONS, partition

__all__ = [
    "DATASETS",
    "DEBIAN_FASHION_MNIST",
    "PARTITIONS",
    "SYNTHETIC_SHAPE",
    "Dataset",
    "DatasetNotFoundError",
    "find_dataset_dir",
    "load_dataset",
    "partition",
]
