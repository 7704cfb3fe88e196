"""Named random streams derived from the run seed.

Every random draw of a run comes from a generator built here from (seed, stream, *keys), e.g.
(seed, "batches", t) for the minibatches of round t, so a draw never depends on what ran before it:
chunking, resuming or skipping evaluation cannot change the numbers.
"""

from __future__ import annotations

import numpy as np
import torch

STREAMS = {"partition": 1, "init": 2, "batches": 3, "topology": 4, "participation": 5, "eval": 6,
           "faults": 7, "network": 8, "compress": 9, "gossip": 10, "byzantine": 11,
           "privacy": 12}


def stream_seed(seed: int, stream: str, *keys: int) -> int:
    """A 63-bit integer seed for `stream` and integer keys such as the round.

    Parameters
    ----------
    seed : the run's seed.
    stream : one of STREAMS.
    *keys : integers that pick the draw (round, node, ...).

    Returns
    -------
    int in [0, 2**63).
    """
    state = np.random.SeedSequence([seed, STREAMS[stream], *keys]).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def numpy_rng(seed: int, stream: str, *keys: int) -> np.random.Generator:
    """A numpy Generator seeded by `stream_seed(seed, stream, *keys)`.

    Parameters
    ----------
    seed : the run's seed.
    stream : one of STREAMS.
    *keys : integers that pick the draw (round, node, ...).

    Returns
    -------
    np.random.Generator.
    """
    return np.random.default_rng(stream_seed(seed, stream, *keys))


def torch_generator(seed: int, stream: str, *keys: int) -> torch.Generator:
    """A CPU generator seeded by `stream_seed(seed, stream, *keys)`.

    Draws are made on the CPU so CPU and CUDA runs see the same numbers.

    Parameters
    ----------
    seed : the run's seed.
    stream : one of STREAMS.
    *keys : integers that pick the draw (round, node, ...).

    Returns
    -------
    torch.Generator on the CPU.
    """
    gen = torch.Generator(device="cpu")
    gen.manual_seed(stream_seed(seed, stream, *keys))
    return gen
