"""How many nodes to process at once: chunk sizes from the free device memory and the model.

A chunk of c nodes training at batch B holds, besides the population itself, per node:
- `STEP_COPIES` parameter-sized tensors (gradient, momentum buffer, step temporaries; SAM adds
  the perturbation and the second gradient),
- the activations autograd saves for the backward pass, B times the saved bytes per sample,
  counted on a probe (batch 2 minus batch 1, so parameters saved by reference do not count),
  doubled for the gradients of those activations alive during the backward pass.
Evaluation holds, per node, at most the same activations for each sample of its batch.

The chunk uses at most `MEMORY_FRACTION` of the memory free when the run is built. On CPU the
train chunk is also capped at `CPU_CHUNK`: chunks that stay in cache are faster (perf-notes.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from p2pfl.core.models import StackedForward
from p2pfl.core.population import Params
from p2pfl.errors import ConfigError

CPU_CHUNK = 10  # nodes per train chunk on CPU: all K steps of a chunk stay in cache
MEMORY_FRACTION = 0.5  # of the free memory, the most the chunks may use
STEP_COPIES = 4  # parameter-sized tensors per node of a plain (SGD, momentum) local step
SAM_COPIES = 3  # more for SAM: perturbation, second gradient, its temporary
RAGGED_COPIES = 1  # unequal local datasets: the chunk is trained as a copy in step order
BACKWARD_FACTOR = 2  # saved activations + their gradients during the backward pass


def check_fits(field: str, what: str, needed: int, device: torch.device) -> None:
    """Refuse, before allocating, `needed` bytes of `what` that exceed the free memory of `device`.

    Parameters
    ----------
    field : the config field that sets the size (dotted).
    what : what would be allocated, for the message.
    needed : bytes.
    device : where.

    Raises
    ------
    ConfigError
        naming `field`, with the GiB needed and free.
    """
    free = free_bytes(device)
    if needed > free:
        raise ConfigError(field, f"{what} needs {needed / 2**30:.3g} GiB, more than the "
                          f"{free / 2**30:.3g} GiB free on {device.type}")


def free_bytes(device: torch.device) -> int:
    """Bytes that can still be allocated on `device`.

    Parameters
    ----------
    device : a CUDA or CPU device.

    Returns
    -------
    int; CUDA: free + cached by torch; CPU: the kernel's MemAvailable (else available pages).
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _saved_bytes(forward: StackedForward, params: Params, x: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd saves in one forward pass of `params` on x."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward(leaves, x)
    return sum(storages.values())


def activation_bytes(forward: StackedForward, model: Params,
                     input_shape: tuple[int, ...]) -> int:
    """Bytes autograd saves per training sample of one node (input included).

    Also an upper bound on the per-sample memory of a forward pass without autograd.

    Parameters
    ----------
    forward : the stacked forward.
    model : name -> [1, *shape] on the run's device and dtype.
    input_shape : one sample's shape.

    Returns
    -------
    int, bytes per sample (>= 0).
    """
    first = next(iter(model.values()))
    probe = [torch.zeros(1, b, *input_shape, device=first.device, dtype=first.dtype)
             for b in (2, 4)]  # not 1: batch statistics (BatchNorm without running ones) need 2
    more = _saved_bytes(forward, model, probe[1]) - _saved_bytes(forward, model, probe[0])
    return max(0, -(-more // 2))


@dataclass(frozen=True)
class Chunks:
    """Nodes per chunk in the local phase (`train`) and in evaluation (`eval`)."""

    train: int
    eval: int


def plan_chunks(forward: StackedForward, model: Params, input_shape: tuple[int, ...],
                num_nodes: int, batch_size: int, eval_batch_size: int, sam: bool,
                device: torch.device, budget: int | None = None, ragged: bool = False) -> Chunks:
    """Chunk sizes for `num_nodes` nodes of `model` that fit in `budget` bytes.

    Parameters
    ----------
    forward : the stacked forward.
    model : name -> [1, *shape] on the run's device and dtype.
    input_shape : one sample's shape.
    num_nodes : nodes of the population.
    batch_size : training batch size.
    eval_batch_size : evaluation batch size.
    sam : whether the step is SAM (SAM_COPIES more copies per node).
    device : the run's device.
    budget : bytes (default: MEMORY_FRACTION of the free memory of `device`).
    ragged : whether nodes take different numbers of steps (RAGGED_COPIES more).

    Returns
    -------
    Chunks (train, eval), each in [1, num_nodes]; train at most CPU_CHUNK on CPU.
    """
    if budget is None:
        budget = int(MEMORY_FRACTION * free_bytes(device))
    first = next(iter(model.values()))
    param_bytes = sum(v.numel() for v in model.values()) * first.element_size()
    saved = activation_bytes(forward, model, input_shape)
    copies = STEP_COPIES + (SAM_COPIES if sam else 0) + (RAGGED_COPIES if ragged else 0)
    per_train_node = copies * param_bytes + BACKWARD_FACTOR * saved * batch_size
    per_eval_node = param_bytes + saved * eval_batch_size
    train = max(1, min(num_nodes, budget // per_train_node))
    if device.type == "cpu":
        train = min(train, CPU_CHUNK)
    return Chunks(train=int(train), eval=int(max(1, min(num_nodes, budget // per_eval_node))))
