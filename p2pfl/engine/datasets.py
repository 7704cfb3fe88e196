"""The datasets that configs name, read from files once per process: the runs of a study or
a comparison (stacked or not) share one copy while the files are unchanged."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from p2pfl.config import Config, ConfigError
from p2pfl.core.memory import check_fits
from p2pfl.core.seeding import stream_seed
from p2pfl.data import (
    SYNTHETIC_SHAPE,
    Dataset,
    DatasetNotFoundError,
    find_dataset_dir,
    load_dataset,
)


def _file_stamp(directory: Path) -> tuple:
    """(name, size, mtime) of every file in `directory`: a changed file is a new dataset."""
    return tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns)
                        for f in directory.iterdir() if f.is_file()))


_LOADED: dict[tuple, Dataset] = {}  # the last dataset read from files (one entry): the runs of a
# study or comparison in one process read it once


def named_dataset(cfg: Config, dtype: torch.dtype) -> Dataset:
    """The dataset `cfg.data` names, loaded (sizes and files checked first).

    A dataset read from files is kept for the next run that reads the same unchanged files.

    Parameters
    ----------
    cfg : the config.
    dtype : the run's dtype (for the size check of synthetic data).

    Returns
    -------
    Dataset.

    Raises
    ------
    ConfigError
        naming data.name for files not found, data.root for a directory that cannot be searched
        or a corrupt file, data.synthetic_train for synthetic data that does not fit in memory.
    """
    d = cfg.data
    root = d.root or None
    if d.name != "synthetic":
        try:
            directory = Path(find_dataset_dir(d.name, root))
            key = (d.name, str(directory.resolve()), _file_stamp(directory))
        except DatasetNotFoundError as err:
            raise ConfigError("data.name", str(err)) from None
        except OSError as err:
            raise ConfigError("data.root", f"cannot search {d.root[:80]}: {err.strerror}") from None
        if key in _LOADED:
            return _LOADED[key]
    else:
        floats = (d.synthetic_train + d.synthetic_test) * math.prod(SYNTHETIC_SHAPE)
        per_float = 4 + (0 if dtype == torch.float32 else dtype.itemsize)  # made, then cast
        check_fits("data.synthetic_train", f"synthetic data of {d.synthetic_train} + "
                   f"{d.synthetic_test} samples", floats * per_float, torch.device("cpu"))
    try:
        dataset = load_dataset(d.name, root, seed=stream_seed(cfg.seed, "partition"),
                               synthetic_train=d.synthetic_train, synthetic_test=d.synthetic_test)
    except (ValueError, OSError) as err:  # a corrupt or truncated file names itself
        raise ConfigError("data.root", str(err)) from None
    if d.name != "synthetic":
        _LOADED.clear()
        _LOADED[key] = dataset
    return dataset
