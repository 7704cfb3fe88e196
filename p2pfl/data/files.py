"""Datasets on disk: where they are searched ($P2PFL_DATA, Debian's dataset-fashion-mnist) and how
their files are read: (Fashion-)MNIST IDX files, CIFAR-10/100 pickles (unpickled without running
code).
"""

from __future__ import annotations

import gzip
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import numpy as np

DATASETS = ("fashion_mnist", "mnist", "cifar10", "cifar100", "synthetic")


DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


ENV_VAR = "P2PFL_DATA"


_IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)


CIFAR100_FILES = ("train", "test")


_REQUIRED_FILES = {
    "fashion_mnist": _IDX_FILES,
    "mnist": _IDX_FILES,
    "cifar10": CIFAR10_FILES,
    "cifar100": CIFAR100_FILES,
}


_SUBDIRS = {
    "fashion_mnist": ("fashion-mnist", "fashion_mnist", "FashionMNIST/raw"),
    "mnist": ("mnist", "MNIST/raw"),
    "cifar10": ("cifar-10-batches-py",),
    "cifar100": ("cifar-100-python",),
}


NUM_CLASSES = {"fashion_mnist": 10, "mnist": 10, "cifar10": 10, "cifar100": 100, "synthetic": 10}


_HOW_TO_GET = {
    "fashion_mnist": "run 'apt-get install dataset-fashion-mnist' (installs into "
    f"{DEBIAN_FASHION_MNIST}) or put the four IDX files ({', '.join(_IDX_FILES)}, plain or .gz) "
    f"in a directory and set data.root or ${ENV_VAR} to it",
    "mnist": f"put the four MNIST IDX files ({', '.join(_IDX_FILES)}, plain or .gz) in a directory "
    f"and set data.root or ${ENV_VAR} to it",
    "cifar10": "extract cifar-10-python.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) "
    f"and set data.root or ${ENV_VAR} to the directory holding cifar-10-batches-py",
    "cifar100": "extract cifar-100-python.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) "
    f"and set data.root or ${ENV_VAR} to the directory holding cifar-100-python",
}


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are in none of the searched directories.

    `str(err)` is one line naming the dataset, every directory searched and how to get the data.
    """

    def __init__(self, name: str, searched: list[Path]) -> None:
        where = ", ".join(str(d) for d in searched) or "(no directory: no root, no $P2PFL_DATA)"
        super().__init__(
            f"dataset '{name}' not found; searched: {where}; to get it: {_HOW_TO_GET[name]}"
        )
        self.name = name
        self.searched = searched


def check_name(name: str) -> None:
    """Check a dataset name.

    Parameters
    ----------
    name : the name.

    Raises
    ------
    ValueError
        unless it is one of DATASETS.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(DATASETS)}")


def _idx_path(directory: Path, stem: str) -> Path | None:
    """The plain or gzipped IDX file `stem` in `directory`, plain preferred; None if absent."""
    for path in (directory / stem, directory / f"{stem}.gz"):
        if path.is_file():
            return path
    return None


def _has_files(name: str, directory: Path) -> bool:
    if name in ("fashion_mnist", "mnist"):
        return all(_idx_path(directory, stem) is not None for stem in _IDX_FILES)
    return all((directory / f).is_file() for f in _REQUIRED_FILES[name])


def _candidate_dirs(name: str, root: str | os.PathLike | None) -> Iterator[Path]:
    """Directories to search, in order: root, $P2PFL_DATA, the Debian path; each with subdirs."""
    bases = [root, os.environ.get(ENV_VAR)]
    if name == "fashion_mnist":
        bases.append(DEBIAN_FASHION_MNIST)
    for base in bases:
        if base is None or str(base) == "":
            continue
        base = Path(base).expanduser()
        yield base
        for sub in _SUBDIRS[name]:
            yield base / sub


def find_dataset_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """Directory holding the files of dataset `name` (not for 'synthetic').

    Searches `root` (if non-empty), then $P2PFL_DATA, then (fashion_mnist only) the Debian path;
    in each, the directory itself and the usual subdirectories.

    Parameters
    ----------
    name : one of DATASETS but 'synthetic'.
    root : a directory to search first, or None.

    Returns
    -------
    Path.

    Raises
    ------
    DatasetNotFoundError
        listing the directories searched.
    ValueError
        for an unknown name or 'synthetic'.
    """
    check_name(name)
    if name == "synthetic":
        raise ValueError("the 'synthetic' dataset is generated and has no directory")
    searched: list[Path] = []
    for directory in _candidate_dirs(name, root):
        if directory in searched:
            continue
        searched.append(directory)
        if _has_files(name, directory):
            return directory
    raise DatasetNotFoundError(name, searched)


def _read_bytes(path: Path) -> bytes:
    """File contents, gunzipped when the name ends in .gz; ValueError naming `path` if corrupt."""
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: corrupt gzip file ({err})") from err


def read_idx(path: Path, ndim: int) -> np.ndarray:
    """Parse an IDX file of unsigned bytes with `ndim` dimensions.

    Header: two zero bytes, type code 0x08 (uint8), number of dims, then one big-endian uint32 per
    dim.

    Parameters
    ----------
    path : the file (.gz: gunzipped).
    ndim : dimensions expected.

    Returns
    -------
    uint8 array of the header's dims.

    Raises
    ------
    ValueError
        naming `path` if the magic, dims or size do not match, or the gzip is corrupt.
    """
    data = _read_bytes(path)
    header = 4 + 4 * ndim
    if len(data) < header or data[:4] != bytes((0, 0, 0x08, ndim)):
        raise ValueError(
            f"{path}: not an IDX uint8 file with {ndim} dims (magic {data[:4].hex() or 'missing'}, "
            f"expected {bytes((0, 0, 0x08, ndim)).hex()})"
        )
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(dims))
    if len(data) != expected:
        raise ValueError(f"{path}: IDX dims {dims} need {expected} bytes, file has {len(data)}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims).copy()


def _check_split(
    images: np.ndarray, labels: np.ndarray, num_classes: int, where: Path
) -> None:
    if len(images) != len(labels):
        raise ValueError(f"{where}: {len(images)} images but {len(labels)} labels")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"{where}: labels outside [0, {num_classes})")


def load_idx_split(directory: Path, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one IDX split.

    Parameters
    ----------
    directory : the dataset's directory (from `find_dataset_dir`).
    prefix : 'train' or 't10k'.

    Returns
    -------
    tuple (uint8 images [n, 1, rows, cols], int64 labels [n]).

    Raises
    ------
    ValueError
        for a malformed file, a label count that is not the image count, or labels outside
        [0, 10).
    """
    image_path = _idx_path(directory, f"{prefix}-images-idx3-ubyte")
    label_path = _idx_path(directory, f"{prefix}-labels-idx1-ubyte")
    assert image_path is not None and label_path is not None  # checked by find_dataset_dir
    images = read_idx(image_path, 3)
    labels = read_idx(label_path, 1).astype(np.int64)
    _check_split(images, labels, 10, image_path)
    return images[:, None], labels


# What a CIFAR batch pickle may construct: a dict of bytes, lists and numpy arrays. Anything else
# (a class or function the pickle names) is refused: loading a file never runs its code.
_CIFAR_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray",
                  "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype"),
                  ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}


class _CifarUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a CIFAR batch "
                                         "holds only a dict of arrays and lists")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    with path.open("rb") as f:
        try:
            return _CifarUnpickler(f, encoding="bytes").load()
        except (pickle.UnpicklingError, EOFError, ValueError) as err:
            raise ValueError(f"{path}: corrupt CIFAR pickle ({err})") from err


def load_cifar_batches(
    directory: Path, files: tuple[str, ...], label_key: bytes, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels concatenated over CIFAR pickle `files`.

    Parameters
    ----------
    directory : the dataset's directory.
    files : pickle files in it.
    label_key : the labels' key (b"labels", b"fine_labels").
    num_classes : classes, to check the labels.

    Returns
    -------
    tuple (uint8 images [n, 3, 32, 32], int64 labels [n]).

    Raises
    ------
    ValueError
        naming the file for a missing key, data not [n, 3072], or bad labels.
    """
    images, labels = [], []
    for file in files:
        path = directory / file
        batch = _unpickle(path)
        try:
            data = np.asarray(batch[b"data"], dtype=np.uint8)
            y = np.asarray(batch[label_key], dtype=np.int64)
        except KeyError as err:
            raise ValueError(f"{path}: missing key {err} in CIFAR pickle") from err
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(f"{path}: data has shape {data.shape}, expected [n, 3072]")
        _check_split(data, y, num_classes, path)
        images.append(data.reshape(-1, 3, 32, 32))
        labels.append(y)
    return np.concatenate(images), np.concatenate(labels)
