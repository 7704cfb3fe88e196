"""FedAvg, DFedAvg and SGP against hand-written references and the spec's identities (1.11)."""

from __future__ import annotations

from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

import topologies as T
from p2pfl.engine import build
from tests.conftest import play, small_config


def _module_and_params(ctx):
    """An nn.Module with the population's structure (for functional_call) and node 0's params."""
    from p2pfl.core.models import build_model

    model = build_model("mlp", ctx.data.input_shape, ctx.data.num_classes)  # small_config's
    return model.to(dtype=ctx.dtype)


def test_fedavg_one_step_full_participation_equals_centralized_sgd():
    cfg = small_config(algorithm__name="fedavg", topology__name="star", data__partition="iid",
                       data__alpha=0.3,
                       algorithm__participation=1.0, algorithm__local_steps=1)
    ctx, algorithm = build(cfg)
    start = {k: v.clone() for k, v in algorithm.server.items()}
    plan = ctx.data.plan(cfg.seed, 0, cfg.algorithm.batch_size, 0, local_steps=1)
    x, y = (batch := ctx.data.batch(plan, 0, ctx.all_nodes())).x, batch.y
    model = _module_and_params(ctx)
    params = {k: v.clone().requires_grad_() for k, v in start.items()}
    loss = F.cross_entropy(functional_call(model, params, (x.flatten(0, 1),)), y.flatten())
    grads = torch.autograd.grad(loss, list(params.values()))
    expected = {k: v - cfg.algorithm.lr * g for (k, v), g in zip(start.items(), grads)}

    play(algorithm, ctx, 0, ctx.schedule.at(0))
    for k, v in algorithm.server.items():
        torch.testing.assert_close(v, expected[k], rtol=0, atol=1e-12)


def test_fedavg_partial_participation_trains_only_sampled_clients():
    cfg = small_config(algorithm__name="fedavg", topology__name="star",
                       algorithm__participation=0.5)
    ctx, algorithm = build(cfg)
    before = {k: v.clone() for k, v in ctx.population.params.items()}
    report = play(algorithm, ctx, 0, ctx.schedule.at(0))
    assert len(report.nodes) == 3 and report.copies_sent == 6
    moved = {i for i in range(6)
             if any((ctx.population.params[k][i] != before[k][i]).any() for k in before)}
    assert moved == set(report.nodes.tolist())
    # the server model is the mean of the sampled clients' models (server_lr = 1)
    for k, v in algorithm.server.items():
        torch.testing.assert_close(v, ctx.population.params[k][report.nodes].mean(0), atol=1e-12,
                                   rtol=0)


def test_dfedavg_on_complete_graph_equals_fedavg_full_participation():
    gossip_ctx, gossip = build(small_config(algorithm__name="dfedavg", topology__name="complete"))
    server_ctx, server = build(small_config(algorithm__name="fedavg", topology__name="star",
                                            algorithm__participation=1.0))
    for t in range(3):
        play(gossip, gossip_ctx, t, gossip_ctx.schedule.at(t))
        play(server, server_ctx, t, server_ctx.schedule.at(t))
        for k, v in server.server.items():
            rows = gossip_ctx.population.params[k]
            torch.testing.assert_close(rows, v.expand_as(rows), rtol=0, atol=1e-12)


def test_dfedavg_mixes_with_metropolis_hastings_after_local_steps():
    ctx, algorithm = build(small_config(algorithm__name="dfedavg", topology__name="ring"))
    probe, _ = build(small_config(algorithm__name="dfedavg", topology__name="ring"))
    plan = probe.data.plan(probe.seed, 0, 16, 0, local_steps=3)
    lr = torch.full((6,), 0.1, dtype=torch.float64)
    probe.trainer.train(probe.population.params, probe.all_nodes(), plan, algorithm.solver, lr)
    W = torch.as_tensor(T.doubly_stochastic(T.ring(6)))
    np.testing.assert_allclose(W.numpy()[0, [0, 1, 5]], [1 / 3] * 3)
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    for k, v in probe.population.params.items():
        expected = (W @ v.view(6, -1)).view_as(v)
        torch.testing.assert_close(ctx.population.params[k], expected, rtol=0, atol=1e-12)


def _numerator_sgp(ctx, cfg, rounds: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """SGP written as in the paper: numerators x, weights w, gradient at z = x / w, step on x."""
    model = _module_and_params(ctx)
    x = {k: v.clone() for k, v in ctx.population.params.items()}
    w = torch.ones(ctx.num_nodes, dtype=torch.float64)
    for t in range(rounds):
        plan = ctx.data.plan(cfg.seed, t, cfg.algorithm.batch_size, 0, cfg.algorithm.local_steps)
        lr = cfg.algorithm.lr * cfg.algorithm.lr_decay**t
        for i in range(ctx.num_nodes):
            for step in range(plan.steps):
                xb, yb = (batch := ctx.data.batch(plan, step, torch.tensor([i]))).x, batch.y
                z = {k: (v[i] / w[i]).requires_grad_() for k, v in x.items()}
                loss = F.cross_entropy(functional_call(model, z, (xb[0],)), yb[0])
                grads = torch.autograd.grad(loss, list(z.values()))
                for v, g in zip(x.values(), grads):
                    v[i] -= lr * g
        P = torch.as_tensor(T.column_stochastic(ctx.schedule.at(t)))
        x = {k: (P @ v.view(ctx.num_nodes, -1)).view_as(v) for k, v in x.items()}
        w = P @ w
    return {k: v / w.view(-1, *[1] * (v.dim() - 1)) for k, v in x.items()}, w


def test_sgp_equals_numerator_form_on_irregular_digraph():
    cfg = small_config(algorithm__name="osgp", topology__name="random_out",
                       topology__k=2, algorithm__local_steps=2)
    ctx, algorithm = build(cfg)
    expected_z, expected_w = _numerator_sgp(ctx, cfg, rounds=3)
    for t in range(3):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    assert (expected_w - 1).abs().max() > 0.05, "the test graph must make w non-uniform"
    torch.testing.assert_close(algorithm.weights, expected_w, rtol=0, atol=1e-12)
    for k, v in ctx.population.params.items():
        torch.testing.assert_close(v, expected_z[k], rtol=0, atol=1e-10)


def _spec_digraph() -> nx.DiGraph:
    G = nx.DiGraph()
    G.add_nodes_from(range(4))
    G.add_edges_from([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)])
    return G


def test_pushsum_mixing_matches_spec_worked_example():
    """Worked by hand: x(0) = [1, 2, 3, 4] on a 4-node irregular digraph."""
    cfg = small_config(algorithm__name="osgp", topology__name="random_out",
                       topology__k=1, data__num_nodes=4, rounds=20)
    ctx, algorithm = build(cfg)
    name = next(iter(ctx.population.params))
    block = ctx.population.params[name]
    block.copy_(torch.arange(1.0, 5.0, dtype=torch.float64).view(4, *[1] * (block.dim() - 1)))
    P = T.column_stochastic(_spec_digraph())
    F_ = Fraction
    expected_w = [[F_(4, 3), 1, F_(5, 6), F_(5, 6)], [F_(49, 36), F_(7, 6), F_(7, 9), F_(25, 36)],
                  [F_(139, 108), F_(91, 72), F_(91, 108), F_(131, 216)]]
    expected_z = [[F_(21, 8), F_(3, 2), F_(12, 5), F_(18, 5)],
                  [F_(141, 49), F_(15, 7), F_(51, 28), F_(78, 25)],
                  [F_(759, 278), F_(33, 13), F_(186, 91), F_(336, 131)]]
    for w_t, z_t in zip(expected_w, expected_z):
        algorithm.mix(ctx, P)
        np.testing.assert_allclose(algorithm.weights.numpy(), [float(v) for v in w_t], atol=1e-12)
        z = block.reshape(4, -1)
        for i in range(4):
            np.testing.assert_allclose(z[i].numpy(), float(z_t[i]), atol=1e-12)
        assert algorithm.weights.sum().item() == pytest.approx(4.0, abs=1e-12)
    for _ in range(50):
        algorithm.mix(ctx, P)
    np.testing.assert_allclose(block.reshape(4, -1).numpy(), 2.5, atol=1e-11)


def test_pushsum_reaches_exact_average_with_zero_gradients_on_random_digraphs():
    cfg = small_config(algorithm__name="osgp", topology__name="random_out",
                       topology__k=1, data__num_nodes=8, rounds=20)
    ctx, algorithm = build(cfg)
    gen = torch.Generator().manual_seed(0)
    for v in ctx.population.params.values():
        v.copy_(torch.randn(v.shape, generator=gen, dtype=v.dtype))
    target = {k: v.mean(0) for k, v in ctx.population.params.items()}
    spread = 0.0
    for t in range(300):
        algorithm.mix(ctx, T.column_stochastic(ctx.schedule.at(t)))
        assert algorithm.weights.sum().item() == pytest.approx(8.0, abs=1e-9)
        spread = max(spread, (algorithm.weights - 1).abs().max().item())
    assert spread > 0.1, "random digraphs must make the weights non-uniform"
    for k, v in ctx.population.params.items():
        torch.testing.assert_close(v, target[k].expand_as(v), rtol=0, atol=1e-9)


def test_sgp_round_reports_weights_and_messages():
    cfg = small_config(algorithm__name="osgp", topology__name="random_out",
                       topology__k=2)
    ctx, algorithm = build(cfg)
    report = play(algorithm, ctx, 0, ctx.schedule.at(0))
    assert report.copies_sent == 6 * 2 and report.scalars_sent == 6 * 2
    metrics = algorithm.metrics(ctx)
    assert metrics["ps_weight_sum"] == pytest.approx(6.0, abs=1e-12)
    assert metrics["ps_weight_min"] <= 1.0 <= metrics["ps_weight_max"]


def test_sgp_on_doubly_stochastic_graph_keeps_unit_weights():
    ctx, algorithm = build(small_config(algorithm__name="osgp", topology__name="exponential",
                                        data__num_nodes=8))
    for t in range(3):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    torch.testing.assert_close(algorithm.weights, torch.ones(8, dtype=torch.float64), rtol=0,
                               atol=1e-15)


def test_algorithm_state_round_trip_resumes_identically():
    ctx, algorithm = build(small_config(algorithm__name="osgp", topology__name="random_out",
                                        topology__k=2))
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    pop_state, alg_state = ctx.population.state_dict(), algorithm.state_dict()
    play(algorithm, ctx, 1, ctx.schedule.at(1))
    after = ctx.population.flat.clone()
    ctx.population.load_state_dict(pop_state)
    algorithm.load_state_dict(alg_state)
    play(algorithm, ctx, 1, ctx.schedule.at(1))
    assert torch.equal(ctx.population.flat, after)
