"""An algorithm named alone runs its paper's setting: its defaults are its paper's main
experiment's (with their source), a config that switches algorithms runs the new one at its own
defaults, and setting one back to its baseline (rho = 0, momentum = 0) is said once in the log."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from algorithms import ALGORITHMS
from analysis.study import _plan
from analysis.study_same import same_cells
from analysis.study_spec import Entry, study_algorithms
from analysis.summary import GAMMA
from p2pfl.config import ConfigError, config_from_dict, with_overrides
from p2pfl.engine import run
from p2pfl.options import default_source
from tests.conftest import small_config

# (algorithm, option) -> (the default before, the paper's value): DFedSGPSM paper App. A
# (momentum 0.9 on MNIST and CIFAR-10), rho 0.05 and Q = 4 of configs/dfedsgpsm_paper ([U]),
# FedFSA's appendix (FedSAM 0.05, MoFedSAM / FedFSA 0.1), FL-Simulator's README (FedSMOO,
# FedSpeed 0.1; FedGamma 0.01), FedLESAM's guidance 0.1 x lr, FedGloSS's CIFAR-10 CNN script.
PAPER = {
    ("dfedavgm", "momentum"): (0.0, 0.9),
    ("dfedsam", "rho"): (0.0, 0.05),
    ("dfedsam_mgs", "rho"): (0.0, 0.05),
    ("dfedsam_mgs", "gossip_steps"): (1, 4),
    ("dfedsgpm", "momentum"): (0.0, 0.9),
    ("dfedsgpsm", "rho"): (0.0, 0.05),
    ("dfedsgpsm", "momentum"): (0.0, 0.9),
    ("dfedsgpsm_s", "rho"): (0.0, 0.05),
    ("dfedsgpsm_s", "momentum"): (0.0, 0.9),
    ("fedsam", "rho"): (0.0, 0.05),
    ("mofedsam", "rho"): (0.0, 0.1),
    ("fedgamma", "rho"): (0.0, 0.01),
    ("fedsmoo", "rho"): (0.0, 0.1),
    ("fedspeed", "rho"): (0.0, 0.1),
    ("fedlesam", "rho"): (0.0, 0.01),
    ("fedlesam_s", "rho"): (0.0, 0.01),
    ("fedlesam_d", "rho"): (0.0, 0.01),
    ("fedgloss", "rho"): (0.0, 0.15),
    ("fedgloss", "server_rho"): (0.0, 0.15),
    ("fedgloss", "rho_warmup"): (0, 2000),
    ("fedgloss", "server_rho_warmup"): (False, True),
    ("naive_fedgloss", "rho"): (0.0, 0.15),
    ("naive_fedgloss", "server_rho"): (0.0, 0.15),
    ("fedfsa", "rho"): (0.0, 0.1),
}


def test_each_algorithm_defaults_to_its_papers_values_with_their_source() -> None:
    for (name, key), (_, value) in PAPER.items():
        f = {f.name: f for f in dataclasses.fields(ALGORITHMS[name].Options)}[key]
        assert f.default == value and default_source(f), (name, key)
    for name in ("osgp", "dfedavg", "fedavg", "scaffold", "feddyn", "fedgmt", "fedcm"):
        options = ALGORITHMS[name].Options()  # their baselines keep the shared 0
        assert getattr(options, "rho", 0.0) == 0.0 and getattr(options, "momentum", 0.0) == 0.0
    cfg = config_from_dict({"algorithm": {"name": "dfedsgpsm"}})  # named alone: the paper's
    assert (cfg.algorithm.rho, cfg.algorithm.momentum) == (0.05, 0.9)


def test_switching_algorithms_runs_the_new_one_at_its_own_defaults() -> None:
    paper = small_config(algorithm__name="dfedsgpsm")
    assert (paper.algorithm.rho, paper.algorithm.momentum) == (0.05, 0.9)
    osgp = with_overrides(paper, {"algorithm.name": "osgp"})  # not "osgp does not use rho"
    assert osgp.algorithm.name == "osgp" and not hasattr(osgp.algorithm, "rho")
    assert with_overrides(osgp, {"algorithm.name": "dfedsam"}).algorithm.rho == 0.05
    ablation = with_overrides(paper, {"algorithm.rho": 0.0})  # set on purpose: kept
    assert with_overrides(ablation, {"algorithm.name": "dfedsam"}).algorithm.rho == 0.0
    assert not hasattr(with_overrides(ablation, {"algorithm.name": "osgp"}).algorithm, "rho")
    tuned = with_overrides(paper, {"algorithm.rho": 0.02})  # means something osgp cannot do
    with pytest.raises(ConfigError, match="algorithm.rho: osgp does not use rho"):
        with_overrides(tuned, {"algorithm.name": "osgp"})
    # a [[compare]] root's unset fields are its algorithm's defaults, and a variant of another
    # algorithm gets that one's
    raw = {"algorithm": {"name": "dfedsgpsm"}, "topology": {"name": "ring"},
           "compare": [{"label": "same"}, {"label": "b", "algorithm.name": "dfedavgm"},
                       {"label": "c", "algorithm.name": "dfedsam", "algorithm.rho": 0.0}]}
    root = config_from_dict(raw)
    same, b, c = (with_overrides(root, {k: v for k, v in v.items() if k != "label"})
                  for v in raw["compare"])
    assert (same.algorithm.rho, same.algorithm.momentum) == (0.05, 0.9)
    assert b.algorithm.momentum == 0.9 and c.algorithm.rho == 0.0


def test_a_study_of_osgp_and_a_default_dfedsgpsm_runs_both(tmp_path: Path) -> None:
    cfg = small_config()
    entries = [Entry("ring", {"topology.name": "ring"})]

    def same(algorithms: list) -> dict:
        return same_cells(_plan(cfg, study_algorithms(algorithms), entries, [0], tmp_path, GAMMA))

    assert same(["osgp", "dfedsgpsm"]) == {}  # SAM and momentum: another computation
    assert same(["osgp", {"name": "dfedsgpsm", "rho": 0.0, "momentum": 0.0,
                          "clip_norm": 0.0}]) == {
        1: (0, "the same round (local steps, then mix) with the same options")}


def test_a_baseline_is_allowed_and_said_once(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    algorithm = ALGORITHMS["dfedsgpsm"]
    lines = [algorithm(algorithm.Options(**k)).baseline() for k in (
        {}, {"rho": 0.0}, {"momentum": 0.0}, {"rho": 0.0, "momentum": 0.0})]
    assert lines == [
        "",
        "dfedsgpsm with rho = 0: it computes DFedSGPM (no SAM ascent) (its default: rho = 0.05)",
        "dfedsgpsm with momentum = 0: it computes local SGP with SAM steps (no local momentum) "
        "(its default: momentum = 0.9)",
        "dfedsgpsm with rho = 0, momentum = 0: it computes OSGP, local SGP (no SAM ascent, no "
        "local momentum) (its default: rho = 0.05, momentum = 0.9)"]
    subclass = ALGORITHMS["dfedsgpsm_s"]  # never inherited: it says its own
    assert "loss-selected" in subclass(subclass.Options(rho=0.0)).baseline()
    cfg = small_config(algorithm__name="dfedsam", algorithm__rho=0.0, rounds=1)
    run(cfg, tmp_path / "baseline", figures=False)
    assert capsys.readouterr().err.splitlines() == [
        "p2pfl: dfedsam with rho = 0: it computes DFedAvg (no SAM ascent) (its default: "
        "rho = 0.05)"]
    run(with_overrides(cfg, {"algorithm.rho": 0.05}), tmp_path / "paper", figures=False)
    assert "p2pfl:" not in capsys.readouterr().err
