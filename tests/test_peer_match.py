"""bench.peer_match rebuilds p2pfl's FedAvg work client by client (what the Flower side runs)."""

from __future__ import annotations

import pytest
import torch

from bench import peer_match as M
from p2pfl.config import with_overrides
from p2pfl.engine import build
from tests.conftest import play

SYNTHETIC = {"name": "synthetic", "partition": "dirichlet", "alpha": 0.5,
             "synthetic_train": 600, "synthetic_test": 200}


def config(participation: float = 0.5, **kw):
    return M.fedavg_config(rounds=3, clients=6, participation=participation, local_steps=3,
                           batch_size=16, lr=0.1, seed=3, data=SYNTHETIC, **kw)


@pytest.fixture(scope="module")
def built():
    cfg = config()
    return cfg, *build(cfg)


def test_data_partition_and_initial_model_match_build(built, one_thread):
    cfg, ctx, algorithm = built
    data = M.federated_data(cfg)
    assert torch.equal(data.flat_indices, ctx.data.flat_indices)
    assert (data.sizes == ctx.data.sizes).all()
    assert torch.equal(data.x_train, ctx.data.x_train)
    assert torch.equal(data.y_test, ctx.data.y_test)
    model = M.initial_model(cfg, data)
    for name, p in model.named_parameters():
        assert torch.equal(p, algorithm.server[name])


@pytest.mark.parametrize("participation", [0.5, 0.25, 0.01, 1.0])
def test_sampled_clients_are_the_servers(participation, one_thread):
    cfg = config(participation)
    ctx, algorithm = build(cfg)
    for t in range(4):
        assert M.sampled_clients(cfg, t) == algorithm.sample(ctx, t).tolist()
    assert len(M.sampled_clients(cfg, 0)) == max(1, round(participation * 6))


def test_client_batches_are_the_trainers(built):
    cfg, ctx, _ = built
    a = cfg.algorithm
    nodes = torch.tensor([4, 0, 2])
    for t in (0, 5):
        plan = ctx.data.plan(cfg.seed, t, a.batch_size, a.local_epochs, a.local_steps)
        for step in range(plan.steps):
            x, y = (batch := ctx.data.batch(plan, step, nodes)).x, batch.y
            for row, node in enumerate(nodes.tolist()):
                idx = M.client_batches(cfg, ctx.data, t, node)[step]
                assert len(idx) == a.batch_size
                assert torch.equal(ctx.data.x_train[idx], x[row])
                assert torch.equal(ctx.data.y_train[idx], y[row])


def test_config_round_trips_through_json():
    cfg = config(0.25)
    assert M.from_json(M.config_json(cfg)) == cfg


def test_per_client_fedavg_reproduces_p2pfl_in_float64(one_thread):
    """Two rounds client by client (torch.optim.SGD on an nn.Module, sample-weighted mean) end
    at p2pfl's vectorized FedAvg server model."""
    cfg = with_overrides(config(0.5), {"engine.dtype": "float64"})
    ctx, algorithm = build(cfg)
    data = M.federated_data(cfg, torch.float64)
    server = M.initial_model(cfg, data).state_dict()
    for t in range(2):
        play(algorithm, ctx, t, ctx.schedule.at(t))
        clients = M.sampled_clients(cfg, t)
        total = {k: torch.zeros_like(v) for k, v in server.items()}
        total_samples = int(data.sizes[clients].sum())
        for client in clients:
            weight = int(data.sizes[client]) / total_samples  # n_i / sum_j n_j
            model = M.initial_model(cfg, data)
            model.load_state_dict(server)
            loss = M.local_sgd(model, cfg, data, t, client)
            assert loss > 0
            for k, v in model.state_dict().items():
                total[k] += weight * v
        server = total
        for k, v in server.items():
            torch.testing.assert_close(algorithm.server[k], v, rtol=0, atol=1e-12)
    changed = M.initial_model(cfg, data).state_dict()
    assert any(not torch.equal(changed[k], v) for k, v in server.items())
