"""Message compressors: what a node sends instead of a whole vector, and its exact size in bits.

A compressor is any object with three methods (the `Compressor` protocol):

    compress(rows, generator) -> payload    rows [m, d]: one message per row (a node's vector)
    decompress(payload) -> tensor           [m, d], the vectors the receivers reconstruct
    bits(payload) -> tensor                 int64 [m], the size of each row's message in bits

`generator` is a CPU `torch.Generator` drawn from (seed, "compress", round): random compressors
draw on the CPU and move the draws to the rows' device, so CPU and CUDA runs send the same
messages. A value costs the bits of the rows' dtype (32 for float32).

Built in (`COMPRESSORS`, the names `algorithm.compressor` takes):
- `TopK(fraction)`: the k = ceil(fraction * d) largest magnitudes, each sent as its value and its
  index (ceil(log2 d) bits). Biased; a contraction with delta = k / d.
- `RandomK(fraction, unbiased)`: k coordinates drawn uniformly without replacement; only the
  values travel with a 64-bit seed that names the coordinates. Unbiased when the values are
  scaled by d / k (`unbiased = True`); without the scaling a contraction with delta = k / d.
- `Sign()`: sign(x) with one scale ||x||_1 / d per row (d bits + one value; the scaled sign of
  Karimireddy et al. 2019). Biased.
- `QSGD(bits, unbiased)`: QSGD's stochastic quantization (Alistarh et al. 2017) with s = 2^bits
  - 1 levels: ||x||_2 * sign(x_i) * xi_i / s, xi_i in {l, l + 1} with E[xi_i] = s |x_i| / ||x||_2
  (one value for the norm, then a sign bit and `bits` level bits per coordinate). Unbiased;
  `unbiased = False` divides by tau = 1 + min(d / s^2, sqrt(d) / s), the rescaled form that is a
  contraction (what compressed gossip needs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

SEED_BITS = 64  # the seed that names random-k's coordinates


@runtime_checkable
class Compressor(Protocol):
    """What a compressed-gossip algorithm needs from a compressor (see the module docstring)."""

    def compress(self, rows: torch.Tensor, generator: torch.Generator) -> Any: ...

    def decompress(self, payload: Any) -> torch.Tensor: ...

    def bits(self, payload: Any) -> torch.Tensor: ...


@dataclass(frozen=True)
class Sparse:
    """k entries of each of m rows of width d."""

    values: torch.Tensor  # [m, k]
    indices: torch.Tensor  # int64 [m, k]
    width: int  # d


def _value_bits(values: torch.Tensor) -> int:
    return values.element_size() * 8


def _scatter(payload: Sparse) -> torch.Tensor:
    values = payload.values
    out = values.new_zeros(values.shape[0], payload.width)
    return out.scatter_(1, payload.indices, values)


def _count(fraction: float, d: int) -> int:
    return min(d, max(1, math.ceil(fraction * d)))


def _uniform(generator: torch.Generator, shape: tuple[int, ...], like: torch.Tensor
             ) -> torch.Tensor:
    """Uniform [0, 1) numbers drawn on the generator's device, moved to `like`'s."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=generator.device)
    return u.to(device=like.device, dtype=like.dtype)


def _check_fraction(fraction: float) -> None:
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")


@dataclass(frozen=True)
class TopK:
    """The ceil(fraction * d) largest magnitudes of each row, sent with their indices."""

    fraction: float = 0.01

    def __post_init__(self) -> None:
        _check_fraction(self.fraction)

    def compress(self, rows: torch.Tensor, generator: torch.Generator) -> Sparse:
        indices = rows.abs().topk(_count(self.fraction, rows.shape[1]), dim=1).indices
        return Sparse(rows.gather(1, indices), indices, rows.shape[1])

    def decompress(self, payload: Sparse) -> torch.Tensor:
        return _scatter(payload)

    def bits(self, payload: Sparse) -> torch.Tensor:
        m, k = payload.values.shape
        index_bits = max(1, math.ceil(math.log2(payload.width)))
        return torch.full((m,), k * (_value_bits(payload.values) + index_bits), dtype=torch.int64)


@dataclass(frozen=True)
class RandomK:
    """ceil(fraction * d) uniformly drawn coordinates of each row (scaled by d / k if unbiased);
    the receivers regenerate the coordinates from a seed sent with the values."""

    fraction: float = 0.01
    unbiased: bool = True

    def __post_init__(self) -> None:
        _check_fraction(self.fraction)

    def compress(self, rows: torch.Tensor, generator: torch.Generator) -> Sparse:
        m, d = rows.shape
        k = _count(self.fraction, d)
        indices = _uniform(generator, (m, d), rows).topk(k, dim=1).indices
        values = rows.gather(1, indices)
        return Sparse(values * (d / k) if self.unbiased else values, indices, d)

    def decompress(self, payload: Sparse) -> torch.Tensor:
        return _scatter(payload)

    def bits(self, payload: Sparse) -> torch.Tensor:
        m, k = payload.values.shape
        return torch.full((m,), k * _value_bits(payload.values) + SEED_BITS, dtype=torch.int64)


@dataclass(frozen=True)
class Signs:
    """Signs of m rows [m, d] (True: >= 0) and one scale per row [m]."""

    positive: torch.Tensor
    scale: torch.Tensor


@dataclass(frozen=True)
class Sign:
    """||x||_1 / d * sign(x) per row (a zero coordinate is sent as +)."""

    def compress(self, rows: torch.Tensor, generator: torch.Generator) -> Signs:
        return Signs(rows >= 0, rows.abs().mean(dim=1))

    def decompress(self, payload: Signs) -> torch.Tensor:
        signs = payload.positive.to(payload.scale.dtype) * 2 - 1
        return signs * payload.scale.unsqueeze(1)

    def bits(self, payload: Signs) -> torch.Tensor:
        m, d = payload.positive.shape
        return torch.full((m,), d + _value_bits(payload.scale), dtype=torch.int64)


@dataclass(frozen=True)
class Levels:
    """QSGD's message: the norm of each row [m], signs [m, d] and levels 0..s [m, d]."""

    norm: torch.Tensor
    positive: torch.Tensor
    levels: torch.Tensor  # int64
    scale: float  # 1 / (s * tau)


@dataclass(frozen=True)
class QSGD:
    """Stochastic quantization to s = 2^bits - 1 levels of |x_i| / ||x||_2 (see the module
    docstring); `unbiased = False` divides by tau (the contracting form)."""

    bits_per_level: int = 4
    unbiased: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.bits_per_level, int) and 1 <= self.bits_per_level <= 16):
            raise ValueError(f"bits_per_level must be an integer in 1..16, got "
                             f"{self.bits_per_level!r}")

    def compress(self, rows: torch.Tensor, generator: torch.Generator) -> Levels:
        s = 2**self.bits_per_level - 1
        d = rows.shape[1]
        norm = rows.norm(dim=1)
        level = s * rows.abs() / norm.clamp(min=torch.finfo(rows.dtype).tiny).unsqueeze(1)
        low = level.floor()
        up = _uniform(generator, tuple(rows.shape), rows) < level - low
        tau = 1.0 if self.unbiased else 1 + min(d / s**2, math.sqrt(d) / s)
        return Levels(norm, rows >= 0, (low + up).long(), 1.0 / (s * tau))

    def decompress(self, payload: Levels) -> torch.Tensor:
        norm = payload.norm
        signs = payload.positive.to(norm.dtype) * 2 - 1
        return signs * payload.levels.to(norm.dtype) * (norm * payload.scale).unsqueeze(1)

    def bits(self, payload: Levels) -> torch.Tensor:
        m, d = payload.levels.shape
        each = _value_bits(payload.norm) + d * (1 + self.bits_per_level)
        return torch.full((m,), each, dtype=torch.int64)


COMPRESSORS = ("top_k", "random_k", "sign", "qsgd")


def named_compressor(name: str, fraction: float, bits: int) -> Compressor:
    """The built-in compressor `name`.

    top-k / random-k keep `fraction` of the coordinates (random-k unscaled, a contraction as
    compressed gossip needs), QSGD quantizes to `bits` bits per level (the rescaled,
    contracting form).

    Parameters
    ----------
    name : one of COMPRESSORS.
    fraction : share of coordinates kept (top_k, random_k).
    bits : bits per level (qsgd).

    Returns
    -------
    Compressor.

    Raises
    ------
    ValueError
        for an unknown name.
    """
    if name == "top_k":
        return TopK(fraction)
    if name == "random_k":
        return RandomK(fraction, unbiased=False)
    if name == "sign":
        return Sign()
    if name == "qsgd":
        return QSGD(bits, unbiased=False)
    raise ValueError(f"unknown compressor {name!r}; allowed: {', '.join(COMPRESSORS)}")


def check_compressor(compressor: object) -> None:
    """Check that an object can serve as a compressor.

    Parameters
    ----------
    compressor : the object.

    Raises
    ------
    TypeError
        naming the methods it lacks among compress, decompress and bits.
    """
    missing = [name for name in ("compress", "decompress", "bits")
               if not callable(getattr(compressor, name, None))]
    if missing:
        raise TypeError(f"a compressor needs the methods compress(rows, generator), "
                        f"decompress(payload) and bits(payload); {type(compressor).__name__} "
                        f"lacks {', '.join(missing)}")
