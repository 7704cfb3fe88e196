"""Stacked experiments (p2pfl.engine.stacked): runs side by side, their local phases trained as
one population, give the numbers of the same runs alone (float64)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import small_config, strip_times

import p2pfl
from p2pfl.config import ConfigError
from p2pfl.core.federated import FederatedData
from p2pfl.data import SYNTHETIC_SHAPE, load_dataset
from p2pfl.engine import stacked
from p2pfl.engine.checkpoint import load_checkpoint
from p2pfl.report.results import read_metrics

ALGORITHMS = {  # the four families: Push-Sum, Push-Sum with SAM and momentum, Gossip, server
    "osgp": {},
    "dfedsgpsm": {"algorithm__momentum": 0.9, "algorithm__rho": 0.05},
    "dfedavgm": {"algorithm__momentum": 0.9},
    "fedavg": {"topology__name": "star"},
}


@pytest.fixture(scope="module")
def dataset() -> Any:
    return load_dataset("synthetic", None, seed=5, synthetic_train=600, synthetic_test=200)


def _tensors(tree: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a state tree, by path."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    items = tree.items() if isinstance(tree, dict) else (
        enumerate(tree) if isinstance(tree, list | tuple) else ())
    return {k: v for key, value in items for k, v in _tensors(value, f"{prefix}/{key}").items()}


def _assert_same_run(alone: Path, together: Path) -> None:
    a, b = read_metrics(alone / "metrics.jsonl"), read_metrics(together / "metrics.jsonl")
    assert len(a) == len(b)
    for ra, rb in zip(strip_times(a), strip_times(b)):
        assert ra.keys() == rb.keys()
        for key, value in ra.items():
            assert rb[key] == pytest.approx(value, abs=1e-12, rel=0), key
    states = [load_checkpoint(d, torch.device("cpu")) for d in (alone, together)]
    ta, tb = (_tensors({k: s[k] for k in ("population", "algorithm")}) for s in states)
    assert ta.keys() == tb.keys() and ta  # Push-Sum weights, momenta, server state included
    for key, value in ta.items():
        torch.testing.assert_close(tb[key], value, rtol=0, atol=1e-12, msg=key)


def test_stacked_runs_equal_the_runs_alone(tmp_path: Path, dataset: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """8 runs (4 algorithms x 2 seeds, unequal node sizes) stacked: each run's metrics and
    final state equal its run alone; the local phases were trained as merged populations."""
    merged: list[int] = []
    merge = stacked.merge_plans
    monkeypatch.setattr(stacked, "merge_plans", lambda plans: (merged.append(len(plans)),
                                                               merge(plans))[1])
    cfgs = [small_config(seed=seed, rounds=3, algorithm__name=name, data__synthetic_train=2000,
                         data__synthetic_test=500, **options)
            for seed in (0, 1) for name, options in ALGORITHMS.items()]
    for i, cfg in enumerate(cfgs):
        p2pfl.run(cfg, tmp_path / f"alone{i}", data=dataset)
    results = p2pfl.run_stacked([{"cfg": cfg, "out_dir": tmp_path / f"stacked{i}",
                                    "data": dataset} for i, cfg in enumerate(cfgs)])
    assert all(isinstance(r, list) and len(r) == 3 for r in results)
    assert merged and max(merged) >= 2  # runs of one solver share a trainer call
    for i in range(len(cfgs)):
        _assert_same_run(tmp_path / f"alone{i}", tmp_path / f"stacked{i}")


def test_members_that_cannot_share_train_alone_and_a_failing_one_stops_no_other(
        tmp_path: Path, dataset: Any) -> None:
    """A per-node loop run, a run of another model width and a run refused at its build, stacked
    with a plain one: each ends as alone, none waits forever."""
    plain = small_config(seed=0, rounds=2)
    jobs = [{"cfg": plain, "out_dir": tmp_path / "plain"},
            {"cfg": small_config(seed=0, rounds=2, engine__executor="loop",
                                 engine__dtype="float32"), "out_dir": tmp_path / "loop"},
            {"cfg": plain, "out_dir": tmp_path / "narrow", "model": torch.nn.Sequential(
                torch.nn.Flatten(), torch.nn.Linear(math.prod(SYNTHETIC_SHAPE), 10))},
            {"cfg": small_config(seed=0, rounds=2, algorithm__batch_size=10_000,
                                 algorithm__last_batch="drop", algorithm__local_steps=0,
                                 algorithm__local_epochs=1), "out_dir": tmp_path / "refused"}]
    results = p2pfl.run_stacked(jobs)
    assert [type(r).__name__ for r in results] == ["list", "list", "list", "ConfigError"]
    for job in jobs[:3]:
        p2pfl.run(**job | {"out_dir": Path(str(job["out_dir"]) + "_alone")})
        _assert_same_run(Path(str(job["out_dir"]) + "_alone"), job["out_dir"])


def test_merged_plan_gives_each_node_its_own_batches(dataset: Any) -> None:
    """Plans of unequal steps and widths merged: every node's batch at every step is the one of
    its own plan (the padding weighted 0), steps and widths padded as documented."""
    one = FederatedData(dataset, [np.arange(0, 40), np.arange(40, 45)], torch.device("cpu"),
                        torch.float64)
    two = FederatedData(dataset, [np.arange(100, 130), np.arange(130, 200), np.arange(200, 203)],
                        torch.device("cpu"), torch.float64)
    plans = [one.plan(0, 0, 8, 1), two.plan(1, 0, 16, 2)]
    merged = stacked.merge_plans(plans)
    assert list(merged.steps_of) == [*plans[0].steps_of, *plans[1].steps_of] == [5, 1, 4, 10, 2]
    assert merged.steps == 10 and max(merged.widths) == 16
    for step in range(merged.steps):
        for row, (plan, data, node) in enumerate([(plans[0], one, 0), (plans[0], one, 1),
                                                  (plans[1], two, 0), (plans[1], two, 1),
                                                  (plans[1], two, 2)]):
            if plan.steps_of[node] <= step:
                continue
            own = data.batch(plan, step, torch.tensor([node]))
            got = one.batch(merged, step, torch.tensor([row]))
            n = int(plan.lengths[node, step])
            torch.testing.assert_close(got.x[0, :n], own.x[0, :n], rtol=0, atol=0)
            assert torch.equal(got.y[0, :n], own.y[0, :n])
            if got.weight is not None:
                assert torch.allclose(got.weight[0, :n], torch.full((n,), 1 / n,
                                                                    dtype=torch.float64))
                assert not got.weight[0, n:].any()


def test_a_study_refuses_a_bad_stack() -> None:
    from analysis.study_spec import check_stack

    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="study.stack"):
            check_stack(bad)
    assert check_stack(4) == 4


def test_stacked_members_with_batch_statistics_equal_the_runs_alone(tmp_path: Path,
                                                                   dataset: Any) -> None:
    """A BatchNorm model (no running statistics) of batch 16 stacked beside one of batch 40: the
    merged steps pad the narrower batches, which must not enter the batch statistics (the
    member differed from its run alone by 3.4e-2 in its parameters)."""
    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(math.prod(SYNTHETIC_SHAPE),
                                                                        8),
                                   torch.nn.BatchNorm1d(8, track_running_stats=False),
                                   torch.nn.ReLU(), torch.nn.Linear(8, 10))

    jobs = [{"cfg": small_config(seed=0, rounds=2, algorithm__batch_size=b),
             "out_dir": tmp_path / f"b{b}", "model": model()} for b in (16, 40)]
    assert all(isinstance(r, list) for r in p2pfl.run_stacked(jobs))
    for job in jobs:
        alone = Path(str(job["out_dir"]) + "_alone")
        p2pfl.run(**job | {"out_dir": alone})
        _assert_same_run(alone, job["out_dir"])
