"""Tests for p2pfl.data: IDX / CIFAR loading, normalisation, synthetic data, partitioning."""

from __future__ import annotations

import gzip
import pickle
import struct
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from p2pfl.data import (
    DATASETS,
    DEBIAN_FASHION_MNIST,
    PARTITIONS,
    DatasetNotFoundError,
    find_dataset_dir,
    load_dataset,
    partition,
)
from p2pfl.data import files as loaders
from p2pfl.data.priors import draw_counts

IDX_NAMES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Isolate tests from a $P2PFL_DATA set in the environment."""
    monkeypatch.delenv("P2PFL_DATA", raising=False)


def write_idx(path: Path, array: np.ndarray, gz: bool) -> Path:
    """Write uint8 `array` as an IDX file (gzipped if `gz`); returns the written path."""
    payload = bytes((0, 0, 0x08, array.ndim)) + struct.pack(f">{array.ndim}I", *array.shape)
    payload += array.astype(np.uint8).tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(payload))
    else:
        path.write_bytes(payload)
    return path


def make_idx_dataset(directory: Path, gz: bool, seed: int = 0) -> dict[str, np.ndarray]:
    """Tiny (Fashion-)MNIST-format dataset (5x4 images) in `directory`; returns the raw arrays."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train_images": rng.integers(0, 256, (12, 5, 4), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, 12).astype(np.uint8),
        "test_images": rng.integers(0, 256, (3, 5, 4), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, 3).astype(np.uint8),
    }
    for (split, kind), name in IDX_NAMES.items():
        write_idx(directory / name, arrays[f"{split}_{kind}"], gz)
    return arrays


def expected_normalised(train_u8: np.ndarray, x_u8: np.ndarray) -> np.ndarray:
    """Reference: x/255 normalised per channel (axis 1) with the train mean and population std."""
    train = train_u8.astype(np.float64) / 255
    axes = (0,) + tuple(range(2, train.ndim))
    mean = train.mean(axis=axes, keepdims=True)
    std = train.std(axis=axes, keepdims=True)
    return (x_u8.astype(np.float64) / 255 - mean) / std


# --------------------------------------------------------------------------------------- IDX


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_idx_round_trip(tmp_path: Path, name: str, gz: bool) -> None:
    raw = make_idx_dataset(tmp_path, gz)
    ds = load_dataset(name, root=tmp_path)
    assert ds.name == name and ds.num_classes == 10 and ds.input_shape == (1, 5, 4)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.x_train.shape == (12, 1, 5, 4) and ds.x_test.shape == (3, 1, 5, 4)
    train_u8 = raw["train_images"][:, None]
    np.testing.assert_allclose(
        ds.x_train.numpy(), expected_normalised(train_u8, train_u8), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        ds.x_test.numpy(),
        expected_normalised(train_u8, raw["test_images"][:, None]),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_array_equal(ds.y_train.numpy(), raw["train_labels"])
    np.testing.assert_array_equal(ds.y_test.numpy(), raw["test_labels"])
    assert abs(ds.x_train.mean().item()) < 1e-5
    assert ds.x_train.std(correction=0).item() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("name", "subdir"),
    [
        ("mnist", "MNIST/raw"),
        ("fashion_mnist", "fashion-mnist"),
        ("fashion_mnist", "FashionMNIST/raw"),
    ],
)
def test_idx_found_in_usual_subdir(tmp_path: Path, name: str, subdir: str) -> None:
    make_idx_dataset(tmp_path / subdir, gz=True)
    assert find_dataset_dir(name, tmp_path) == tmp_path / subdir
    assert load_dataset(name, root=tmp_path).x_train.shape == (12, 1, 5, 4)


def test_idx_corrupt_magic_raises_with_path(tmp_path: Path) -> None:
    make_idx_dataset(tmp_path, gz=False)
    bad = tmp_path / IDX_NAMES[("train", "images")]
    data = bytearray(bad.read_bytes())
    data[2] = 0x09  # signed-byte type code instead of unsigned
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="magic") as err:
        load_dataset("mnist", root=tmp_path)
    assert str(bad) in str(err.value)


def test_idx_truncated_file_raises(tmp_path: Path) -> None:
    make_idx_dataset(tmp_path, gz=True)
    bad = tmp_path / (IDX_NAMES[("test", "images")] + ".gz")
    bad.write_bytes(gzip.compress(gzip.decompress(bad.read_bytes())[:-7]))
    with pytest.raises(ValueError, match="bytes") as err:
        load_dataset("mnist", root=tmp_path)
    assert str(bad) in str(err.value)


def test_idx_label_count_mismatch_raises(tmp_path: Path) -> None:
    make_idx_dataset(tmp_path, gz=False)
    write_idx(tmp_path / IDX_NAMES[("train", "labels")], np.zeros(11, np.uint8), gz=False)
    with pytest.raises(ValueError, match="labels"):
        load_dataset("mnist", root=tmp_path)


# ------------------------------------------------------------------------------------- CIFAR


def write_cifar(directory: Path, files: list[str], label_key: bytes, num_classes: int) -> dict:
    """Write CIFAR-style pickles with 4 samples each; returns {file: (data, labels)}."""
    rng = np.random.default_rng(1)
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    for file in files:
        data = rng.integers(0, 256, (4, 3072), dtype=np.uint8)
        labels = rng.integers(0, num_classes, 4).tolist()
        with (directory / file).open("wb") as f:
            pickle.dump({b"data": data, label_key: labels, b"batch_label": b"x"}, f)
        written[file] = (data, labels)
    return written


def test_cifar10_loads(tmp_path: Path) -> None:
    files = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    written = write_cifar(tmp_path / "cifar-10-batches-py", files, b"labels", 10)
    ds = load_dataset("cifar10", root=tmp_path)
    assert ds.num_classes == 10 and ds.input_shape == (3, 32, 32)
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    train_u8 = np.concatenate([written[f][0] for f in files[:5]]).reshape(-1, 3, 32, 32)
    train_labels = sum((written[f][1] for f in files[:5]), [])
    assert ds.y_train.tolist() == train_labels and ds.y_test.tolist() == written["test_batch"][1]
    np.testing.assert_allclose(
        ds.x_train.numpy(), expected_normalised(train_u8, train_u8), rtol=1e-5, atol=1e-5
    )
    test_u8 = written["test_batch"][0].reshape(-1, 3, 32, 32)
    np.testing.assert_allclose(
        ds.x_test.numpy(), expected_normalised(train_u8, test_u8), rtol=1e-5, atol=1e-5
    )
    channel_mean = ds.x_train.mean(dim=(0, 2, 3))
    torch.testing.assert_close(channel_mean, torch.zeros(3), atol=1e-5, rtol=0)


def test_cifar100_loads_fine_labels(tmp_path: Path) -> None:
    written = write_cifar(tmp_path / "cifar-100-python", ["train", "test"], b"fine_labels", 100)
    ds = load_dataset("cifar100", root=tmp_path)
    assert ds.num_classes == 100 and ds.input_shape == (3, 32, 32)
    assert ds.x_train.shape == (4, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert ds.y_train.tolist() == written["train"][1] and ds.y_test.tolist() == written["test"][1]


def test_cifar_bad_shape_raises(tmp_path: Path) -> None:
    with (tmp_path / "train").open("wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"fine_labels": [0, 1]}, f)
    write_cifar(tmp_path, ["test"], b"fine_labels", 100)
    with pytest.raises(ValueError, match="3072"):
        load_dataset("cifar100", root=tmp_path)


# ------------------------------------------------------------------------- finding / errors


def test_missing_dataset_message_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset("cifar10", root=root)
    message = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert "\n" not in message
    assert "cifar10" in message and str(root) in message
    assert str(root / "cifar-10-batches-py") in message
    assert "P2PFL_DATA" in message


def test_missing_fashion_mnist_names_debian_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    debian = tmp_path / "debian"
    monkeypatch.setattr(loaders, "DEBIAN_FASHION_MNIST", debian)
    monkeypatch.setenv("P2PFL_DATA", str(tmp_path / "env"))
    with pytest.raises(DatasetNotFoundError) as err:
        find_dataset_dir("fashion_mnist", tmp_path / "root")
    message = str(err.value)
    assert "\n" not in message
    assert "apt-get install dataset-fashion-mnist" in message
    for searched in (tmp_path / "root", tmp_path / "env", debian):
        assert str(searched) in message


def test_env_var_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = make_idx_dataset(tmp_path / "env" / "mnist", gz=True)
    monkeypatch.setenv("P2PFL_DATA", str(tmp_path / "env"))
    for root in (None, ""):
        ds = load_dataset("mnist", root=root)
        np.testing.assert_array_equal(ds.y_test.numpy(), raw["test_labels"])


def test_root_takes_precedence_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_idx_dataset(tmp_path / "env", gz=False, seed=1)
    raw = make_idx_dataset(tmp_path / "root", gz=False, seed=2)
    monkeypatch.setenv("P2PFL_DATA", str(tmp_path / "env"))
    assert find_dataset_dir("mnist", tmp_path / "root") == tmp_path / "root"
    ds = load_dataset("mnist", root=tmp_path / "root")
    np.testing.assert_array_equal(ds.y_train.numpy(), raw["train_labels"])
    assert find_dataset_dir("mnist", tmp_path / "missing") == tmp_path / "env"


def test_unknown_dataset_name() -> None:
    with pytest.raises(ValueError, match="fashion_mnist"):
        load_dataset("imagenet")
    with pytest.raises(ValueError):
        find_dataset_dir("synthetic")
    assert set(DATASETS) == {"fashion_mnist", "mnist", "cifar10", "cifar100", "synthetic"}


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(), reason="Debian Fashion-MNIST not installed")
def test_real_fashion_mnist() -> None:
    ds = load_dataset("fashion_mnist")
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.y_train.shape == (60000,) and ds.y_test.shape == (10000,)
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert torch.equal(torch.unique(ds.y_train), torch.arange(10))
    assert abs(ds.x_train.mean().item()) < 1e-3
    assert ds.x_train.std().item() == pytest.approx(1.0, abs=1e-3)
    assert abs(ds.x_test.mean().item()) < 0.05


# --------------------------------------------------------------------------------- synthetic


def test_synthetic_deterministic_and_balanced() -> None:
    a = load_dataset("synthetic", seed=3, synthetic_train=300, synthetic_test=50)
    b = load_dataset("synthetic", seed=3, synthetic_train=300, synthetic_test=50)
    c = load_dataset("synthetic", seed=4, synthetic_train=300, synthetic_test=50)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert not torch.equal(a.x_train, c.x_train)
    assert a.x_train.shape == (300, 1, 28, 28) and a.x_test.shape == (50, 1, 28, 28)
    assert a.x_train.dtype == torch.float32 and a.y_train.dtype == torch.int64
    assert a.input_shape == (1, 28, 28) and a.num_classes == 10
    assert torch.bincount(a.y_train).tolist() == [30] * 10
    assert abs(a.x_train.mean().item()) < 1e-4
    assert a.x_train.std().item() == pytest.approx(1.0, abs=1e-3)


def test_synthetic_does_not_touch_global_rng() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    load_dataset("synthetic", synthetic_train=20, synthetic_test=10)
    assert torch.equal(torch.rand(3), expected)


@pytest.fixture
def one_thread():
    """Run torch on one thread: tiny matmuls are slower, not faster, with intra-op threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_synthetic_is_learnable_but_not_trivial() -> None:
    ds = load_dataset("synthetic", seed=0)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(784, 200), torch.nn.ReLU(), torch.nn.Linear(200, 10)
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(300):
        idx = torch.randint(0, len(ds.y_train), (32,), generator=gen)
        loss = torch.nn.functional.cross_entropy(net(ds.x_train[idx]), ds.y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (net(ds.x_test).argmax(1) == ds.y_test).float().mean().item()
    assert 0.6 < acc < 0.99


# --------------------------------------------------------------------------------- partition


def balanced_labels(per_class: int = 600, num_classes: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(num_classes), per_class))


def max_class_share(rows: np.ndarray, labels: np.ndarray) -> float:
    """Mean over nodes of the largest fraction of one class in the node's data."""
    return float(np.mean([np.bincount(labels[r]).max() / len(r) for r in rows]))


EQUAL_SIZES = ("iid", "dirichlet", "dirichlet_prior", "pathological")


@pytest.mark.parametrize("method", EQUAL_SIZES)
@pytest.mark.parametrize("num_nodes", [1, 7, 20])
def test_equal_size_partitions_shape_and_no_duplicates(method: str, num_nodes: int) -> None:
    labels = balanced_labels()
    rows = np.stack(partition(labels, num_nodes, method, alpha=0.1, classes_per_node=2, seed=1))
    assert rows.dtype == np.int64 and rows.shape == (num_nodes, len(labels) // num_nodes)
    assert len(np.unique(rows)) == rows.size
    assert rows.min() >= 0 and rows.max() < len(labels)


@pytest.mark.parametrize("method", PARTITIONS)
def test_partition_deterministic_in_seed(method: str) -> None:
    labels = balanced_labels()
    first = np.concatenate(partition(labels, 10, method, seed=5))
    np.testing.assert_array_equal(first, np.concatenate(partition(labels, 10, method, seed=5)))
    assert not np.array_equal(first, np.concatenate(partition(labels, 10, method, seed=6)))


def test_iid_is_roughly_balanced() -> None:
    labels = balanced_labels()
    assert max_class_share(partition(labels, 10, "iid"), labels) < 0.15


def test_dirichlet_skew_decreases_with_alpha() -> None:
    labels = balanced_labels()
    shares = [
        max_class_share(partition(labels, 20, "dirichlet", alpha=a, seed=0), labels)
        for a in (0.05, 0.5, 100.0)
    ]
    assert shares[0] > shares[1] > shares[2]
    assert shares[0] > 0.6 and shares[2] < 0.2


def test_dirichlet_alpha_zero_one_class_per_node_evenly() -> None:
    labels = balanced_labels()
    rows = partition(labels, 20, "dirichlet", alpha=0, seed=2)
    node_class = [np.unique(labels[r]) for r in rows]
    assert all(len(c) == 1 for c in node_class)
    assert np.bincount(np.concatenate(node_class), minlength=10).tolist() == [2] * 10


def test_dirichlet_alpha_zero_with_scarce_class_still_fills_nodes() -> None:
    labels = np.concatenate([np.zeros(5, np.int64), np.repeat(np.arange(1, 4), 100)])
    rows = np.stack(partition(labels, 4, "dirichlet", alpha=0, seed=0))
    assert rows.shape == (4, 76) and len(np.unique(rows)) == rows.size


def test_pathological_k_classes_until_exhaustion() -> None:
    labels = balanced_labels(per_class=1000)
    k = 3
    rows = np.stack(partition(labels, 20, "pathological", classes_per_node=k, seed=0))
    sizes = np.bincount(labels)
    used = np.cumsum([np.bincount(labels[r], minlength=10) for r in rows], axis=0)
    clean = [i for i in range(len(rows)) if (used[i] < sizes).all()]  # nothing exhausted yet
    assert len(clean) >= 5
    for i in clean:
        counts = np.bincount(labels[rows[i]], minlength=10)
        assert (counts > 0).sum() == k
        assert counts.max() < 0.5 * rows.shape[1]  # roughly equal shares of 1/3


def test_pathological_non_contiguous_labels() -> None:
    labels = np.repeat(np.array([3, 7, 42]), 50)
    rows = np.stack(partition(labels, 3, "pathological", classes_per_node=3, seed=0))
    assert rows.shape == (3, 50)
    with pytest.raises(ValueError, match="classes_per_node"):
        partition(labels, 3, "pathological", classes_per_node=4)


def test_exhausted_class_removed_and_prior_renormalised() -> None:
    rng = np.random.default_rng(0)
    # Only class 0 in the prior, 2 left: the rest comes from the remaining classes' frequencies.
    counts = draw_counts(np.array([1.0, 0.0, 0.0]), np.array([2, 5, 0]), 6, rng)
    assert counts.tolist() == [2, 4, 0]
    # Class 0 exhausts; the prior renormalises onto class 1 only (class 2 has prior 0).
    counts = draw_counts(np.array([0.5, 0.5, 0.0]), np.array([1, 100, 100]), 50, rng)
    assert counts.tolist() == [1, 49, 0]


def test_dirichlet_fast_on_mnist_size() -> None:
    labels = balanced_labels(per_class=6000)
    start = time.perf_counter()
    rows = np.stack(partition(labels, 100, "dirichlet", alpha=0.3, seed=0))
    assert time.perf_counter() - start < 1.0
    assert rows.shape == (100, 600) and len(np.unique(rows)) == rows.size


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_nodes": 0, "method": "iid"}, "num_nodes"),
        ({"num_nodes": 6001, "method": "iid"}, "num_nodes"),
        ({"num_nodes": 5, "method": "stripes"}, "dirichlet"),
        ({"num_nodes": 5, "method": "dirichlet", "alpha": -0.1}, "alpha"),
        ({"num_nodes": 5, "method": "dirichlet", "alpha": float("nan")}, "alpha"),
        ({"num_nodes": 5, "method": "pathological", "classes_per_node": 0}, "classes_per_node"),
        ({"num_nodes": 5, "method": "pathological", "classes_per_node": 11}, "classes_per_node"),
    ],
)
def test_partition_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        partition(balanced_labels(), **kwargs)


def test_partition_rejects_2d_labels() -> None:
    with pytest.raises(ValueError, match="1-D"):
        partition(np.zeros((4, 2), np.int64), 2, "iid")


class _Payload:
    """Unpickling this would run `os.system`: a CIFAR file must never do that."""

    def __reduce__(self):
        import os

        return (os.system, ("touch /tmp/p2pfl-pwned-by-pickle",))


def test_a_cifar_pickle_that_names_code_is_refused_not_run(tmp_path):
    import os

    from p2pfl.data.files import _unpickle

    path = tmp_path / "data_batch_1"
    with path.open("wb") as f:
        pickle.dump({b"data": _Payload(), b"labels": [0]}, f)
    if os.path.exists("/tmp/p2pfl-pwned-by-pickle"):
        os.remove("/tmp/p2pfl-pwned-by-pickle")
    with pytest.raises(ValueError, match="refusing to load posix.system"):
        _unpickle(path)
    assert not os.path.exists("/tmp/p2pfl-pwned-by-pickle")
