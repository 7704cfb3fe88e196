"""`p2pfl study` end to end on tiny synthetic data, `p2pfl analyze`, and the analysis plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from analysis import plots
from analysis.study import format_table, parse_topology, rounds_to_target
from p2pfl.cli import main

TINY = """
seed = 1
rounds = 2
device = "cpu"
[data]
name = "synthetic"
num_nodes = 4
partition = "iid"
synthetic_train = 200
synthetic_test = 100
[model]
name = "mlp"
[algorithm]
name = "dfedavg"
lr = 0.1
local_epochs = 0
local_steps = 2
batch_size = 16
[eval]
local_samples = 50
"""


def test_study_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "study"
    rc = main(["study", str(config), "--out", str(out), "--quiet",
               "--topologies", "complete,ring,directed_ring"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "skipping 'directed_ring'" in printed and "doubly-stochastic" in printed
    rows = list(csv.DictReader((out / "study.csv").read_text().splitlines()))
    assert [r["label"] for r in rows] == ["complete", "ring", "directed_ring"]
    ok = {r["label"]: r for r in rows if r["status"] == "ok"}
    assert set(ok) == {"complete", "ring"}
    assert ok["complete"]["diameter"] == "1" and float(ok["complete"]["spectral_gap"]) == (
        pytest.approx(1.0))
    assert ok["ring"]["diameter"] == "2"  # a 4-ring
    assert float(ok["ring"]["spectral_gap"]) == pytest.approx(A.spectral_gap(T.ring(4)))
    data = json.loads((out / "study.json").read_text())
    best = max(float(r["final_acc"]) for r in ok.values())
    assert data["target_acc"] == pytest.approx(round(0.9 * best, 4))
    history = [json.loads(line) for line in
               (out / "ring" / "metrics.jsonl").read_text().splitlines()]
    assert int(ok["ring"]["rounds_to_target"]) == rounds_to_target(history, data["target_acc"])
    for name in ("convergence_vs_topology.png", "convergence_vs_topology.pdf", "curves.png"):
        assert (out / name).stat().st_size > 1000
    assert (out / "complete" / "final.pt").exists()
    # the same runs drawn again from their directories
    paths = plots.plot_runs([out / "complete", out / "ring"], tmp_path / "again")
    assert all(p.exists() for p in paths)


def test_study_rejects_compare_and_parses_options(tmp_path: Path) -> None:
    config = tmp_path / "cmp.toml"
    config.write_text(TINY + '[[compare]]\nlabel = "x"\n"algorithm.lr" = 0.2\n')
    assert main(["study", str(config), "--topologies", "ring", "--out", str(tmp_path)]) == 2
    assert parse_topology("exponential:directed=false:base=3") == (
        "exponential:directed=false:base=3",
        {"topology.name": "exponential", "topology.directed": False, "topology.base": 3})


def test_format_table_lists_skips() -> None:
    from analysis.study import StudyResult

    result = StudyResult([{"label": "ring", "status": "ok", "diameter": 8, "spectral_gap": 0.05,
                           "min_B": 1, "final_acc": 0.8, "best_acc": 0.81,
                           "rounds_to_target": None},
                          {"label": "torus", "status": "skipped: unknown"}], 0.7)
    text = format_table(result)
    assert "not reached" in text and "torus: skipped: unknown" in text


def test_analyze_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "exponential", "--n", "16"]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert float(lines["slem"]) == pytest.approx(0.6) and lines["diameter"].strip() == "4"
    assert main(["analyze", "exponential", "--n", "16", "--set", "directed=false", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["directed"] is False and result["slem"] == pytest.approx(0.5)
    assert main(["analyze", "one_peer_exponential", "--n", "12", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["min_B"] == 4 and result["per_round_rate"] == pytest.approx(0.6762442799)
    assert main(["analyze", "ring", "--n", "6", "--mixing", "column_stochastic", "--json"]) == 0
    assert main(["analyze", "no_such", "--n", "8"]) == 2
    assert main(["analyze", "ring", "--set", "colour=1"]) == 2
    assert main(["analyze", "directed_ring", "--mixing", "doubly_stochastic"]) == 2
    err = capsys.readouterr().err
    assert err.count("p2pfl: error:") == 3 and "colour" in err and "undirected" in err


def test_analyze_cli_horizon_is_an_analysis_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "random_out", "--n", "16", "--set", "out_degree=2",
                 "--set", "horizon=40", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["horizon"] == 40 and "topology" in result
    assert result["per_round_rate"] == pytest.approx(
        A.per_round_rate(T.random_out(16, 2, seed=0), 40), abs=1e-12)
    for bad in ("0", "-2", "2.5", "many"):
        assert main(["analyze", "random_out", "--set", f"horizon={bad}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("p2pfl: error: --set: horizon must be an integer >= 1, got ")
        assert err.count("\n") == 1


def test_analyze_cli_says_why_there_is_no_consensus(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    edges = tmp_path / "sink.txt"
    edges.write_text("0 1\n1 2\n2 1\n")  # node 0 sends, nobody sends to node 0
    assert main(["analyze", "from_edges", "--n", "3", "--set", f"path={edges}"]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert lines["no_consensus"] == "not strongly connected: 2 strongly connected components"
    assert lines["slem"] == "1" and lines["spectral_gap"] == "0"
    assert lines["mixing_time(0.001)"] == "-"
    assert main(["analyze", "from_edges", "--n", "16", "--set", f"path={edges}"]) == 2
    assert capsys.readouterr().err == ("p2pfl: error: topology: path sink.txt: the edge file "
                                       "names nodes 0..2 (3 nodes), the run has 16 nodes\n")


def test_plots_write_png_and_pdf(tmp_path: Path) -> None:
    for paths in (
        plots.draw_topology(T.exponential(8), tmp_path / "topo"),
        plots.plot_spectrum({"ring": T.ring(12), "directed ring": T.directed_ring(12)},
                            tmp_path / "spectrum"),
        plots.plot_consensus({"ring": A.consensus_distance(
            A.gossip_consensus(T.ring(8), np.arange(8.0), 20))}, tmp_path / "consensus"),
        plots.plot_partition(plots.label_counts(np.array([0, 1, 1, 2, 2, 2]),
                                                np.array([[0, 1, 2], [3, 4, 5]]), 3),
                             tmp_path / "partition"),
        plots.plot_convergence_vs_topology(
            [{"label": "a", "diameter": 2, "spectral_gap": 0.5, "final_acc": 0.8,
              "rounds_to_target": 3, "rounds": 5},
             {"label": "b", "diameter": float("inf"), "spectral_gap": 0.1, "final_acc": 0.6,
              "rounds_to_target": None, "rounds": 5}], tmp_path / "conv", target=0.7),
    ):
        assert [p.suffix for p in paths] == [".png", ".pdf"]
        assert all(p.stat().st_size > 1000 for p in paths)
    np.testing.assert_array_equal(
        plots.label_counts(np.array([0, 1, 1, 2]), np.array([[0, 3], [1, 2]]), 3),
        [[1, 0, 1], [0, 2, 0]])
    with pytest.raises(ValueError, match="at most"):
        plots.draw_topology(nx.path_graph(plots.DRAW_MAX_NODES + 1), tmp_path / "big")
