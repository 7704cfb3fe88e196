"""A model handed to p2pfl.run as a torch.nn.Module: it is what trains (in the vectorized
population), model.json records it, and a resume needs the same one."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from p2pfl import engine
from p2pfl.config import ConfigError
from p2pfl.engine import build
from p2pfl.objects import resolve
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import assert_resume_needs_the_same, skip_plots, small_config


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch):
    skip_plots(monkeypatch)


class Tiny(nn.Module):
    """A model of one's own: 28x28 inputs -> 16 tanh units with a LayerNorm -> 10 logits."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.LayerNorm(16), nn.Tanh())
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _cfg(**overrides):
    return small_config(**{"rounds": 3, **overrides})


def test_the_module_is_what_trains_and_is_recorded(tmp_path):
    out = tmp_path / "run"
    model = Tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    engine.run(_cfg(), out, model=model)
    assert json.loads((out / "config.json").read_text())["model"]["name"] == "object"
    record = json.loads((out / "model.json").read_text())
    assert record["class"].endswith("Tiny") and record["num_params"] == 784 * 16 + 16 + 32 + 170
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # not mutated
    cfg, parts = resolve(_cfg(), tmp_path / "x", False, model=model)
    ctx, _ = build(cfg, None, parts)
    assert ctx.population.num_params == record["num_params"]
    for k, v in model.named_parameters():  # every node starts from the module's own weights
        torch.testing.assert_close(ctx.population.params[k][3], v.to(torch.float64))


def test_the_vectorized_population_equals_the_loop_on_a_module(tmp_path):
    vec, loop = tmp_path / "vec", tmp_path / "loop"
    engine.run(_cfg(), vec, model=Tiny())
    engine.run(_cfg(engine__executor="loop"), loop, model=Tiny())
    for a, b in zip(read_metrics(vec / METRICS), read_metrics(loop / METRICS)):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-9)
        assert a["test_acc"] == pytest.approx(b["test_acc"], abs=1e-12)


def test_resume_needs_the_same_module(tmp_path):
    assert_resume_needs_the_same(tmp_path, _cfg(), "model", Tiny(), Tiny(seed=1),
                                 "never imports code: pass it again", "differs from the one")


@pytest.mark.parametrize("model, match", [
    (nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.BatchNorm1d(10)), "GroupNorm"),
    (nn.Sequential(nn.Flatten(), nn.Linear(784, 7)), r"\[2, 7\]; expected \[2, 10\]"),
    (nn.Sequential(nn.Linear(5, 10)), "failed on a batch of shape"),
    ("mlp", "expected a torch.nn.Module"),
])
def test_bad_models_are_one_line_errors(tmp_path, model, match):
    with pytest.raises(ConfigError, match=match) as err:
        engine.run(_cfg(), tmp_path / "run", model=model)
    assert "\n" not in str(err.value)
