"""An algorithm of one's own: a subclass of a round kind with its own option, registered or passed
to `p2pfl.run`, recorded in algorithm.json, and refused on resume unless it is the same class."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import algorithms
import topologies as T
from algorithms import ALGORITHMS, Gossip, register
from p2pfl.cli import main
from p2pfl.config import ConfigError, config_from_dict
from p2pfl.engine import build, run
from p2pfl.options import option
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import play, skip_plots, small_config, strip_times


class LazyGossip(Gossip):
    """Lazy Metropolis gossip: x <- ((1 - beta) I + beta W) y after the local phase."""

    name = "lazy_gossip"

    @dataclass
    class Options(Gossip.Options):
        beta: float = option(0.5, low=0, high=1, low_open=True, doc="weight of the neighbours")

    def gossip_matrix(self, ctx, graph, faults):
        W = T.doubly_stochastic(graph, faults=faults)
        lazy = (1 - self.cfg.beta) * np.eye(len(W)) + self.cfg.beta * W
        return ctx.comm.matrix(torch.as_tensor(lazy)), 1


pytestmark = pytest.mark.usefixtures("clean_registry")


def _cfg(**overrides):
    return small_config(**{"rounds": 2, **overrides})


def test_a_registered_algorithm_is_a_config_name_with_its_own_checked_option():
    register(LazyGossip)
    cfg = _cfg(algorithm__name="lazy_gossip", algorithm__beta=0.25)
    assert cfg.algorithm.beta == 0.25 and cfg.to_dict()["algorithm"]["beta"] == 0.25
    with pytest.raises(ConfigError, match=r"^algorithm.beta: 1.5 is out of range \(0, 1\]$"):
        _cfg(algorithm__name="lazy_gossip", algorithm__beta=1.5)
    with pytest.raises(ConfigError, match="^algorithm.beta: dfedavg does not use beta"):
        _cfg(algorithm__beta=0.25)
    _cfg(algorithm__beta=0.5)  # at its default it changes nothing: accepted for any algorithm


def test_beta_one_is_dfedavg_and_beta_small_a_hand_computed_mix():
    """beta = 1: the user's matrix code equals the built-in gossip bit for bit (two code paths);
    one round at beta = 0.2 mixes the trained rows with (0.8 I + 0.2 W)."""
    register(LazyGossip)
    ref_ctx, ref = build(_cfg())
    ctx, lazy = build(_cfg(algorithm__name="lazy_gossip", algorithm__beta=1.0))
    for t in range(2):
        play(ref, ref_ctx, t, ref_ctx.schedule.at(t))
        play(lazy, ctx, t, ctx.schedule.at(t))
    assert torch.equal(ctx.population.flat, ref_ctx.population.flat)

    ctx, lazy = build(_cfg(algorithm__name="lazy_gossip", algorithm__beta=0.2))
    before = ctx.population.flat.clone()
    graph = ctx.schedule.at(0)
    lazy.local_phase(ctx, 0, ctx.faults(0, graph))
    trained = {k: v.clone() for k, v in ctx.population.params.items()}
    ctx.population.flat.copy_(before)
    play(lazy, ctx, 0, graph)
    W = torch.as_tensor(T.doubly_stochastic(graph))
    mix = 0.8 * torch.eye(len(W), dtype=W.dtype) + 0.2 * W
    for k, v in trained.items():
        expected = (mix @ v.flatten(1)).view_as(v)
        torch.testing.assert_close(ctx.population.params[k], expected, rtol=0, atol=1e-12)


def test_a_class_passed_to_run_is_recorded_and_resumed_only_with_the_same_class(tmp_path):
    out = tmp_path / "run"
    whole = run(_cfg(rounds=3), tmp_path / "whole", algorithm=LazyGossip)
    run(_cfg(), out, algorithm=LazyGossip)
    assert json.loads((out / "config.json").read_text())["algorithm"]["name"] == "lazy_gossip"
    record = json.loads((out / "algorithm.json").read_text())
    assert record["class"] == f"{__name__}.LazyGossip" and len(record["fingerprint"]) == 64
    resumed = run(_cfg(rounds=3), out, resume=True, algorithm=LazyGossip)
    assert strip_times(resumed) == strip_times(whole)

    record["fingerprint"] = "0" * 64  # as if the class's source had changed since
    (out / "algorithm.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="^algorithm: .* ran the algorithm class .*LazyGossip; "
                                          "this is another class or its source changed"):
        run(_cfg(rounds=4), out, resume=True, algorithm=LazyGossip)


def test_resuming_from_the_command_line_without_the_class_is_one_line(tmp_path, capsys,
                                                                     monkeypatch):
    skip_plots(monkeypatch)
    run(_cfg(), tmp_path / "run", algorithm=LazyGossip)
    del ALGORITHMS["lazy_gossip"]  # a new process that has not imported the class
    assert main(["resume", str(tmp_path / "run"), "--set", "rounds=3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "was run with the algorithm class" in err and "LazyGossip" in err
    assert len(read_metrics(tmp_path / "run" / METRICS)) == 2


def test_a_resume_with_a_registered_class_of_that_name_is_checked_too(tmp_path):
    run(_cfg(), tmp_path / "run", algorithm=LazyGossip)

    class Other(LazyGossip):  # a different class under the same config name
        name = "lazy_gossip"

    ALGORITHMS["lazy_gossip"] = Other
    with pytest.raises(ConfigError, match="another class or its source changed"):
        run(_cfg(rounds=3), tmp_path / "run", resume=True)


class _NoName(Gossip):
    pass


class _Abstract(algorithms.Algorithm):
    name = "half_done"
    mixing = "server"


class _Taken(Gossip):
    name = "dfedavg"


class _Clash(Gossip):
    name = "clash"

    @dataclass
    class Options(Gossip.Options):
        momentum: float = option(0.5)


@pytest.mark.parametrize(("cls", "message"), [
    (int, "expected a subclass of algorithms.Gossip, PushSum or Server"),
    (_NoName, "needs a class attribute `name`"),
    (_Abstract, "leaves average_model, local_models, round abstract"),
    (_Taken, "'dfedavg' is taken by algorithms.dfedavg.DFedAvg"),
    (_Clash, "declares momentum unlike"),
])
def test_bad_classes_are_one_line_errors(tmp_path, cls, message):
    with pytest.raises(ConfigError, match=f"^algorithm: .*{message}"):
        run(_cfg(), tmp_path / "run", algorithm=cls)
    assert not (tmp_path / "run").exists()


def test_the_config_fields_of_another_algorithm_are_refused_when_a_class_replaces_it(tmp_path):
    cfg = config_from_dict({**_cfg().to_dict(), "algorithm": {
        **_cfg().to_dict()["algorithm"], "name": "dfedavgm", "momentum": 0.5}})  # not its 0.9
    with pytest.raises(ConfigError, match="^algorithm.momentum: lazy_gossip does not use"):
        run(cfg, tmp_path / "run", algorithm=LazyGossip)
