"""Study cells that are the same computation (algorithms.forms, analysis.study_same): which are,
which are not, and that a reused result is the one the skipped run would have given."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import networkx as nx
import pytest

from algorithms import ALGORITHMS, DFedAvg
from algorithms.forms import round_form
from analysis.study_same import equal_mixing
from p2pfl.config import Config, with_overrides
from p2pfl.engine import run
from tests.conftest import small_config

COMPARED = ("test_acc", "test_loss", "train_loss", "consensus_dist", "test_acc_local_mean",
            "test_acc_local_min", "tracking_error")


def _form(name: str, **options: object):
    cfg = with_overrides(small_config(), {"algorithm.name": name,
                                          **{f"algorithm.{k}": v for k, v in options.items()}})
    return round_form(ALGORITHMS[name], cfg.algorithm)


def test_round_forms_pair_gossip_and_push_sum_algorithms_with_the_same_options() -> None:
    sgp, dfedavg = _form("osgp"), _form("dfedavg")
    assert sgp.same_options(dfedavg) and sgp.push_sum and not dfedavg.push_sum
    assert _form("sgp", local_steps=1).same_options(_form("dfedavg", local_steps=1))
    assert _form("dpsgd", order="atc").same_options(sgp)
    assert _form("dfedavgm", momentum=0.9).same_options(_form("dfedsgpm", momentum=0.9))
    assert not _form("dfedavgm", momentum=0.9).same_options(_form("dfedsgpm", momentum=0.5))
    assert _form("dfedavgm", momentum=0.0, clip_norm=0.0).same_options(dfedavg)  # plain SGD
    assert _form("dfedsam", rho=0.05).same_options(_form("dfedsgpsm", rho=0.05, momentum=0.0,
                                                         clip_norm=0.0))
    assert _form("dfedsam_mgs", rho=0.05, gossip_steps=1).same_options(_form("dfedsam", rho=0.05))
    assert not _form("dfedsam_mgs", rho=0.05, gossip_steps=2).same_options(
        _form("dfedsgpsm", rho=0.05, momentum=0.0))  # W^2 a round
    assert _form("dsgt").same_options(_form("push_diging")) and not _form("dsgt").same_options(
        sgp)
    assert not _form("dfedavg", lr=0.05).same_options(sgp)
    # other rounds: combine-then-adapt, a sampled server, compression, own methods
    for name, options in (("dpsgd", {}), ("dsgt", {"order": "cta"}), ("fedavg", {}),
                          ("choco", {}), ("push_pull", {}), ("dfedsgpsm_s", {})):
        cls = ALGORITHMS[name]
        cfg = with_overrides(small_config(), {"algorithm.name": name, **{
            f"algorithm.{k}": v for k, v in options.items()}, **(
                {"topology.name": "star"} if name == "fedavg" else {})})
        assert round_form(cls, cfg.algorithm) is None, name

    class Mine(DFedAvg):  # a step of its own: another computation
        name = "mine"

        def lr(self, t: int) -> float:
            return 2 * super().lr(t)

    assert round_form(Mine, small_config().algorithm) is None


def test_push_sum_equals_gossip_only_where_its_matrix_does_on_every_round() -> None:
    ring = small_config()
    assert equal_mixing(ring, None) is not None
    assert equal_mixing(with_overrides(ring, {"topology.name": "random_regular_schedule",
                                              "topology.degree": 3}), None) is not None
    for overrides in ({"topology.name": "star"}, {"topology.name": "line"},
                      {"topology.link_drop": 0.1}, {"network.enabled": True},
                      {"topology.name": "exponential"}):  # directed
        assert equal_mixing(with_overrides(ring, overrides), None) is None, overrides
    cycle = [nx.cycle_graph(6), nx.complete_graph(6)]  # regular each round: periodic, checked
    assert equal_mixing(ring, cycle) is not None
    assert equal_mixing(ring, [nx.cycle_graph(6), nx.star_graph(5)]) is None
    assert equal_mixing(ring, lambda t: nx.cycle_graph(6)) is None  # aperiodic: not called ahead


def _metrics(history: list[dict]) -> list[dict]:
    return [{k: r[k] for k in COMPARED if k in r} for r in history]


def _close(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(math.isclose(x[k], y[k], rel_tol=1e-12, abs_tol=1e-12)
                                     for k in x) for x, y in zip(a, b))


def test_a_study_runs_a_repeated_cell_once_and_reuses_what_its_run_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a ring (uniform weights, regular): DFedAvg = SGP and DSGT = Push-DIGing, each pair run
    once. The skipped runs, run here, give the reused numbers to 1e-12 (float64); where the
    matrices differ (a star) no cell is reused (tests/test_analysis_study.py)."""
    from analysis.study import run as run_study

    monkeypatch.setattr("analysis.study_figures.plot_study", lambda *args: [])  # not tested here
    cfg: Config = with_overrides(small_config(), {"data.num_nodes": 5, "rounds": 2,
                                                  "data.synthetic_train": 200})
    said: list[str] = []
    result = run_study(cfg, ["ring"], tmp_path / "s", seeds=[4],
                       algorithms=["osgp", "dfedavg", "dsgt", "push_diging"], echo=said.append)
    rows = {r["algorithm"]: r for r in csv.DictReader((tmp_path / "s" / "study.csv").open())}
    assert {k: r["same_as"] for k, r in rows.items()} == {
        "osgp": "", "dfedavg": "osgp on ring (seed 4)", "dsgt": "",
        "push_diging": "dsgt on ring (seed 4)"}
    assert rows["dfedavg"]["run_dir"] == rows["osgp"]["run_dir"]
    assert rows["dfedavg"]["final_acc"] == rows["osgp"]["final_acc"]
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir()) == ["dsgt", "osgp"]
    assert len(said) == 2 and said[0].startswith(
        "study: dfedavg on ring is the same computation as osgp (seed 4): the same round")
    histories = result.histories
    for algorithm in ("dfedavg", "push_diging"):  # the runs the study did not do
        alone = run(with_overrides(cfg, {"algorithm.name": algorithm, "seed": 4}),
                    tmp_path / algorithm, progress=False, figures=False)
        assert _close(_metrics(alone), _metrics(histories[(algorithm, "ring", 4)]))
    assert not _close(_metrics(histories[("osgp", "ring", 4)]),  # the comparison can fail
                      _metrics(histories[("dsgt", "ring", 4)]))
