"""FLOP counting of one training step, and the machine's measured matmul rate.

Counting rule (FLOPs = 2 x multiply-adds; only Linear and Conv2d layers are counted, not
activations, normalisation, pooling, the loss or the optimizer update):

- forward of a layer: F_l = 2 x in_features x out_features (Linear), or
  2 x (in_channels / groups) x kh x kw x (numel of its output) (Conv2d), per sample;
- backward of a layer: F_l for the weight gradient plus F_l for the input gradient, except for
  the first layer run on the data, whose input gradient is not computed (the data needs none);
- one gradient of one sample: sum_l 3 F_l - F_first. A SAM step takes two gradients.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn


def layer_flops(model: nn.Module, input_shape: tuple[int, ...]) -> list[tuple[str, float]]:
    """Forward FLOPs of one sample in each Linear/Conv2d layer, in the order the layers run.

    Parameters
    ----------
    model : the module.
    input_shape : one sample's shape.

    Returns
    -------
    list of (layer name, FLOPs).
    """
    counted: list[tuple[str, float]] = []
    names = {module: name for name, module in model.named_modules()}

    def count(module: nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
        if isinstance(module, nn.Linear):
            counted.append((names[module], 2.0 * module.in_features * module.out_features))
        elif isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            k = module.in_channels // module.groups * kh * kw
            counted.append((names[module], 2.0 * k * output[0].numel()))

    hooks = [m.register_forward_hook(count) for m in model.modules()]
    try:
        param = next(model.parameters())
        with torch.no_grad():
            model(torch.zeros(1, *input_shape, device=param.device, dtype=param.dtype))
    finally:
        for h in hooks:
            h.remove()
    return counted


def forward_flops_per_sample(model: nn.Module, input_shape: tuple[int, ...]) -> float:
    """FLOPs of one forward pass of one sample (Linear and Conv2d layers).

    Parameters
    ----------
    model : the module.
    input_shape : one sample's shape.

    Returns
    -------
    float.
    """
    return sum(f for _, f in layer_flops(model, input_shape))


def gradient_flops_per_sample(model: nn.Module, input_shape: tuple[int, ...]) -> float:
    """FLOPs of one forward + backward pass of one sample: sum 3 F_l - F_first.

    Parameters
    ----------
    model : the module.
    input_shape : one sample's shape.

    Returns
    -------
    float (0 without Linear or Conv2d layers).
    """
    layers = layer_flops(model, input_shape)
    if not layers:
        return 0.0
    return 3 * sum(f for _, f in layers) - layers[0][1]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (a no-op on CPU).

    Parameters
    ----------
    device : the device.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(device: torch.device, size: int | None = None, repeats: int = 10,
                  dtype: torch.dtype = torch.float32) -> float:
    """The device's matmul rate in `dtype` now: median of `repeats` square products.

    Parameters
    ----------
    device : the device.
    size : the matrices' side; default 2048 on CPU, 8192 on CUDA (large enough to saturate the
        GPU).
    repeats : products timed.
    dtype : the matrices' dtype.

    Returns
    -------
    float, GFLOP/s.
    """
    size = size or (8192 if device.type == "cuda" else 2048)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    torch.mm(a, b, out=out)
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        synchronize(device)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def products_gflops(model: nn.Module, input_shape: tuple[int, ...], num_nodes: int,
                    chunk: int, steps: int, batch: int, device: torch.device,
                    repeats: int = 3) -> float | None:
    """The rate of a round's batched products alone, for a model of Linear layers only.

    For each chunk of `chunk` of the `num_nodes` nodes and each of `steps` steps, every layer's
    forward product, weight-gradient product (accumulated into a momentum-like buffer, as the
    round does) and input-gradient product (not for the first layer), with every node's own
    weights, batch `batch`; median of `repeats` such rounds. This is the ceiling of the round at
    the bench's sizes: its products with nothing else.

    Parameters
    ----------
    model : the module.
    input_shape : one sample's shape.
    num_nodes : N.
    chunk : nodes a chunk.
    steps : local steps.
    batch : batch size.
    device : the device.
    repeats : rounds timed.

    Returns
    -------
    float, GFLOP/s; None for a model with anything but Linear layers.
    """
    layers = [m for m in model.modules() if isinstance(m, nn.Linear | nn.Conv2d)]
    if not layers or any(isinstance(m, nn.Conv2d) for m in layers):
        return None
    new = {"device": device, "dtype": torch.float32}
    weights = [torch.randn(num_nodes, m.out_features, m.in_features, **new) * 0.01
               for m in layers]
    buffers = [torch.zeros_like(w) for w in weights]
    x = torch.randn(num_nodes, steps, batch, layers[0].in_features, **new)

    def step(rows: slice, k: int) -> None:
        hs = [x[rows, k]]
        for w in weights:
            hs.append(torch.bmm(hs[-1], w[rows].transpose(1, 2)))
        grad = hs.pop()
        for i in reversed(range(len(weights))):
            torch.baddbmm(buffers[i][rows], grad.transpose(1, 2), hs[i], beta=0.9,
                          out=buffers[i][rows])
            if i > 0:
                grad = torch.bmm(grad, weights[i][rows])

    def one_round() -> float:
        synchronize(device)
        start = time.perf_counter()
        for first in range(0, num_nodes, chunk):
            for k in range(steps):
                step(slice(first, min(first + chunk, num_nodes)), k)
        synchronize(device)
        return time.perf_counter() - start

    one_round()
    seconds = statistics.median(one_round() for _ in range(repeats))
    flops = num_nodes * steps * batch * gradient_flops_per_sample(model, input_shape)
    return flops / seconds / 1e9
