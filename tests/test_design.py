"""The design command (analysis.design): its prediction against the engine's own clock and the
exact n_eff, the successive halving's rules on hand-made runs, the pick's file loaded back, and
one end-to-end design on synthetic data."""

from __future__ import annotations

import json
import math

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from analysis.design_candidates import same_rounds, write_topology
from analysis.design_predict import (
    Prediction,
    connected_rounds,
    max_degree,
    rank_predictions,
    round_seconds,
    simulated_effective_neighbors,
)
from analysis.halving import (
    Evidence,
    accuracy_at,
    clearly_best,
    faster_share,
    final_ranking,
    order,
    pick_against_runner_up,
    run_rungs,
    rung_plan,
    seconds_to,
)
from analysis.study_spec import Entry
from tests.conftest import small_config

HISTORY = [{"round": 1, "sim_time_s": 1.0, "test_acc": 0.5},
           {"round": 2, "sim_time_s": 2.0, "test_acc": 0.7},
           {"round": 3, "sim_time_s": 3.0, "test_acc": 0.9}]


def test_accuracy_and_seconds_at_a_horizon() -> None:
    assert accuracy_at(HISTORY, 2.5) == 0.7
    assert accuracy_at(HISTORY, 0.5) == 0.5  # none by then: the first evaluation after
    assert accuracy_at([*HISTORY, {"round": 3, "sim_time_s": 3.0, "test_acc": math.nan}],
                       3.5) is None  # diverged
    assert seconds_to(HISTORY, 0.7, 3.0) == 2.0 and seconds_to(HISTORY, 0.9, 2.9) is None


def test_faster_share_counts_seed_pairs() -> None:
    a = Evidence(3.0, [0, 1], [0.8, 0.8], [1.0, 2.0])
    b = Evidence(3.0, [0, 1], [0.8, 0.8], [1.5, None])  # one seed never reached: infinite
    # pairs (1, 1.5) (1, inf) (2, 1.5) (2, inf): a faster in 3 of 4
    assert faster_share(a, b, True) == 0.75 and faster_share(b, a, True) == 0.25
    tie = Evidence(3.0, [0], [0.8], [1.0])
    assert faster_share(tie, Evidence(3.0, [0], [0.8], [1.0]), True) == 0.5


def test_order_reached_seeds_then_seconds_then_accuracy() -> None:
    found = {"slow": Evidence(3, [0, 1], [0.9, 0.9], [2.5, 2.5]),
             "fast_once": Evidence(3, [0, 1], [0.95, 0.6], [1.0, None]),
             "fast": Evidence(3, [0, 1], [0.8, 0.8], [1.5, 1.5]),
             "never_accurate": Evidence(3, [0, 1], [0.7, 0.7], [None, None]),
             "never": Evidence(3, [0, 1], [0.6, 0.6], [None, None])}
    assert order(found, True) == ["fast", "slow", "fast_once", "never_accurate", "never"]
    assert order(found, False)[0] == "slow"  # without a target: accuracy at the horizon
    assert not clearly_best(found, order(found, True), True)  # fast_once's 1.0 < 1.5
    del found["fast_once"]
    assert clearly_best(found, order(found, True), True)
    found["close"] = Evidence(3, [0, 1], [0.8, 0.8], [1.4, 2.6])
    assert not clearly_best(found, order(found, True), True)  # 1.4 < 1.5 in one pair


def test_rung_plan_horizons_and_seeds() -> None:
    plan = rung_plan(9.0, 3, 3, [0, 1, 2])
    assert [h for h, _ in plan] == [1.0, 3.0, 9.0]
    assert [s for _, s in plan] == [[0], [0, 1], [0, 1, 2]]
    assert [h for h, _ in rung_plan(9.0, 3, 3, [0], least=2.0)] == [2.0, 3.0, 9.0]
    assert [h for h, _ in rung_plan(1.0, 3, 3, [0], least=2.0)] == [2.0, 2.0, 2.0]


def _fake_study(speed: dict[str, float], calls: list) -> object:
    """A runner whose candidate k gains accuracy speed[k] per simulated second, one round a
    second, evaluated each round."""
    def study(cells: dict[str, Entry], seeds: list[int]) -> dict:
        calls.append({k: (e.overrides["rounds"], list(seeds)) for k, e in cells.items()})
        return {(k, s): [{"round": r, "sim_time_s": float(r),
                          "test_acc": min(1.0, speed[k] * r * (1 + 0.01 * s))}
                         for r in range(1, e.overrides["rounds"] + 1)]
                for k, e in cells.items() for s in seeds}
    return study


def test_successive_halving_keeps_the_best_and_extends_their_runs() -> None:
    speed = {"a": 0.05, "b": 0.2, "c": 0.1, "d": 0.02, "e": 0.15, "f": 0.01}
    entries = {k: Entry(k, {"topology.name": "ring"}) for k in speed}
    calls: list = []
    found, histories, rungs, clear = run_rungs(
        rung_plan(9.0, 3, 3, [0, 1, 2]), entries, dict.fromkeys(speed, 1.0), 3,
        dict.fromkeys(speed, 1),
        _fake_study(speed, calls), 0.95, print)
    # rung 1: all six, 1 round, seed 0; rung 2: the best 2 (ceil(6/3)) for 3 rounds on 2 seeds;
    # rung 3: the best 1 (ceil(2/3)) for 9 rounds on 3 seeds, its runs extended
    assert calls[0] == {k: (1, [0]) for k in speed}
    assert calls[1] == {"b": (3, [0, 1]), "e": (3, [0, 1])}
    assert rungs[1]["ranked"] == ["b", "e"] and len(rungs) == 3
    assert calls[2] == {"b": (9, [0, 1, 2])} and not clear
    assert found["b"].seconds == [5.0, 5.0, 5.0] and found["a"].horizon_s == 1.0
    ranked = final_ranking(rungs, found, True)
    assert ranked == ["b", "e", "c", "a", "d", "f"]
    # the pick against e where both ran (rung 2, 3 s): neither at 0.95 yet, so their accuracy
    # there (0.6 against 0.45) decides, in every pair; "clearly best" needs a target reached
    versus = pick_against_runner_up(rungs, ranked, histories, clear)
    assert versus["runner_up"] == "e" and versus["seeds"] == [0, 1]
    assert versus["target"] is None and versus["confidence"] == 1.0
    assert not versus["clearly_best"]
    easier = [{**rung, "target": 0.35} for rung in rungs]  # b in 2 s, e in 3 s on each seed
    assert pick_against_runner_up(easier, ranked, histories, clear)["clearly_best"]


def test_successive_halving_stops_when_one_is_clearly_best() -> None:
    speed = {"a": 0.5, "b": 0.1, "c": 0.05, "d": 0.04, "e": 0.03, "f": 0.02}
    entries = {k: Entry(k, {}) for k in speed}
    calls: list = []
    _, _, rungs, early = run_rungs(rung_plan(27.0, 3, 3, [0, 1]), entries,
                                   dict.fromkeys(speed, 1.0), 3, dict.fromkeys(speed, 1),
                                   _fake_study(speed, calls),
                                   0.9, print)
    # rung 2: a and b on 2 seeds, a at 0.9 in 2 s, b in 9 s: no third rung
    assert early and len(rungs) == 2 and rungs[1]["ranked"] == ["a", "b"]


def test_max_degree_and_connected_rounds() -> None:
    assert max_degree(T.as_schedule(T.exponential(8, directed=True))) == 3
    assert max_degree(T.as_schedule(T.star(5))) == 4
    assert max_degree(T.one_peer_exponential(8)) == 1
    assert connected_rounds(T.as_schedule(T.ring(8))) == 1
    assert connected_rounds(T.one_peer_exponential(8)) == 1  # round 0: the directed ring
    first, second = nx.empty_graph(4), nx.empty_graph(4)
    first.add_edges_from([(0, 1), (2, 3)])
    second.add_edge(1, 2)
    pair = T.cycle([first, second])  # connected from round 2 on
    assert connected_rounds(pair) == 2


def test_simulated_effective_neighbours_match_the_exact_value() -> None:
    for graph in (T.ring(12), T.torus(3, 4)):
        exact = A.effective_neighbors(T.doubly_stochastic(graph), 0.9)
        simulated = simulated_effective_neighbors(T.as_schedule(graph), 0.9)
        assert simulated == pytest.approx(exact, rel=0.05)
    one_peer = T.one_peer_exponential(8)  # push rule, doubly stochastic, periodic
    assert simulated_effective_neighbors(one_peer, 0.9, mixing="column_stochastic") == \
        pytest.approx(A.effective_neighbors(one_peer, 0.9), rel=0.05)


def test_rank_predictions_complete_graph_is_one_and_unknown_is_the_median() -> None:
    p = {"complete": Prediction(15, 1.0, 1.0, 16.0, "exact", 0.0),
         "ring": Prediction(2, 0.5, 0.5, 4.0, "exact", 0.45),
         "unknown": Prediction(1, 0.4, 0.4, None, "", 0.0),
         "other": Prediction(1, 0.4, 0.4, 8.0, "exact", 0.0)}
    ranked = rank_predictions(p, 16, 10)
    assert p["complete"].rounds_factor == 1.0
    assert p["ring"].rounds_factor == pytest.approx(2.0 + 0.45 / 0.9)
    assert p["unknown"].rounds_factor == pytest.approx(math.sqrt(2.0))  # median n_eff 8
    assert p["unknown"].neff_note == "median of the others"
    assert ranked[0] in ("unknown", "other") and ranked[-1] == "ring"


def test_round_seconds_is_the_engines_simulated_round(tmp_path) -> None:
    """The prediction advances the run's own clock: a run's last sim_time_s over its rounds."""
    import torch

    from algorithms import ALGORITHMS
    from p2pfl.core.models import build_model
    from p2pfl.engine import run
    from p2pfl.engine.builder import federated_data, network_clock
    from p2pfl.report.results import read_metrics

    cfg = small_config(rounds=4, network__enabled=True, network__stragglers=0.3,
                       network__step_s=0.01, network__jitter=0.2, algorithm__name="dpsgd")
    run(cfg, tmp_path / "run", figures=False)
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    algorithm = ALGORITHMS["dpsgd"](cfg.algorithm)
    data = federated_data(cfg)
    model = build_model("mlp", data.input_shape, data.num_classes)
    params = sum(p.numel() for p in model.parameters())
    clock = network_clock(cfg, algorithm, 6, np.asarray(data.sizes), params, torch.float64)
    assert round_seconds(clock, T.as_schedule(T.ring(6)), 4) == pytest.approx(
        records[-1]["sim_time_s"] / 4, rel=1e-12)


def test_the_picks_file_loads_back_as_the_same_topology(tmp_path) -> None:
    weighted = T.as_schedule(T.stl_fw_graph(np.eye(3)[[0, 0, 1, 1, 2, 2]], budget=2))
    files = write_topology(tmp_path, "stl_fw", weighted, {})
    table = (tmp_path / "topology.toml").read_text()
    assert 'name = "from_edges"' in table and files[1].name == "topology.edges"
    path = json.loads(table.split("path = ")[1].splitlines()[0])
    directed = "directed = true" in table
    loaded = T.build_schedule("from_edges", 6, path=path, directed=directed)
    assert same_rounds(weighted, loaded, "column_stochastic", 1)
    write_topology(tmp_path, "one-peer", T.one_peer_exponential(8),
                   {"topology.name": "one_peer_exponential"})
    assert 'name = "one_peer_exponential"' in (tmp_path / "topology.toml").read_text()
    with pytest.raises(ValueError, match="no file holds it"):
        write_topology(tmp_path, "object", T.one_peer_exponential(8), {})


@pytest.mark.parametrize(("args", "named"), [
    (["configs/demo.toml"], "network.enabled"),
    (["configs/design/access_iid.toml", "--budget", "0"], "--budget"),
    (["configs/design/access_iid.toml", "--horizon", "inf"], "--horizon"),
    (["configs/design/access_iid.toml", "--target", "150"], "--target"),
    (["configs/design/access_iid.toml", "--set", "algorithm.name=adpsgd", "--set",
      "algorithm.local_steps=1"], "asynchronous"),
    (["configs/design/access_iid.toml", "--set", "network.horizon_s=5"], "network.horizon_s")])
def test_the_design_refuses_bad_input_in_one_line(capsys, args: list[str], named: str) -> None:
    from p2pfl.cli.main import main

    assert main(["design", *args, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0]


def test_a_small_design_end_to_end(tmp_path) -> None:
    """Four synthetic nodes, two candidates left of three, one seed: the pick is one that ran,
    its file is written, and the compute is counted."""
    from analysis.design import design_topology

    cfg = small_config(rounds=4, network__enabled=True, network__step_s=0.01,
                       algorithm__name="dpsgd", data__num_nodes=4, eval__every=2)
    result = design_topology(cfg, tmp_path, seeds=[0], rungs=2, eta=2, echo=lambda _: None,
                             candidates={"ring": "ring", "complete": "complete",
                                         "line": nx.path_graph(4)}, budget=2)
    assert result.skipped == {"complete": "degree 3 is over the budget of 2"}
    assert result.pick in ("ring", "line") and (tmp_path / "topology.toml").exists()
    assert sorted(result.ranked) == ["line", "ring"]
    assert 0 < result.rounds_run <= result.exhaustive_rounds


def test_without_a_target_each_rung_has_its_own() -> None:
    """0.9 x the best mean accuracy at the rung's horizon, and the seconds to it rank."""
    speed = {"a": 0.2, "b": 0.1, "c": 0.05}
    entries = {k: Entry(k, {}) for k in speed}
    _, _, rungs, _ = run_rungs(rung_plan(4.0, 2, 2, [0]), entries, dict.fromkeys(speed, 1.0), 2,
                               dict.fromkeys(speed, 1), _fake_study(speed, []), None, print)
    assert rungs[0]["target"] == pytest.approx(0.9 * 0.4)  # a: 0.2 x 2 rounds
    assert rungs[0]["ranked"] == ["a", "b", "c"] and rungs[1]["ranked"] == ["a", "b"]


def test_symmetric_stl_fw_is_stl_fw_symmetrized_within_the_budget() -> None:
    from analysis.design_candidates import SymmetricSTLFW
    from analysis.study_measure import is_factory

    counts = np.random.default_rng(0).integers(1, 50, size=(12, 10))
    factory = SymmetricSTLFW(4)
    graph = factory(counts)
    learned = T.stl_fw(counts / counts.sum(axis=1, keepdims=True), 2, connected=False)
    assert is_factory(factory) and not graph.is_directed()
    assert np.allclose(T.doubly_stochastic(graph), (learned + learned.T) / 2, rtol=0, atol=1e-15)
    assert max_degree(T.as_schedule(graph)) <= 4
