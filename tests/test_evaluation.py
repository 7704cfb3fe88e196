"""The evaluation's numbers against direct computation: accuracy and loss of stacked models,
consensus distance, and the same in bf16 mixed precision."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from p2pfl.core.metrics import evaluate, squared_distance
from p2pfl.core.models import MLP, mixed_precision, stacked_forward


def test_squared_distance_by_hand() -> None:
    models = {"w": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([[0.0], [2.0]])}
    average = {"w": torch.tensor([2.0, 3.0]), "b": torch.tensor([1.0])}
    total = squared_distance(models, average)
    assert total.dtype == torch.float64 and total.item() == 6.0  # each node: 1 + 1 + 1


@pytest.mark.parametrize("chunk", [1, 2, 3])
@pytest.mark.parametrize("batch", [7, 50])
def test_evaluate_equals_each_model_on_its_own(chunk: int, batch: int) -> None:
    torch.manual_seed(0)
    model = MLP(784, 10)
    forward = stacked_forward(model)
    models = {k: v.detach().unsqueeze(0).repeat(3, *[1] * v.dim()) + 0.05 * torch.randn(
        3, *v.shape) for k, v in model.named_parameters()}
    x, y = torch.randn(50, 1, 28, 28), torch.randint(0, 10, (50,))
    acc, loss = evaluate(forward, models, x, y, batch, chunk)
    for i in range(3):
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(models[k][i])
            logits = model(x)
        assert acc[i].item() == pytest.approx((logits.argmax(1) == y).float().mean().item())
        assert loss[i].item() == pytest.approx(F.cross_entropy(logits, y).item(), rel=1e-5)


def test_evaluate_in_bf16_is_close_to_fp32_and_not_equal() -> None:
    torch.manual_seed(0)
    model = MLP(784, 10)
    models = {k: v.detach().unsqueeze(0).repeat(2, *[1] * v.dim())
              for k, v in model.named_parameters()}
    x, y = torch.randn(200, 1, 28, 28), torch.randint(0, 10, (200,))
    _, loss32 = evaluate(stacked_forward(model), models, x, y, 100, 2)
    _, loss16 = evaluate(mixed_precision(stacked_forward(model), "cpu"), models, x, y, 100, 2)
    assert 0 < abs(loss16[0].item() - loss32[0].item()) < 1e-2 * loss32[0].item()
