"""What a study measures per cell (gap per round and per period, effective neighbours, the
neighbourhood heterogeneity of the cell's own partition), topologies built from the partition
(a factory, a registered builder taking class_counts, in a study and in a plain run), and the
censored rank correlations with rounds to target."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from analysis.study_rank import REACHED, Outcome, correlation, rank_correlations
from p2pfl.config import ConfigError, load_config
from tests.test_analysis_study import TINY
from topologies.registry import describe_builder

SKEWED = TINY.replace('num_nodes = 4\npartition = "iid"',
                      'num_nodes = 8\npartition = "dirichlet"\nalpha = 0.2').replace(
    "synthetic_train = 200", "synthetic_train = 400").replace('name = "dfedavg"', 'name = "osgp"')


def majority_cliques(n: int, class_counts: np.ndarray) -> nx.Graph:
    """Cliques of the nodes that share a majority class, their first nodes joined in a ring."""
    major = np.argmax(class_counts, axis=1)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    groups = [np.flatnonzero(major == k).tolist() for k in np.unique(major)]
    for group in groups:
        G.add_edges_from(itertools.combinations(group, 2))
    if len(groups) > 1:
        nx.add_cycle(G, [group[0] for group in groups])
    return G


@pytest.fixture
def registered() -> Iterator[None]:
    """majority_cliques as a registered topology built from the partition, for one test."""
    T.REGISTRY["majority_cliques"] = describe_builder(majority_cliques, "majority_cliques")
    yield
    del T.REGISTRY["majority_cliques"]


def _tau(W: np.ndarray, counts: np.ndarray) -> float:
    """||W Pi - J Pi||_F^2 / n of a doubly-stochastic W, written out."""
    Pi = counts / counts.sum(axis=1, keepdims=True)
    return float(((W @ Pi - Pi.mean(axis=0)) ** 2).sum() / len(Pi))


def test_correlations_count_the_pairs_of_known_order() -> None:
    # rounds to target 3, never (in 10 rounds), 5, never, 8, and a run that diverged
    rows = [{"algorithm": "a", "status": "ok", "run_dir": f"r{i}", "diameter": i + 1,
             "exact_averaging_rounds": exact, "rounds_to_target": rounds, "rounds": 10}
            for i, (exact, rounds) in enumerate(((1, 3), (math.inf, None), (2, 5),
                                                 (math.inf, None), (math.inf, 8)))]
    rows += [{**rows[2], "label": "the same run under another label"},  # counted once
             {"algorithm": "a", "status": "diverged: round 2", "diameter": 9},
             {"algorithm": "b", "status": "ok", "run_dir": "s", "diameter": 1,
              "exact_averaging_rounds": 1, "rounds_to_target": 1, "rounds": 10}]
    out = {(c["algorithm"], c["metric"]): c for c in rank_correlations(
        rows, ("diameter", "exact_averaging_rounds"))}
    d = out[("a", "diameter")]
    assert (d["n"], d["censored"], d["diverged"]) == (6, 2, 1)
    # 14 of the 15 pairs are ordered (not the two censored runs): 11 concordant, 3 discordant
    # (each censored run against a faster run of larger diameter), no ties: 8 / 14
    assert d["pairs"] == 14 and d["kendall_tau"] == pytest.approx(8 / 14, abs=1e-12)
    assert d["kendall_p"] is None  # scipy's test takes every pair
    # x ranks 1..6 against 1, 4.5, 2, 4.5, 3, 6 (censored tied after 8, diverged last):
    # rho = 11.5 / sqrt(17.5 x 17)
    assert d["spearman_rho"] == pytest.approx(11.5 / math.sqrt(17.5 * 17), abs=1e-12)
    # never averaging exactly ranks last (the diverged cell has no value): 9 pairs ordered,
    # 7 concordant, 0 discordant, 2 tied in x: tau-b = 7 / sqrt(7 x 9)
    e = out[("a", "exact_averaging_rounds")]
    assert (e["n"], e["pairs"]) == (5, 9)
    assert e["kendall_tau"] == pytest.approx(7 / math.sqrt(63), abs=1e-12)
    assert out[("b", "diameter")]["kendall_tau"] is None  # one cell: no correlation
    constant = correlation([1.0, 1.0, 1.0], [Outcome(REACHED, r) for r in (1, 2, 3)])
    assert constant["kendall_tau"] is None and constant["spearman_rho"] is None


def test_a_study_records_every_metric_and_topologies_built_from_the_partition(
        tmp_path: Path, registered: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import analysis.study_figures
    from analysis.study import run as run_study
    from p2pfl.core.seeding import stream_seed
    from p2pfl.engine import class_counts
    from p2pfl.objects.topology import describe

    (tmp_path / "skewed.toml").write_text(SKEWED)
    cfg = load_config(tmp_path / "skewed.toml")
    calls = []

    def by_class(class_counts: np.ndarray, seed: int) -> nx.Graph:
        calls.append((class_counts.copy(), seed))
        return majority_cliques(len(class_counts), class_counts)

    monkeypatch.setattr(analysis.study_figures, "plot_study", lambda *a: [])  # tested apart
    out = tmp_path / "study"
    result = run_study(cfg, {"complete": "complete", "one_peer": "one_peer_exponential",
                             "cliques": "majority_cliques", "factory": by_class}, out,
                       gamma=0.5, echo=lambda line: None)
    counts = class_counts(cfg)  # of the study's one seed, the config's (1)
    assert len(calls) == 1 and np.array_equal(calls[0][0], counts)  # built once, from them
    assert calls[0][1] == stream_seed(1, "topology")  # the seed a registered builder gets
    rows = {r["label"]: r for r in csv.DictReader((out / "study.csv").open())}
    assert "spectral_gap" not in rows["complete"]  # named per round and per period only
    # the one-peer exponential graph of 8 nodes averages exactly in 3 rounds: gap 1 per round
    # and per period, like the complete graph (1 round, no period), told apart by the rounds
    one, full = rows["one_peer"], rows["complete"]
    assert (one["spectral_gap_per_round"], one["spectral_gap_per_period"]) == ("1.0", "1.0")
    assert float(full["spectral_gap_per_round"]) == pytest.approx(1.0, abs=1e-12)
    assert full["spectral_gap_per_period"] == ""
    assert (one["exact_averaging_rounds"], full["exact_averaging_rounds"]) == ("3", "1")
    assert (one["period"], one["kind"]) == ("3", "time-varying")
    assert float(one["effective_neighbors"]) == pytest.approx(A.effective_neighbors(
        T.one_peer_exponential(8), 0.5, mixing="column_stochastic"), rel=1e-12)
    # heterogeneity: the mean of tau over the period, W(t) = (I + shift by 2^t) / 2
    shifts = [np.roll(np.eye(8), 2**t, axis=0) for t in range(3)]
    assert float(one["heterogeneity"]) == pytest.approx(np.mean(
        [_tau((np.eye(8) + P) / 2, counts) for P in shifts]), rel=1e-12)
    assert float(full["heterogeneity"]) == pytest.approx(0.0, abs=1e-15)
    # the registered builder and the factory build the same graph from the seed's partition
    graph = majority_cliques(8, counts)
    fingerprint = describe(T.as_schedule(graph))["fingerprint"]
    for label in ("cliques", "factory"):
        assert rows[label]["fingerprint"] == fingerprint[:16]
        assert rows[label]["edges"] == str(2 * graph.number_of_edges())
        W = T.column_stochastic(graph)  # SGP's push rule (doubly stochastic only if regular)
        assert float(rows[label]["heterogeneity"]) == pytest.approx(
            A.neighborhood_heterogeneity(W, counts / counts.sum(axis=1, keepdims=True)))
    assert rows["factory"]["object_class"] == "networkx.classes.graph.Graph"
    assert rows["cliques"]["object_class"] == ""
    record = json.loads((Path(rows["factory"]["run_dir"]) / "topology.json").read_text())
    assert record["fingerprint"] == fingerprint
    # the study's own record: gamma, and the rank correlations with their conventions
    data = json.loads((out / "study.json").read_text())
    assert data["gamma"] == 0.5 and data["x"] == ["diameter", "spectral_gap_per_round"]
    assert "counts only where its order is known" in data["rank_correlation"]["censoring"]
    assert {c["metric"] for c in data["rank_correlation"]["coefficients"]} >= {
        "spectral_gap_per_round", "diameter", "effective_neighbors", "heterogeneity"}
    assert result.correlations == data["rank_correlation"]["coefficients"]
    with pytest.raises(ConfigError, match="gamma: must be a number in"):
        run_study(cfg, ["ring"], tmp_path / "bad", gamma=1.0)
    with pytest.raises(ConfigError, match="did you mean 'diameter'"):
        run_study(cfg, ["ring"], tmp_path / "bad", x=["diamter"])


def test_a_registered_topology_built_from_the_partition_runs_and_resumes(
        tmp_path: Path, registered: None) -> None:
    from p2pfl.engine import build, class_counts, run, schedule_for

    (tmp_path / "run.toml").write_text(SKEWED.replace("rounds = 2", "rounds = 3")
                                       + '[topology]\nname = "majority_cliques"\n')
    cfg = load_config(tmp_path / "run.toml")
    ctx, algorithm = build(cfg)  # the partition first, then the topology from it
    graph = majority_cliques(8, class_counts(cfg))
    assert nx.utils.graphs_equal(ctx.schedule.at(0), graph) and graph.number_of_edges() < 28
    with pytest.raises(ConfigError, match="built from the run's partition"):
        schedule_for(cfg, algorithm)  # without the class counts
    whole = run(cfg, tmp_path / "whole", figures=False)
    short = dataclasses.replace(cfg, rounds=2)
    run(short, tmp_path / "resumed", figures=False)
    resumed = run(cfg, tmp_path / "resumed", resume=True, figures=False)  # rebuilds it
    assert resumed[-1]["test_acc"] == whole[-1]["test_acc"]
    assert resumed[-1]["consensus_dist"] == whole[-1]["consensus_dist"]
