"""The vectorized population against the per-node loop reference, and the local solver."""

from __future__ import annotations

import pytest
import torch

from p2pfl.engine import build
from tests.conftest import play, small_config


def _one_round(executor: str, rounds: int = 1, **overrides) -> dict[str, torch.Tensor]:
    ctx, algorithm = build(small_config(engine__executor=executor, **overrides))
    for t in range(rounds):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    return {k: v.clone() for k, v in ctx.population.params.items()}


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_vectorized_equals_loop_float32_sgd():
    kwargs = {"engine__dtype": "float32", "algorithm__local_steps": 5}
    diff = _max_diff(_one_round("vectorized", **kwargs), _one_round("loop", **kwargs))
    assert diff < 1e-5


@pytest.mark.parametrize("algorithm, solver", [
    ("dfedavgm", {"algorithm__momentum": 0.9, "algorithm__weight_decay": 1e-3}),
    ("dfedsam", {"algorithm__rho": 0.05}),
    ("dfedsgpsm", {"algorithm__momentum": 0.9, "algorithm__weight_decay": 1e-3}),
    ("dfedsgpsm", {"algorithm__rho": 0.05}),
    ("dfedsgpsm", {"algorithm__rho": 0.05, "algorithm__momentum": 0.5,
                   "algorithm__clip_norm": 0.5}),
])
def test_vectorized_equals_loop_float64(solver, algorithm):
    kwargs = {"algorithm__name": algorithm, "topology__name": "ring", **solver}
    if algorithm == "dfedsgpsm":
        kwargs.update(topology__name="random_out", topology__k=2)
    diff = _max_diff(_one_round("vectorized", 2, **kwargs), _one_round("loop", 2, **kwargs))
    assert diff < 1e-10


def test_vectorized_equals_loop_cnn_with_chunks():
    kwargs = {"model__name": "cnn", "data__num_nodes": 3, "algorithm__local_steps": 2,
              "algorithm__batch_size": 4, "engine__chunk_size": 2, "algorithm__rho": 0.01,
              "algorithm__name": "dfedsam"}
    diff = _max_diff(_one_round("vectorized", **kwargs), _one_round("loop", **kwargs))
    assert diff < 1e-10


def test_chunk_size_does_not_change_results():
    a = _one_round("vectorized", engine__chunk_size=1)
    b = _one_round("vectorized", engine__chunk_size=6)
    assert _max_diff(a, b) < 1e-12


def test_training_changes_every_node_and_lowers_loss():
    ctx, algorithm = build(small_config(algorithm__local_steps=20))
    before = ctx.population.flat.clone()
    first = play(algorithm, ctx, 0, ctx.schedule.at(0))
    assert (ctx.population.flat != before).any()
    later = play(algorithm, ctx, 1, ctx.schedule.at(1))
    assert later.losses.mean() < first.losses.mean()


def test_sam_with_zero_radius_is_sgd():
    a = _one_round("vectorized", algorithm__name="dfedsam", algorithm__rho=0.0)
    b = _one_round("vectorized", algorithm__name="dfedsam", algorithm__rho=1e-300)
    assert _max_diff(a, b) < 1e-12
    c = _one_round("vectorized", algorithm__name="dfedsam", algorithm__rho=0.5)
    assert _max_diff(a, c) > 1e-6



@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inside torch's inductor
def test_compiled_equals_eager():
    kwargs = {"engine__dtype": "float32", "algorithm__name": "dfedsgpsm",
              "algorithm__momentum": 0.9, "algorithm__rho": 0.05, "topology__name": "random_out",
              "topology__k": 2}
    eager = _one_round("vectorized", 2, **kwargs)
    torch._dynamo.reset()
    compiled = _one_round("vectorized", 2, engine__compile=True, **kwargs)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # it did compile
    assert _max_diff(eager, compiled) < 1e-5


def test_compile_with_the_loop_executor_is_refused():
    from p2pfl.config import ConfigError

    with pytest.raises(ConfigError, match="engine.compile"):
        small_config(engine__executor="loop", engine__compile=True)


BF16_CASES = {
    "sgd": {},
    "sam+momentum": {"algorithm__name": "dfedsgpsm", "algorithm__rho": 0.05,
                     "algorithm__momentum": 0.9, "topology__name": "random_out",
                     "topology__k": 2},
    # one step: different convolution kernels round differently and ReLU flips grow from there
    "cnn": {"model__name": "cnn", "data__num_nodes": 3, "algorithm__batch_size": 32,
            "algorithm__local_steps": 1},
}


def _update_error(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor],
                  start: dict[str, torch.Tensor]) -> float:
    """max over tensors of ||a - b|| / ||a - start||: the error of b's round update."""
    return max(((a[k] - b[k]).norm() / (a[k] - start[k]).norm()).item() for k in a)


@pytest.mark.parametrize("case", BF16_CASES)
def test_bf16_is_bfloat16_and_equals_the_loop_executors_bf16(case: str) -> None:
    """engine.precision = "bf16": a round's update differs from float32's by bfloat16 rounding
    (more than 1e-3, under 20 % relative), parameters stay float32, and the vectorized
    population agrees with plain modules under torch.autocast ten times more closely than
    either agrees with float32."""
    kwargs = {"engine__dtype": "float32", "algorithm__local_steps": 5, **BF16_CASES[case]}
    ctx, _ = build(small_config(**kwargs))
    start = {k: v.clone() for k, v in ctx.population.params.items()}
    fp32 = _one_round("vectorized", **kwargs)
    bf16 = _one_round("vectorized", engine__precision="bf16", **kwargs)
    loop_bf16 = _one_round("loop", engine__precision="bf16", **kwargs)
    assert all(v.dtype == torch.float32 for v in bf16.values())
    error = _update_error(fp32, bf16, start)
    assert 1e-3 < error < 0.2
    assert _update_error(bf16, loop_bf16, start) < 0.1 * error
    if case != "cnn":  # the same products: equal up to the CPU kernels' float32 rounding
        assert _max_diff(bf16, loop_bf16) < 1e-4


def test_bf16_needs_float32_master_parameters() -> None:
    from p2pfl.config import ConfigError

    with pytest.raises(ConfigError, match="engine.precision: bf16 mixed precision keeps float32"):
        small_config(engine__precision="bf16")  # small_config runs float64
    with pytest.raises(ConfigError, match="unknown value 'fp16'"):
        small_config(engine__dtype="float32", engine__precision="fp16")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_cuda_round_equals_the_cpu_round(precision: str) -> None:
    """The same round on the GPU: float32 within 1e-5 of the CPU's, bf16 within bfloat16
    rounding (its update error under 20 %, as against float32 on one device)."""
    kwargs = {"engine__dtype": "float32", "algorithm__local_steps": 5,
              "engine__precision": precision, **BF16_CASES["sam+momentum"]}
    ctx, _ = build(small_config(**kwargs))
    start = {k: v.clone() for k, v in ctx.population.params.items()}
    cpu = _one_round("vectorized", **kwargs)
    gpu = {k: v.cpu() for k, v in _one_round("vectorized", device="cuda", **kwargs).items()}
    if precision == "fp32":
        assert _max_diff(cpu, gpu) < 1e-5
    else:
        assert _update_error(cpu, gpu, start) < 0.2
