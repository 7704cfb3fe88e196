"""Memory-aware chunking: the probe's byte counts, the chunk sizes, and that chunking changes
nothing in the results."""

from __future__ import annotations

import torch

import p2pfl.core.memory as M
from p2pfl.core.models import build_model, stacked_forward
from p2pfl.engine import Runner, build
from tests.conftest import small_config


def _one_node(name: str, input_shape: tuple[int, ...]) -> tuple:
    model = build_model(name, input_shape, 10).double()
    params = {k: v.detach().unsqueeze(0) for k, v in model.named_parameters()}
    return stacked_forward(model), params


def test_mlp_saves_its_input_and_two_hidden_layers_per_sample():
    forward, params = _one_node("mlp", (1, 28, 28))
    assert M.activation_bytes(forward, params, (1, 28, 28)) == (784 + 200 + 200) * 8


def test_chunk_sizes_follow_the_budget():
    forward, params = _one_node("mlp", (1, 28, 28))
    param_bytes = 199_210 * 8
    sample_bytes = (784 + 200 + 200) * 8
    per_node = M.STEP_COPIES * param_bytes + M.BACKWARD_FACTOR * sample_bytes * 32
    per_sam_node = per_node + M.SAM_COPIES * param_bytes
    per_eval_node = param_bytes + sample_bytes * 500
    gpu = torch.device("cuda")  # only its type is read when a budget is given
    chunks = M.plan_chunks(forward, params, (1, 28, 28), 1000, 32, 500, False, gpu,
                           budget=37 * per_node + 5)
    assert chunks == M.Chunks(train=37, eval=(37 * per_node + 5) // per_eval_node)
    sam = M.plan_chunks(forward, params, (1, 28, 28), 1000, 32, 500, True, gpu,
                        budget=37 * per_node)
    assert sam.train == 37 * per_node // per_sam_node
    assert M.plan_chunks(forward, params, (1, 28, 28), 20, 32, 500, False, gpu,
                         budget=10**15) == M.Chunks(20, 20)
    assert M.plan_chunks(forward, params, (1, 28, 28), 1000, 32, 500, False,
                         torch.device("cpu"), budget=10**15).train == M.CPU_CHUNK
    assert M.plan_chunks(forward, params, (1, 28, 28), 1000, 32, 500, False, gpu,
                         budget=1) == M.Chunks(1, 1)


def test_cnn_probe_counts_more_than_its_input():
    forward, params = _one_node("cnn", (3, 32, 32))
    assert M.activation_bytes(forward, params, (3, 32, 32)) > 3 * 32 * 32 * 8 + 64 * 28 * 28 * 8


def test_free_bytes_is_positive():
    assert M.free_bytes(torch.device("cpu")) > 0


def _metrics_and_params(monkeypatch, out, budget: int | None) -> tuple[list, torch.Tensor, int]:
    if budget is not None:
        monkeypatch.setattr(M, "free_bytes", lambda device: budget)
    cfg = small_config(algorithm__name="dfedsgpsm", algorithm__momentum=0.9,
                       algorithm__rho=0.05, topology__name="random_out",
                       topology__k=2, data__num_nodes=7, rounds=2)
    ctx, algorithm = build(cfg)
    out.mkdir()
    history = Runner(cfg, out, ctx, algorithm).run()
    for record in history:
        record.pop("wall_s"), record.pop("eval_s")
    return history, ctx.population.flat.clone(), ctx.trainer.chunk_size


def test_memory_chunked_equals_unchunked(monkeypatch, tmp_path):
    whole, flat, chunk = _metrics_and_params(monkeypatch, tmp_path / "whole", None)
    assert chunk == 7  # all nodes: fewer than CPU_CHUNK
    small, small_flat, small_chunk = _metrics_and_params(monkeypatch, tmp_path / "chunked",
                                                          2 * 4 * 9 * 10**6)
    assert 1 < small_chunk < 7
    assert torch.allclose(flat, small_flat, rtol=0, atol=1e-12)
    assert [r["test_acc"] for r in whole] == [r["test_acc"] for r in small]
    assert all(abs(a["train_loss"] - b["train_loss"]) < 1e-12 for a, b in zip(whole, small))


def test_the_population_check_counts_the_mix_tile_not_a_second_population(monkeypatch):
    """On CPU the in-place mix holds one tile (TILE_BYTES), not a copy of the largest block: a
    population that fits beside its tile is built, one byte less free is refused."""
    from p2pfl.config import ConfigError
    from p2pfl.core.mixing import tile_width

    cfg = small_config(data__num_nodes=40)
    ctx, _ = build(cfg)
    rows, itemsize = 40, ctx.population.flat.element_size()
    largest = max(v[0].numel() for v in ctx.population.params.values())
    needed = (rows * ctx.population.num_params
              + rows * tile_width(rows, largest, torch.device("cpu"), itemsize)) * itemsize
    assert needed < 1.1 * rows * ctx.population.num_params * itemsize  # not two populations
    monkeypatch.setattr(M, "free_bytes", lambda device: needed)
    build(cfg)
    monkeypatch.setattr(M, "free_bytes", lambda device: needed - 1)
    try:
        build(cfg)
    except ConfigError as err:
        assert err.field == "data.num_nodes" and "mixing buffer" in err.message
    else:
        raise AssertionError("a population without room for its mix tile was built")


def test_a_mix_too_large_for_32_bit_offsets_goes_by_contiguous_tiles(monkeypatch):
    """Blocks of 2**31 values or more crash CPU CSR x dense products (32-bit offsets); they
    are mixed by contiguous copies of their tiles. Forced here on a small population, the
    results equal the plain path's."""
    import scipy.sparse as sp

    import p2pfl.core.mixing as X

    rng = torch.Generator().manual_seed(0)
    params = {"w": torch.randn(30, 7, 50, generator=rng, dtype=torch.float64),
              "b": torch.randn(30, 3, generator=rng, dtype=torch.float64)}
    W_np = sp.random(30, 30, density=0.2, random_state=1, format="csr") + sp.eye(30)
    comm = X.LocalComm(torch.device("cpu"), torch.float64, mixing="sparse")
    W = comm.matrix(W_np)
    assert W.layout == torch.sparse_csr
    expected = {k: torch.as_tensor(W_np.toarray()) @ v.reshape(30, -1) for k, v in params.items()}
    plain = {k: v.clone() for k, v in params.items()}
    comm.mix(W, plain)
    into = comm.product(W, params, {k: torch.zeros_like(v) for k, v in params.items()})
    monkeypatch.setattr(X, "INT32_ELEMENTS", 1)
    monkeypatch.setattr(X, "TILE_BYTES", 64 * 30 * 8 // 4)  # several tiles of 64 columns
    large = {k: v.clone() for k, v in params.items()}
    comm.mix(W, large)
    tiled = comm.product(W, params, {k: torch.ones_like(v) for k, v in params.items()},
                         add=True)
    for k in params:
        assert torch.allclose(plain[k].reshape(30, -1), expected[k], atol=1e-12)
        assert torch.equal(large[k], plain[k]) and torch.equal(into[k], plain[k])
        assert torch.allclose(tiled[k], plain[k] + 1, atol=1e-12)
