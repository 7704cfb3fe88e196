"""CHOCO-SGD against its paper: rounds recomputed by hand, its consensus under top-1% compression,
the exact-gossip fixed point it reaches through error feedback, what it refuses, and a compressor
passed as an object (recorded, needed again on resume).

The local phase is the quadratic one of tests/test_tracking.py (f_i = a_i / 2 ||x - b_i||^2)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch

import topologies as T
from algorithms.choco import add_flat, flatten
from p2pfl.config import ConfigError
from p2pfl.core.compression import Sign, TopK
from p2pfl.engine import build, run
from tests.conftest import assert_resume_needs_the_same, play, skip_plots, small_config
from tests.test_tracking import QuadraticTrainer, quadratic_run

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny float64 problems
LR = 0.1  # quadratic_run's


def metropolis(graph: nx.Graph) -> np.ndarray:
    n = graph.number_of_nodes()
    W = np.zeros((n, n))
    for i, j in graph.edges:
        W[i, j] = W[j, i] = 1 / (1 + max(graph.degree[i], graph.degree[j]))
    return W + np.diag(1 - W.sum(1))


def top_k(rows: np.ndarray, k: int) -> np.ndarray:
    keep = np.argsort(-np.abs(rows), axis=1)[:, :k]
    out = np.zeros_like(rows)
    np.put_along_axis(out, keep, np.take_along_axis(rows, keep, axis=1), axis=1)
    return out


def test_each_round_is_algorithm_2_and_each_message_its_top_k_size():
    """3 nodes on a path, top-1% (k = 79 of d = 7850), gamma 0.3, 5 rounds: models and estimates
    equal the paper's iteration by hand; the gossip keeps the mean of the models where the local
    step put it; each message is k values of 64 bits and k indices of 13 bits."""
    graph = nx.path_graph(3)
    ctx, algorithm, a, b = quadratic_run("choco", graph, algorithm__consensus_lr=0.3)
    W, x = metropolis(graph), flatten(ctx.population.params).numpy().copy()
    estimate = np.zeros_like(x)
    k = math.ceil(0.01 * x.shape[1])
    for t in range(5):
        half = x - LR * a[:, None] * (x - b)
        estimate = estimate + top_k(half - estimate, k)
        x = half + 0.3 * (W - np.eye(3)) @ estimate
        report = play(algorithm, ctx, t, graph)
        np.testing.assert_allclose(flatten(ctx.population.params).numpy(), x, atol=1e-12)
        np.testing.assert_allclose(algorithm.estimate.numpy(), estimate, atol=1e-12)
        np.testing.assert_allclose(x.mean(0), half.mean(0), atol=1e-12)
        assert report.copies_sent == 4
        assert report.bytes_sent == 4 * math.ceil(k * (64 + 13) / 8)
    gap = np.sqrt(np.square(x - estimate).sum(1).mean())
    assert algorithm.metrics(ctx)["estimate_gap"] == pytest.approx(gap, rel=1e-12)


def test_compressed_gossip_alone_reaches_the_average():
    """No gradients (a_i = 0), different starts, top-1%, gamma 0.02 on a 5-cycle: every node ends
    at the mean of the starts (1e-7) and no round moves the mean. (With top-1% this consensus is
    stable only for a small gamma: at 0.05 the nodes drift apart, at 0.1 they diverge.)"""
    graph = nx.cycle_graph(5)
    ctx, algorithm, _, _ = quadratic_run("choco", graph, algorithm__consensus_lr=0.02)
    params = ctx.population.params
    add_flat(params, torch.randn(5, ctx.population.num_params, dtype=torch.float64,
                                 generator=torch.Generator().manual_seed(1)))
    ctx.trainer = QuadraticTrainer(torch.zeros(5, dtype=torch.float64), params)
    mean = flatten(params).mean(0)
    for t in range(2000):
        play(algorithm, ctx, t, graph)
        if t % 100 == 0:
            torch.testing.assert_close(flatten(params).mean(0), mean, rtol=0, atol=1e-12)
    assert (flatten(params) - mean).abs().max() < 1e-7


@pytest.mark.parametrize("fraction", [0.01, 1.0])
def test_error_feedback_reaches_the_fixed_point_of_exact_gossip(fraction):
    """Heterogeneous quadratics on a 5-cycle: top-1% and uncompressed CHOCO both end at the fixed
    point of exact gossip with W_gamma = I + gamma (W - I), i.e. x = W_gamma (x - lr grad f(x)),
    solved here as a linear system (1e-7). Without error feedback top-1% would stall far away."""
    graph, gamma = nx.cycle_graph(5), 0.05
    ctx, algorithm, a, b = quadratic_run("choco", graph, algorithm__consensus_lr=gamma,
                                         algorithm__compress_fraction=fraction)
    eye, D = np.eye(5), np.diag(a)
    W_gamma = eye + gamma * (metropolis(graph) - eye)
    fixed = np.linalg.solve(LR * D + (eye - W_gamma) @ (eye - LR * D), LR * W_gamma @ D @ b)
    for t in range(1500):
        play(algorithm, ctx, t, graph)
    assert np.abs(flatten(ctx.population.params).numpy() - fixed).max() < 1e-7


@pytest.mark.parametrize(("overrides", "match"), [
    ({"topology__link_drop": 0.1}, "^topology.link_drop: choco needs every neighbour"),
    ({"topology__node_drop": 0.1}, "^topology.node_drop: choco needs every neighbour"),
    ({"topology__name": "random_regular_schedule", "topology__d": 2},
     "^topology: choco runs on a static graph"),
    ({"algorithm__compressor": "object"}, "^algorithm.compressor: is 'object' but no compressor"),
    ({"engine__executor": "loop"}, "^engine.executor: choco runs on the 'vectorized'"),
    ({"algorithm__compressor": "sign", "algorithm__compress_fraction": 0.1},
     "^algorithm.compress_fraction: compressor 'sign' does not read compress_fraction"),
    ({"algorithm__compress_bits": 8}, "^algorithm.compress_bits: compressor 'top_k' does not"),
])
def test_choco_refuses_what_would_split_the_estimates(overrides, match):
    with pytest.raises(ConfigError, match=match):
        build(small_config(algorithm__name="choco", **overrides))


def test_the_built_in_names_and_a_passed_object_send_the_same_messages(tmp_path, monkeypatch):
    """compressor = "sign" by name and Sign() passed as an object: one run, recorded as an object
    in compressor.json; the bytes are those of a sign message (d bits + one 64-bit scale)."""
    skip_plots(monkeypatch)
    cfg = small_config(algorithm__name="choco", algorithm__compressor="sign", rounds=2)
    by_name = run(cfg, tmp_path / "name")
    by_object = run(cfg, tmp_path / "object", compressor=Sign())
    assert [r["train_loss"] for r in by_name] == [r["train_loss"] for r in by_object]
    assert (tmp_path / "object" / "compressor.json").is_file()
    ctx, _ = build(cfg)
    messages = T.messages(ctx.schedule.at(0))[0].size
    assert by_object[0]["bytes_sent"] == messages * math.ceil((ctx.population.num_params + 64) / 8)


def test_a_resume_needs_the_same_compressor(tmp_path, monkeypatch):
    skip_plots(monkeypatch)
    cfg = small_config(algorithm__name="choco", rounds=4)
    assert_resume_needs_the_same(tmp_path, cfg, "compressor", TopK(0.05), TopK(0.1),
                                 missing="^compressor: .* ran with .*: pass it again",
                                 differs="^compressor: .*TopK.*this is another one")


def test_a_compressor_is_only_for_an_algorithm_that_compresses(tmp_path):
    with pytest.raises(ConfigError, match="^compressor: dpsgd sends whole models"):
        run(small_config(algorithm__name="dpsgd"), tmp_path / "run", compressor=TopK(0.1))
    with pytest.raises(ConfigError, match="^compressor: .*object lacks compress, decompress, bits"):
        run(small_config(algorithm__name="choco"), tmp_path / "run", compressor=object())
