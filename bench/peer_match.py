"""The FedAvg workload of `bench.peer_flower`, and what a per-client engine needs to do exactly
p2pfl's work on it.

Given the run's `Config`, these helpers rebuild, outside the vectorized engine, the pieces p2pfl
derives from the seed: the normalised dataset and its node partition, the initial model, the
clients sampled in round t and the minibatches a client takes in round t. A client-per-process
engine (Flower) that uses them trains the same clients on the same minibatches from the same
model, so both engines should end at the same global model up to float rounding.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn

from p2pfl.config import Config, config_from_dict
from p2pfl.core.federated import FederatedData
from p2pfl.core.models import build_model
from p2pfl.core.seeding import numpy_rng, stream_seed
from p2pfl.engine.builder import federated_data as build_federated_data


def fedavg_config(rounds: int = 20, clients: int = 100, participation: float = 0.1,
                  local_steps: int = 5, batch_size: int = 32, lr: float = 0.05,
                  seed: int = 0, data: dict | None = None) -> Config:
    """FedAvg on the star: plain SGD (no momentum, weight decay or lr decay), server_lr 1.

    `local_steps` steps of `batch_size` per sampled client, the global model evaluated only after
    the last round; the model is `mlp`, the device the CPU.

    Parameters
    ----------
    rounds : rounds.
    clients : N.
    participation : share of the clients sampled per round.
    local_steps : steps per sampled client.
    batch_size : B.
    lr : the local learning rate.
    seed : the run's seed.
    data : overrides of the [data] section (default: real Fashion-MNIST, Dirichlet(0.3) over
        `clients` nodes).

    Returns
    -------
    Config.
    """
    return config_from_dict({
        "seed": seed, "rounds": rounds, "device": "cpu",
        "data": {"name": "fashion_mnist", "partition": "dirichlet", "alpha": 0.3,
                 **(data or {}), "num_nodes": clients},
        "model": {"name": "mlp"},
        "topology": {"name": "star"},
        "algorithm": {"name": "fedavg", "lr": lr, "lr_decay": 1.0, "local_steps": local_steps,
                      "local_epochs": 0, "batch_size": batch_size,
                      "participation": participation},
        "eval": {"every": rounds},
    })


def config_json(cfg: Config) -> str:
    """`cfg` as a JSON string (what a message to a client can carry); `from_json` inverts it.

    Parameters
    ----------
    cfg : the config.

    Returns
    -------
    str.
    """
    return json.dumps(cfg.to_dict(), sort_keys=True)


def from_json(text: str) -> Config:
    """The config of a `config_json` string.

    Parameters
    ----------
    text : the JSON.

    Returns
    -------
    Config.
    """
    return config_from_dict(json.loads(text))


def federated_data(cfg: Config, dtype: torch.dtype = torch.float32) -> FederatedData:
    """The dataset and node partition of `p2pfl.engine.builder(cfg)` on the CPU.

    The engine's own loading and partition with the same seed: node i's data is client i's local
    data.

    Parameters
    ----------
    cfg : the config.
    dtype : the inputs' dtype.

    Returns
    -------
    FederatedData.
    """
    return build_federated_data(cfg, dtype)


def initial_model(cfg: Config, data: FederatedData) -> nn.Module:
    """The model every node and the server start from in `p2pfl.engine.builder(cfg)`.

    Parameters
    ----------
    cfg : the config.
    data : its federated data (input shape, classes, dtype).

    Returns
    -------
    nn.Module.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(cfg.seed, "init"))
        model = build_model(cfg.model.name, data.input_shape, data.num_classes)
    return model.to(data.x_train.dtype)


def sampled_clients(cfg: Config, t: int) -> list[int]:
    """The clients p2pfl's server samples in round t (`algorithms.server.Server.sample`, sampling
    "fixed").

    Parameters
    ----------
    cfg : the config.
    t : round, from 0.

    Returns
    -------
    list of int: m = max(1, round(r * N)) of the N clients without replacement, sorted.

    Raises
    ------
    ValueError
        for a sampling other than "fixed".
    """
    n, r = cfg.data.num_nodes, cfg.algorithm.participation
    if cfg.algorithm.sampling != "fixed":
        raise ValueError(f"only 'fixed' sampling is matched, got {cfg.algorithm.sampling!r}")
    rng = numpy_rng(cfg.seed, "participation", t)
    return sorted(int(i) for i in rng.choice(n, size=max(1, round(r * n)), replace=False))


def client_batches(cfg: Config, data: FederatedData, t: int, client: int) -> list[torch.Tensor]:
    """Indices into `data.x_train` of each local step of `client` in round t.

    The rows p2pfl's trainer gathers for that client (`FederatedData.batch`).

    Parameters
    ----------
    cfg : the config.
    data : its federated data.
    t : round, from 0.
    client : the client's node id.

    Returns
    -------
    list of K int64 tensors [B].
    """
    a = cfg.algorithm
    plan = data.plan(cfg.seed, t, a.batch_size, a.local_epochs, a.local_steps, a.last_batch)
    return [plan.ids[k, client, :int(plan.lengths[client, k])]
            for k in range(int(plan.steps_of[client]))]


def local_sgd(model: nn.Module, cfg: Config, data: FederatedData, t: int, client: int) -> float:
    """Train `model` in place as client `client` in round t.

    Plain SGD on its minibatches at the round's lr (one torch.optim.SGD step per minibatch).

    Parameters
    ----------
    model : the client's model, trained in place.
    cfg : the config.
    data : its federated data.
    t : round, from 0.
    client : the client's node id.

    Returns
    -------
    float, the mean minibatch loss.
    """
    a = cfg.algorithm
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr * a.lr_decay**t)
    losses = []
    for idx in client_batches(cfg, data, t, client):
        loss = F.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return float(torch.stack(losses).mean())


@torch.no_grad()
def accuracy(model: nn.Module, data: FederatedData, batch_size: int = 1000) -> float:
    """Top-1 accuracy of `model` on the whole test set.

    Parameters
    ----------
    model : the model.
    data : the federated data (its test set).
    batch_size : samples per forward pass.

    Returns
    -------
    float in [0, 1].
    """
    correct = 0
    for s in range(0, len(data.y_test), batch_size):
        logits = model(data.x_test[s:s + batch_size])
        correct += int((logits.argmax(-1) == data.y_test[s:s + batch_size]).sum())
    return correct / len(data.y_test)
