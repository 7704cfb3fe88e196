"""Mixing layouts: CSR mixing equals dense mixing, the auto rule, and whole rounds (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import p2pfl.core.mixing as comm_module
import topologies as T
from p2pfl.config import ConfigError
from p2pfl.core.mixing import LocalComm, diag_scale
from p2pfl.engine import build
from tests.conftest import play, small_config

CPU = torch.device("cpu")
SHAPES = {"w": (3, 70), "b": (5,), "s": ()}  # 210 columns: several tiles when tiles are small


def _params(n: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {k: torch.randn((n, *s), generator=gen, dtype=torch.float64) for k, s in SHAPES.items()}


def _faults(graph, seed: int) -> T.Faults:
    return T.sample_faults(graph, 0.3, 0.1, seed=seed)


def _matrices(kind: str, n: int, seed: int, sparse: bool):
    if kind == "column":
        graph = T.random_out(n, 2, seed=seed).at(0)
        return T.column_stochastic(graph, faults=_faults(graph, seed), sparse=sparse)
    graph = T.ring(n)
    return T.doubly_stochastic(graph, faults=_faults(graph, seed), sparse=sparse)


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of 64 columns, so every multi-column block is mixed over several tiles."""
    monkeypatch.setattr(comm_module, "TILE_BYTES", 1)


@pytest.mark.parametrize("kind", ["column", "doubly"])
@pytest.mark.parametrize("steps", [1, 3])
def test_sparse_mix_equals_dense_mix_and_numpy(kind, steps, small_tiles):
    n = 9
    dense, sparse = LocalComm(CPU, torch.float64, "dense"), LocalComm(CPU, torch.float64, "sparse")
    for seed in range(3):
        W = _matrices(kind, n, seed, sparse=True)
        Wd, Ws = dense.matrix(W), sparse.matrix(W)
        assert Wd.layout == torch.strided and Ws.layout == torch.sparse_csr
        x_dense, x_sparse = _params(n, seed), _params(n, seed)
        expected = {k: np.linalg.matrix_power(W.toarray(), steps) @ v.reshape(n, -1).numpy()
                    for k, v in x_dense.items()}
        dense.mix(Wd, x_dense, steps)
        sparse.mix(Ws, x_sparse, steps)
        for k in SHAPES:
            torch.testing.assert_close(x_sparse[k], x_dense[k], rtol=0, atol=1e-13)
            np.testing.assert_allclose(x_sparse[k].reshape(n, -1).numpy(), expected[k],
                                       rtol=0, atol=1e-13)


def test_matrix_takes_numpy_scipy_and_torch_in_either_layout():
    W = _matrices("column", 7, 0, sparse=False)
    for layout, mixing in ((torch.strided, "dense"), (torch.sparse_csr, "sparse")):
        comm = LocalComm(CPU, torch.float32, mixing)
        for source in (W, sp.csr_array(W), torch.as_tensor(W), torch.as_tensor(W).to_sparse_csr()):
            M = comm.matrix(source)
            assert M.layout == layout and M.dtype == torch.float32 and M.shape == (7, 7)
            np.testing.assert_allclose(M.to_dense().numpy(), W, rtol=1e-6)
        assert comm.matrix(W, dtype=torch.float64).dtype == torch.float64


def test_diag_scale_is_the_same_in_both_layouts():
    P = torch.as_tensor(_matrices("column", 8, 1, sparse=False))
    right = torch.linspace(0.5, 2.0, 8, dtype=torch.float64)
    divisor = P @ right
    dense = diag_scale(P, right, divisor)
    torch.testing.assert_close(dense, torch.diag(1 / divisor) @ P @ torch.diag(right),
                               rtol=0, atol=1e-15)
    scaled = diag_scale(P.to_sparse_csr(), right, divisor)
    assert scaled.layout == torch.sparse_csr
    assert torch.equal(scaled.to_dense(), dense)


def test_auto_picks_dense_for_small_or_dense_graphs_and_sparse_for_large_sparse_ones():
    comm = LocalComm(CPU, torch.float32)
    assert comm.mixing == "auto"
    assert not comm.sparse_for(10, 30)  # small N
    assert not comm.sparse_for(1000, 500_000)  # half the entries are nonzero
    assert comm.sparse_for(1000, 11_000)  # 10-out-regular
    assert comm.matrix(T.column_stochastic(T.ring(10), sparse=True)).layout == torch.strided
    big = T.column_stochastic(T.random_out(500, 10, seed=0).at(0), sparse=True)
    assert comm.matrix(big).layout == torch.sparse_csr
    assert comm.matrix(big.toarray()).layout == torch.sparse_csr
    assert not LocalComm(CPU, torch.float32, "dense").sparse_for(10_000, 10_000)
    assert LocalComm(CPU, torch.float32, "sparse").sparse_for(2, 4)


def test_large_sparse_rounds_never_build_a_dense_matrix(monkeypatch):
    """With auto at N = 100 on a ring, the algorithms ask topologies for CSR only."""
    calls = []
    for name in ("column_stochastic", "doubly_stochastic"):
        real = getattr(T, name)

        def spy(*args, _real=real, **kwargs):
            calls.append(kwargs.get("sparse", False))
            return _real(*args, **kwargs)

        monkeypatch.setattr(T, name, spy)
    for alg in ("osgp", "dfedsam_mgs"):
        overrides = {"algorithm__rho": 0.05, "algorithm__gossip_steps": 2} if alg != "osgp" else {}
        ctx, algorithm = build(small_config(algorithm__name=alg, data__num_nodes=100,
                                            algorithm__local_steps=1, **overrides))
        calls.clear()
        play(algorithm, ctx, 0, ctx.schedule.at(0))
        assert calls == [True]


def test_bad_mixing_value_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^engine\.mixing: unknown value 'csr'"):
        small_config(engine__mixing="csr")
    with pytest.raises(ValueError, match="mixing must be one of"):
        LocalComm(CPU, torch.float32, "csr")


ROUNDS = [
    ("osgp", {}),
    ("dfedsgpsm", {"algorithm__momentum": 0.9, "algorithm__rho": 0.05}),
    ("dfedavg", {}),
    ("dpsgd", {"algorithm__local_steps": 1}),
    ("dfedsam_mgs", {"algorithm__rho": 0.05, "algorithm__gossip_steps": 3}),
]


@pytest.mark.parametrize("name, overrides", ROUNDS)
def test_whole_rounds_with_sparse_mixing_equal_dense(name, overrides, one_thread):
    topology = ({"topology__name": "random_out", "topology__k": 2}
                if name in ("osgp", "dfedsgpsm") else {"topology__name": "ring"})
    runs = {}
    for mixing in ("dense", "sparse"):
        ctx, algorithm = build(small_config(
            algorithm__name=name, engine__mixing=mixing, topology__link_drop=0.2,
            topology__node_drop=0.1, **topology, **overrides))
        start = ctx.population.flat.clone()
        reports = [play(algorithm, ctx, t, ctx.schedule.at(t)) for t in range(3)]
        runs[mixing] = ctx, algorithm, reports
    (dense, alg_d, rep_d), (sparse, alg_s, rep_s) = runs["dense"], runs["sparse"]
    assert (dense.population.flat - start).abs().max() > 1e-3
    torch.testing.assert_close(sparse.population.flat, dense.population.flat, rtol=0, atol=1e-12)
    for key, value in alg_d.state_dict().items():
        torch.testing.assert_close(alg_s.state_dict()[key], value, rtol=0, atol=1e-12,
                                   equal_nan=True)
    assert [r.copies_sent for r in rep_s] == [r.copies_sent for r in rep_d]


@pytest.mark.parametrize("name", ["osgp", "dfedsgpsm"])
def test_push_sum_conserves_mass_with_sparse_mixing(name, one_thread):
    extra = {"algorithm__momentum": 0.9, "algorithm__rho": 0.05} if name == "dfedsgpsm" else {}
    ctx, algorithm = build(small_config(algorithm__name=name, engine__mixing="sparse",
                                        topology__name="random_out", topology__k=1,
                                        data__num_nodes=8, rounds=20, **extra))
    gen = torch.Generator().manual_seed(1)
    for v in ctx.population.params.values():
        v.copy_(torch.randn(v.shape, generator=gen, dtype=v.dtype))
    for t in range(5):
        graph = ctx.schedule.at(t)
        w = algorithm.weights.clone()
        mass = {k: torch.tensordot(w, v, dims=1) for k, v in ctx.population.params.items()}
        algorithm.mix(ctx, T.column_stochastic(graph, faults=_faults(graph, t), sparse=True))
        assert algorithm.weights.sum().item() == pytest.approx(8.0, abs=1e-12)
        for k, v in ctx.population.params.items():
            torch.testing.assert_close(torch.tensordot(algorithm.weights, v, dims=1), mass[k],
                                       rtol=0, atol=1e-12)
    assert (algorithm.weights - 1).abs().max() > 0.05, "w must become non-uniform"
