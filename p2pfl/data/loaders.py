"""Datasets in memory: the `Dataset` of float32 images normalised per channel with the statistics of
the training split (population mean and std over samples and pixels) and int64 labels, read from
files (p2pfl.data.files) or made (the synthetic problem).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from p2pfl.data.files import (
    CIFAR10_FILES,
    CIFAR100_FILES,
    NUM_CLASSES,
    check_name,
    find_dataset_dir,
    load_cifar_batches,
    load_idx_split,
)

# Synthetic problem: class prototypes in a low-dimensional latent space, mapped to 28x28 pixels.
SYNTHETIC_SHAPE = (1, 28, 28)


_SYN_LATENT_DIM = 16


_SYN_LATENT_NOISE = 1.2  # class overlap: caps accuracy at roughly 85-90 %


_SYN_PIXEL_NOISE = 0.5


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split; images float32 [n, *input_shape], labels int64 [n]."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    input_shape: tuple[int, ...]


def _uint8_channel_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-channel mean and std (float64 [C]) of uint8 images [n, C, H, W] scaled by 1/255.

    Uses a 256-bin histogram per channel, so no float copy of the data is needed.
    """
    levels = np.arange(256, dtype=np.float64) / 255.0
    means, stds = [], []
    for c in range(images.shape[1]):
        channel = torch.from_numpy(np.ascontiguousarray(images[:, c]).reshape(-1))
        counts = channel.bincount(minlength=256).numpy().astype(np.float64)
        mean = counts @ levels / counts.sum()
        means.append(mean)
        stds.append(np.sqrt(counts @ (levels - mean) ** 2 / counts.sum()))
    return np.array(means), np.array(stds)


def _normalise(x: torch.Tensor, mean: np.ndarray, std: np.ndarray) -> torch.Tensor:
    """(x - mean) / std per channel, in place; x float32 [n, C, H, W]; zero std is left as 1."""
    shape = (1, -1) + (1,) * (x.dim() - 2)
    std = np.where(std > 0, std, 1.0)
    mean_t = torch.as_tensor(mean, dtype=torch.float32).view(shape)
    std_t = torch.as_tensor(std, dtype=torch.float32).view(shape)
    return x.sub_(mean_t).div_(std_t)


def _from_uint8(
    name: str, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]
) -> Dataset:
    """Build a Dataset from uint8 image arrays [n, C, H, W]: /255, normalise with train stats."""
    mean, std = _uint8_channel_stats(train[0])

    def to_float(u8: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(u8.astype(np.float32)).div_(255.0)
        return _normalise(x, mean, std)

    return Dataset(
        name=name,
        x_train=to_float(train[0]),
        y_train=torch.from_numpy(train[1]),
        x_test=to_float(test[0]),
        y_test=torch.from_numpy(test[1]),
        num_classes=NUM_CLASSES[name],
        input_shape=tuple(train[0].shape[1:]),
    )


def make_synthetic(n_train: int, n_test: int, seed: int,
                   shape: tuple[int, ...] = SYNTHETIC_SHAPE) -> Dataset:
    """Learnable 10-class problem with images `shape` ([1, 28, 28]), deterministic in `seed`.

    Each class has a prototype z_c ~ N(0, I_16) in a 16-dim latent space; a sample of class y is
    (z_y + 1.2 * noise) @ A + 0.5 * pixel noise with one fixed random map A: [16, prod(shape)]
    (the benchmark uses shape (3, 32, 32) for CIFAR-shaped data). The latent
    noise makes classes overlap (Bayes accuracy below 100 %); the spread of the signal over all
    pixels makes it quick to learn. Labels are balanced (n % 10 classes get one extra sample).
    Uses only a torch.Generator seeded with `seed`.

    Parameters
    ----------
    n_train : training samples, at least 1.
    n_test : test samples, at least 1.
    seed : the generator's seed.
    shape : one image's shape.

    Returns
    -------
    Dataset.

    Raises
    ------
    ValueError
        when a size is below 1.
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"synthetic sizes must be >= 1, got train={n_train}, test={n_test}")
    k, d, pixels = NUM_CLASSES["synthetic"], _SYN_LATENT_DIM, int(np.prod(shape))
    gen = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(k, d, generator=gen)
    mixing = torch.randn(d, pixels, generator=gen) / d**0.5

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = (torch.arange(n) % k)[torch.randperm(n, generator=gen)]
        z = prototypes[y] + _SYN_LATENT_NOISE * torch.randn(n, d, generator=gen)
        x = z @ mixing + _SYN_PIXEL_NOISE * torch.randn(n, pixels, generator=gen)
        return x.view(n, *shape), y

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    flat = x_train.double().transpose(0, 1).reshape(shape[0], -1)
    mean, std = flat.mean(dim=1).numpy(), flat.std(dim=1, correction=0).numpy()
    return Dataset(
        name="synthetic",
        x_train=_normalise(x_train, mean, std),
        y_train=y_train,
        x_test=_normalise(x_test, mean, std),
        y_test=y_test,
        num_classes=k,
        input_shape=tuple(shape),
    )


def load_dataset(
    name: str,
    root: str | os.PathLike | None = None,
    *,
    seed: int = 0,
    synthetic_train: int = 2000,
    synthetic_test: int = 500,
) -> Dataset:
    """Load dataset `name`, normalised per channel with train statistics.

    Parameters
    ----------
    name : one of DATASETS.
    root : searched first, then $P2PFL_DATA, as in `find_dataset_dir`.
    seed : the 'synthetic' data's seed (the others ignore it).
    synthetic_train, synthetic_test : the 'synthetic' data's sizes.

    Returns
    -------
    Dataset.

    Raises
    ------
    ValueError
        for an unknown name or a malformed file.
    DatasetNotFoundError
        when the files are in none of the searched directories.
    """
    check_name(name)
    if name == "synthetic":
        return make_synthetic(synthetic_train, synthetic_test, seed)
    directory = find_dataset_dir(name, root)
    if name in ("fashion_mnist", "mnist"):
        return _from_uint8(
            name, load_idx_split(directory, "train"), load_idx_split(directory, "t10k")
        )
    if name == "cifar10":
        files, key = CIFAR10_FILES, b"labels"
    else:
        files, key = CIFAR100_FILES, b"fine_labels"
    k = NUM_CLASSES[name]
    train = load_cifar_batches(directory, files[:-1], key, k)
    test = load_cifar_batches(directory, files[-1:], key, k)
    return _from_uint8(name, train, test)
