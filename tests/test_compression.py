"""Message compressors: what each sends (hand-checked), exact bit counts, the unbiasedness of the
random ones over many draws, and the contraction CHOCO-SGD needs of the biased forms."""

from __future__ import annotations

import math

import pytest
import torch

from p2pfl.core.compression import (
    QSGD,
    Compressor,
    RandomK,
    Sign,
    TopK,
    check_compressor,
    named_compressor,
)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def roundtrip(compressor: Compressor, rows: torch.Tensor, seed: int = 0) -> torch.Tensor:
    return compressor.decompress(compressor.compress(rows, generator(seed)))


def test_top_k_keeps_the_largest_magnitudes_of_each_row():
    rows = torch.tensor([[0.1, -3.0, 2.0, 0.5], [4.0, 0.0, -0.2, -5.0]], dtype=torch.float64)
    sent = roundtrip(TopK(0.5), rows)
    expected = torch.tensor([[0.0, -3.0, 2.0, 0.0], [4.0, 0.0, 0.0, -5.0]], dtype=torch.float64)
    torch.testing.assert_close(sent, expected, rtol=0, atol=0)
    assert TopK(0.3).compress(rows, generator()).values.shape == (2, 2)  # ceil(0.3 * 4)


def test_sign_sends_the_sign_times_the_mean_magnitude():
    rows = torch.tensor([[1.0, -2.0, 0.0, 5.0]], dtype=torch.float64)
    torch.testing.assert_close(roundtrip(Sign(), rows),
                               torch.tensor([[2.0, -2.0, 2.0, 2.0]], dtype=torch.float64))


def test_qsgd_is_exact_on_a_level_and_sends_levels_in_range():
    rows = torch.tensor([[0.0, -3.0, 0.0, 4.0]], dtype=torch.float64)  # |x| / ||x|| = 0.6, 0.8
    q = QSGD(bits_per_level=2)  # s = 3: 0.6 * 3 = 1.8 -> level 1 or 2
    payload = q.compress(rows.expand(1000, 4), generator())
    assert payload.levels.min() >= 0 and payload.levels.max() <= 3
    assert set(payload.levels[:, 1].tolist()) == {1, 2}
    one_hot = torch.tensor([[0.0, -2.5, 0.0]], dtype=torch.float64)  # level s exactly
    torch.testing.assert_close(roundtrip(q, one_hot), one_hot, rtol=0, atol=1e-15)


@pytest.mark.parametrize(("compressor", "dtype", "bits"), [
    (TopK(0.01), torch.float32, 10 * (32 + 10)),  # k = 10 values, each with a 10-bit index
    (TopK(0.01), torch.float64, 10 * (64 + 10)),
    (RandomK(0.01), torch.float32, 10 * 32 + 64),  # values and one 64-bit seed
    (RandomK(0.005, unbiased=False), torch.float64, 5 * 64 + 64),
    (Sign(), torch.float32, 1000 + 32),  # a bit per coordinate and the scale
    (QSGD(4), torch.float32, 32 + 1000 * (1 + 4)),  # the norm, then sign and level bits
    (QSGD(2, unbiased=False), torch.float64, 64 + 1000 * 3),
])
def test_each_message_has_its_exact_size_in_bits(compressor, dtype, bits):
    rows = torch.randn(3, 1000, generator=generator(1), dtype=dtype)
    sizes = compressor.bits(compressor.compress(rows, generator()))
    assert sizes.dtype == torch.int64
    assert sizes.tolist() == [bits] * 3


@pytest.mark.parametrize("compressor", [RandomK(0.1), QSGD(2)])
def test_the_unbiased_random_compressors_average_to_the_vector(compressor):
    """20000 draws of one vector (d = 40): every coordinate's mean is within 5 standard errors
    (the largest coordinate's) of the vector, and the draws do vary (an average, not a copy)."""
    x = torch.randn(1, 40, generator=generator(2), dtype=torch.float64)
    draws = roundtrip(compressor, x.expand(20000, 40), seed=3)
    error = (draws.mean(0) - x[0]).abs()
    stderr = draws.std(0).max() / math.sqrt(len(draws))
    assert (draws.std(0) > 0).sum() > 30
    assert torch.all(error <= 5 * stderr)


@pytest.mark.parametrize(("compressor", "shrink"), [
    (RandomK(0.1, unbiased=False), 0.1),  # E[Q(x)] = k / d x
    (QSGD(2, unbiased=False), 1 / (1 + min(40 / 9, math.sqrt(40) / 3))),  # E[Q(x)] = x / tau
])
def test_the_contracting_forms_are_biased_by_their_known_factor(compressor, shrink):
    x = torch.randn(1, 40, generator=generator(2), dtype=torch.float64)
    draws = roundtrip(compressor, x.expand(20000, 40), seed=3)
    stderr = draws.std(0).max() / math.sqrt(len(draws))
    assert torch.all((draws.mean(0) - shrink * x[0]).abs() <= 5 * stderr)


@pytest.mark.parametrize("compressor", [TopK(0.01), RandomK(0.01, unbiased=False), Sign(),
                                        QSGD(4, unbiased=False)])
def test_the_compressors_choco_uses_contract(compressor):
    """CHOCO-SGD's assumption: E ||Q(x) - x||^2 <= (1 - delta) ||x||^2 with delta > 0 (averaged
    over 200 draws of each of 8 vectors, d = 1000)."""
    x = torch.randn(8, 1000, generator=generator(4), dtype=torch.float64)
    rows = x.repeat(200, 1)
    residual = (roundtrip(compressor, rows) - rows).square().sum(1).view(200, 8).mean(0)
    assert torch.all(residual < x.square().sum(1))


def test_the_same_generator_state_sends_the_same_message():
    rows = torch.randn(4, 300, generator=generator(5))
    for compressor in (RandomK(0.1), QSGD(3)):
        torch.testing.assert_close(roundtrip(compressor, rows, seed=9),
                                   roundtrip(compressor, rows, seed=9), rtol=0, atol=0)
        assert not torch.equal(roundtrip(compressor, rows, seed=9),
                               roundtrip(compressor, rows, seed=10))


def test_names_and_bad_compressors_are_refused_by_name():
    assert named_compressor("random_k", 0.1, 4) == RandomK(0.1, unbiased=False)
    assert named_compressor("qsgd", 0.1, 3) == QSGD(3, unbiased=False)
    with pytest.raises(ValueError, match="unknown compressor 'top1'"):
        named_compressor("top1", 0.1, 4)
    with pytest.raises(ValueError, match="fraction must be in"):
        TopK(0.0)
    with pytest.raises(ValueError, match="bits_per_level must be an integer"):
        QSGD(0)

    class NoSize:
        def compress(self, rows, generator):
            return rows

        def decompress(self, payload):
            return payload

    with pytest.raises(TypeError, match="NoSize lacks bits"):
        check_compressor(NoSize())
