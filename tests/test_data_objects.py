"""Data and a partition handed to p2pfl.run as Python objects: they are what trains, data.json
records their fingerprint, and a resume needs the same ones."""

from __future__ import annotations

import json

import pytest
import torch

from p2pfl import engine
from p2pfl.config import ConfigError
from p2pfl.core.seeding import stream_seed
from p2pfl.data import load_dataset
from p2pfl.objects import resolve
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import assert_resume_needs_the_same, skip_plots, small_config, strip_times


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch):
    skip_plots(monkeypatch)


def _tensors(seed: int = 0):
    """One Gaussian blob per class, as 1x28x28 images: 4 classes, 240 train / 80 test."""
    g = torch.Generator().manual_seed(seed)
    y_train, y_test = torch.arange(240) % 4, torch.arange(80) % 4
    centers = torch.randn(4, 1, 28, 28, generator=g)
    x_train = centers[y_train] + 0.5 * torch.randn(240, 1, 28, 28, generator=g)
    x_test = centers[y_test] + 0.5 * torch.randn(80, 1, 28, 28, generator=g)
    return x_train, y_train, x_test, y_test


def _cfg(**overrides):
    return small_config(**{"rounds": 3, "data__synthetic_train": 2000,
                           "data__synthetic_test": 500, "data__alpha": 0.3,
                           "algorithm__name": "osgp", "topology__name": "exponential",
                           **overrides})


def test_tensors_equal_the_same_dataset_loaded_by_name(tmp_path):
    cfg = _cfg(data__synthetic_train=2000, data__synthetic_test=500)  # the defaults
    d = cfg.data
    named = load_dataset("synthetic", seed=stream_seed(cfg.seed, "partition"),
                         synthetic_train=d.synthetic_train, synthetic_test=d.synthetic_test)
    engine.run(cfg, tmp_path / "named")
    engine.run(cfg, tmp_path / "object",
               data=(named.x_train, named.y_train, named.x_test, named.y_test))
    assert json.loads((tmp_path / "object" / "config.json").read_text())["data"]["name"] \
        == "object"
    record = json.loads((tmp_path / "object" / "data.json").read_text())
    assert record["num_train"] == d.synthetic_train and record["num_classes"] == 10
    assert strip_times(read_metrics(tmp_path / "object" / METRICS)) == \
        strip_times(read_metrics(tmp_path / "named" / METRICS))


def test_an_own_partition_is_what_each_node_trains_on(tmp_path):
    x_train, y_train, x_test, y_test = _tensors()
    # node i holds only class i % 4: 30 samples each
    rows = [torch.nonzero(y_train == (i % 4)).flatten()[(i // 4) * 30:(i // 4 + 1) * 30]
            for i in range(6)]
    cfg, parts = resolve(_cfg(), tmp_path, False, data=(x_train, y_train, x_test, y_test),
                                partition=rows)
    ctx, _ = engine.build(cfg, None, parts)
    for i in range(6):
        assert set(ctx.data.y_train[ctx.data.node_indices(i)].tolist()) == {i % 4}
    engine.run(_cfg(), tmp_path / "run", data=(x_train, y_train, x_test, y_test), partition=rows)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["data"]["partition"] \
        == "object"


def test_resume_needs_the_same_data(tmp_path):
    assert_resume_needs_the_same(tmp_path, _cfg(), "data", _tensors(), _tensors(seed=1),
                                 "pass them again", "differ from those")


@pytest.mark.parametrize("data, partition, match", [
    ("fashion", None, "expected a p2pfl.data.Dataset"),
    ((torch.zeros(10, 3), torch.zeros(9).long(), torch.zeros(4, 3), torch.zeros(4).long()),
     None, "train: expected inputs"),
    (_tensors(), [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]], "has 5 index lists"),
    (_tensors(), [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 0]], "more than one node"),
    (_tensors(), [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 999]], "indices must be in"),
    (_tensors(), [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], []], "node 5 has no samples"),
    (_tensors(), [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [[10]]], "node 5: expected a 1-D"),
])
def test_bad_data_objects_are_one_line_errors(tmp_path, data, partition, match):
    with pytest.raises(ConfigError, match=match) as err:
        engine.run(_cfg(), tmp_path / "run", data=data, partition=partition)
    assert "\n" not in str(err.value)
