"""The processes of a distributed run: joining and leaving the process group, and agreeing
across ranks before anything is written (`agreed`): one rank's error stops every rank
(torchrun, or `p2pfl run --nproc R`; p2pfl.scale.distributed shards the population over
them)."""


from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from p2pfl.errors import ConfigError, PeerLost

TIMEOUT_ENV = "P2PFL_TIMEOUT_S"  # seconds a collective waits for the other ranks


DEFAULT_TIMEOUT_S = 300


def timeout_s() -> float:
    """How long a collective waits for a rank that does not answer ($P2PFL_TIMEOUT_S).

    Returns
    -------
    float, seconds.

    Raises
    ------
    ConfigError
        naming P2PFL_TIMEOUT_S unless it is a positive number.
    """
    value = os.environ.get(TIMEOUT_ENV, str(DEFAULT_TIMEOUT_S))
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(TIMEOUT_ENV, f"must be a number of seconds, got {value!r}") from None
    if seconds <= 0:
        raise ConfigError(TIMEOUT_ENV, f"must be positive, got {value!r}")
    return seconds


def init(device: torch.device) -> torch.device:
    """Join the process group of this launch.

    gloo on CPU, NCCL on CUDA (one GPU per rank, `LOCAL_RANK`), with gloo for the few CPU tensors:
    the agreement, the stop and checkpoint flags, the byte counts.

    Parameters
    ----------
    device : the configured device.

    Returns
    -------
    torch.device, the rank's device.

    Raises
    ------
    PeerLost
        when the other ranks cannot be joined.
    """
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        backend = "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"  # NCCL: CUDA only
        try:
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s()))
        except (RuntimeError, ValueError) as err:
            raise PeerLost(f"could not join the other ranks: {first_line(err)}") from None
        atexit.register(_leave)
    return device


def rank0_value(value: Any) -> Any:
    """Rank 0's `value` on every rank: a choice one rank makes for all.

    E.g. a default run directory named from rank 0's clock.

    Parameters
    ----------
    value : something picklable.

    Returns
    -------
    rank 0's value.

    Raises
    ------
    PeerLost
        when another rank is lost.
    """
    box = [value]
    try:
        dist.broadcast_object_list(box, src=0)
    except (RuntimeError, ValueError) as err:
        raise PeerLost(f"rank {dist.get_rank()} lost another rank while starting: "
                       f"{first_line(err)}") from None
    return box[0]


def _leave() -> None:
    """Leave the process group at exit (its threads must not outlive the interpreter)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def agree(error: BaseException | None) -> None:
    """Every rank reaches this point; if any failed, every rank raises.

    Parameters
    ----------
    error : this rank's error, or None.

    Raises
    ------
    BaseException
        on the first failed rank, its own error.
    AgreedError
        (a ConfigError) on the others, with that error's message.
    PeerLost
        when another rank is lost.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    failed = torch.tensor([world if error is None else rank])
    try:
        dist.all_reduce(failed, dist.ReduceOp.MIN)
        first = int(failed)
        if first == world:
            return
        message = [str(error) if error is not None else None]
        dist.broadcast_object_list(message, src=first)
    except (RuntimeError, ValueError) as err:
        raise PeerLost(f"rank {rank} lost another rank while starting: {first_line(err)}"
                       ) from None
    if error is not None and first == rank:
        raise error
    raise AgreedError(f"rank {first}", message[0])


class AgreedError(ConfigError):
    """Another rank's error, raised on the ranks that did not have it (the command prints it
    once, from the rank that had it)."""


@contextmanager
def agreed() -> Iterator[None]:
    """Run the block on every rank; an error on any rank is raised on all (`agree`) before any of
    them goes on. Nothing happens in a single process.

    Yields
    ------
    None.
    """
    if not dist.is_initialized():
        yield
        return
    try:
        yield
    except Exception as err:
        agree(err)
        raise
    agree(None)


def first_line(err: BaseException) -> str:
    """What went wrong, short: gloo's long messages about a closed peer in a few words.

    Parameters
    ----------
    err : the error.

    Returns
    -------
    str, at most 160 characters.
    """
    text = str(err)
    if "Connection closed by peer" in text or "Connection reset by peer" in text:
        return "another rank closed its connection (it ended or was killed)"
    if "Timed out" in text or "timed out" in text:
        return f"no answer within {timeout_s():g} s (${TIMEOUT_ENV})"
    return (text.strip().splitlines() or [type(err).__name__])[0][:160]
