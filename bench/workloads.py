"""The benchmark's workloads: model, data, population size, and the round they time.

Every workload times rounds of local training followed by Push-Sum mixing over a random
out-degree digraph (10 out-neighbours, fewer when N <= 10): `dfedsgpm` (SGD with heavy-ball
momentum 0.9) and `dfedsgpsm` (the same with a SAM ascent, rho = 0.05), 5 local steps of batch 32
per node. Data: real Fashion-MNIST for `mlp`; CIFAR-shaped data for `cnn` and `resnet18_gn`,
real CIFAR-10 when it is found and else the synthetic problem with images (3, 32, 32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from p2pfl.config import Config, config_from_dict
from p2pfl.data import Dataset, DatasetNotFoundError, find_dataset_dir, load_dataset
from p2pfl.data.loaders import make_synthetic

LOCAL_STEPS = 5
BATCH_SIZE = 32
MOMENTUM = 0.9
SAM_RHO = 0.05
OUT_DEGREE = 10
CIFAR_SHAPE = (3, 32, 32)
SYNTHETIC_TRAIN = 50_000  # as CIFAR-10's training set
SYNTHETIC_TEST = 1_000  # not used by the timed rounds
SOLVERS: dict[str, tuple[str, dict[str, float]]] = {
    "sgd": ("dfedsgpm", {"momentum": MOMENTUM}),
    "sam": ("dfedsgpsm", {"momentum": MOMENTUM, "rho": SAM_RHO}),
}


@dataclass(frozen=True)
class Workload:
    """One row group of the suite. `data` is "fashion_mnist", "cifar" (CIFAR-shaped) or
    "synthetic" (the 1x28x28 test problem). The per-node loop executor is timed on `loop_nodes`
    of the `num_nodes` nodes (at least 2) and scaled to all of them per node-step when fewer."""

    name: str
    model: str
    data: str
    num_nodes: int
    loop_nodes: int
    local_steps: int = LOCAL_STEPS
    batch_size: int = BATCH_SIZE


WORKLOADS = (
    Workload("mlp-10", "mlp", "fashion_mnist", 10, 10),
    Workload("mlp-100", "mlp", "fashion_mnist", 100, 100),
    Workload("mlp-1000", "mlp", "fashion_mnist", 1000, 100),
    Workload("cnn", "cnn", "cifar", 100, 100),
    Workload("resnet18_gn", "resnet18_gn", "cifar", 10, 10),
)
# --quick: about 2.5 minutes on a 2-core CPU; the loop is timed on few nodes and scaled.
QUICK_WORKLOADS = (
    Workload("mlp-10", "mlp", "fashion_mnist", 10, 5),
    Workload("mlp-100", "mlp", "fashion_mnist", 100, 5),
    Workload("mlp-1000", "mlp", "fashion_mnist", 1000, 5),
    Workload("cnn", "cnn", "cifar", 10, 2),
    Workload("resnet18_gn", "resnet18_gn", "cifar", 2, 2),
)


def select(workloads: tuple[Workload, ...], only: str | None) -> list[Workload]:
    """The workloads named in `only`.

    Parameters
    ----------
    workloads : the workloads to choose from.
    only : comma-separated names, or model names for all of a model's workloads; None: all.

    Returns
    -------
    list of Workload.

    Raises
    ------
    ValueError
        for an unknown name, listing the choices.
    """
    if not only:
        return list(workloads)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    known = {w.name for w in workloads} | {w.model for w in workloads}
    unknown = [w for w in wanted if w not in known]
    if unknown or not wanted:
        raise ValueError(f"unknown workload {', '.join(unknown) or repr(only)}; allowed: "
                         f"{', '.join(w.name for w in workloads)} (or a model name)")
    return [w for w in workloads if w.name in wanted or w.model in wanted]


def load_workload_data(kind: str, quick: bool = False) -> tuple[Dataset, str]:
    """The dataset of a workload's `data` kind and the label the table shows for it.

    Without CIFAR-10 on disk, "cifar" is synthetic data of its shape.

    Parameters
    ----------
    kind : "fashion_mnist", "synthetic" or "cifar".
    quick : a tenth of the synthetic CIFAR-shaped training set.

    Returns
    -------
    tuple (Dataset, label).

    Raises
    ------
    ValueError
        for an unknown kind.
    """
    if kind == "fashion_mnist":
        return load_dataset("fashion_mnist"), "fashion_mnist"
    if kind == "synthetic":
        return make_synthetic(2000, 500, seed=0), "synthetic 1x28x28"
    if kind != "cifar":
        raise ValueError(f"unknown workload data {kind!r}")
    try:
        find_dataset_dir("cifar10")
    except DatasetNotFoundError:
        n_train = SYNTHETIC_TRAIN // 10 if quick else SYNTHETIC_TRAIN
        shape = "x".join(map(str, CIFAR_SHAPE))
        return (make_synthetic(n_train, SYNTHETIC_TEST, seed=0, shape=CIFAR_SHAPE),
                f"synthetic {shape}")
    return load_dataset("cifar10"), "cifar10"


def workload_config(workload: Workload, solver: str, executor: str, num_nodes: int,
                    device: str, data_name: str, compile: bool = False,
                    precision: str = "fp32") -> Config:
    """The run config of one timed population.

    Parameters
    ----------
    workload : the workload.
    solver : a key of SOLVERS ("sgd", "sam").
    executor : "vectorized" or "loop".
    num_nodes : N.
    device : "cpu" or "cuda".
    data_name : the engine's dataset name.
    compile : torch.compile the vectorized population, never the loop.
    precision : engine.precision.

    Returns
    -------
    Config.
    """
    algorithm, options = SOLVERS[solver]
    raw: dict[str, Any] = {
        "seed": 0, "rounds": 1, "device": device,
        "data": {"name": data_name, "num_nodes": num_nodes, "partition": "dirichlet",
                 "alpha": 0.3},
        "model": {"name": workload.model},
        "topology": {"name": "random_out", "k": min(OUT_DEGREE, num_nodes - 1)},
        "algorithm": {"name": algorithm, "lr": 0.05, "local_steps": workload.local_steps,
                      "local_epochs": 0, "batch_size": workload.batch_size, **options},
        "engine": {"executor": executor, "compile": compile and executor == "vectorized",
                   "precision": precision},
    }
    return config_from_dict(raw)
