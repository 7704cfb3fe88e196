"""`p2pfl study` end to end on tiny synthetic data, `p2pfl analyze`, and the analysis plots."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from analysis import plots
from analysis.study_cells import Progress
from analysis.study_results import format_table, means, study_time
from analysis.study_spec import parse_topology
from p2pfl.cli import main
from p2pfl.config import ConfigError

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


STUDY = """
[study]
seeds = [0, 2]
topologies = ["complete", "ring", "directed_ring"]

[[study.sweep]]
label = "ring"
vary = "num_nodes"
values = [4, 6]
topology = "ring"
"""


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text().splitlines()))


def test_study_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY + STUDY)
    out = tmp_path / "study"
    assert main(["study", str(config), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("skipping dfedavg on directed_ring") == 2
    assert "doubly-stochastic" in printed
    rows = _csv(out / "study.csv")
    labels = ["complete", "ring", "directed_ring", "ring num_nodes=4", "ring num_nodes=6"]
    assert [(r["label"], r["seed"]) for r in rows] == [(a, s) for a in labels for s in "02"]
    ok = {(r["label"], r["seed"]): r for r in rows if r["status"] == "ok"}
    assert {label for label, _ in ok} == set(labels) - {"directed_ring"}
    assert ok[("ring", "0")]["diameter"] == "2"  # a 4-ring
    assert float(ok[("ring", "0")]["spectral_gap_per_round"]) == pytest.approx(
        A.spectral_gap(T.ring(4)))
    assert ok[("ring num_nodes=6", "2")]["diameter"] == "3"
    for (label, seed), row in ok.items():  # each row is its own run, with its seed and size
        config_json = json.loads((Path(row["run_dir"]) / "config.json").read_text())
        assert config_json["seed"] == int(seed)
        assert config_json["data"]["num_nodes"] == (6 if label.endswith("=6") else 4)
        history = [json.loads(line) for line in
                   (Path(row["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
        assert float(row["final_acc"]) == history[-1]["test_acc"]
        assert not (Path(row["run_dir"]) / "curves.png").exists()  # the study draws its own
    # the aggregated rows are the mean and sample sd of the seeds' rows
    data = json.loads((out / "study.json").read_text())
    means = {m["label"]: m for m in _csv(out / "study_mean.csv")}
    for label in ("complete", "ring num_nodes=6"):
        finals = [float(ok[(label, s)]["final_acc"]) for s in "02"]
        assert float(means[label]["final_acc_mean"]) == pytest.approx(np.mean(finals))
        assert float(means[label]["final_acc_sd"]) == pytest.approx(np.std(finals, ddof=1))
        assert means[label]["finished"] == "2"
    # the common target: 0.9 of the best mean final accuracy, rounded down, stated
    best = max(float(m["final_acc_mean"]) for m in means.values() if m["final_acc_mean"])
    assert data["target"] == pytest.approx(0.9 * best, abs=1e-4) and data["target"] <= 0.9 * best
    assert data["target_metric"] == "test_acc" and "the best mean final" in data["target_note"]
    for row in ok.values():  # the first round at or above it, from the run's own metrics
        history = [json.loads(line) for line in
                   (Path(row["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
        first = next((r["round"] for r in history if r["test_acc"] >= data["target"]), "")
        assert row["rounds_to_target"] == str(first)
    assert f"target: {100 * data['target']:.2f} % test accuracy = 0.9 x " in printed
    assert means["directed_ring"]["finished"] == "0" and means["directed_ring"]["seeds"] == "2"
    for name in ("convergence_vs_topology", "curves_by_diameter", "curves_by_gap",
                 "sweep_ring"):
        for suffix in (".png", ".pdf"):
            assert (out / name).with_suffix(suffix).stat().st_size > 1000
    # the sweep's 4-node ring is the topology "ring": run once, its result reused
    for seed in "02":
        assert ok[("ring num_nodes=4", seed)]["same_as"] == f"dfedavg on ring (seed {seed})"
        assert ok[("ring num_nodes=4", seed)]["run_dir"] == ok[("ring", seed)]["run_dir"]
    assert not (out / "ring-num_nodes-4").exists() and (out / "ring-num_nodes-6").is_dir()
    assert means["ring num_nodes=4"]["same_runs_as"] == "ring" and not means["ring"]["same_runs_as"]
    assert ("study: dfedavg on ring num_nodes=4 is the same computation as dfedavg on ring "
            "(seeds 0, 2): the same config; run once") in printed
    # the time split: the runs' own round and evaluation seconds, the parts adding up to the wall
    spent, histories = data["time"], [
        json.loads(line) for run_dir in {row["run_dir"] for row in ok.values()}
        for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    assert spent["rounds_s"] == pytest.approx(sum(r["wall_s"] for r in histories), rel=1e-6)
    assert spent["evaluation_s"] == pytest.approx(sum(r["eval_s"] for r in histories), rel=1e-6)
    parts = spent["rounds_s"] + spent["evaluation_s"] + spent["startup_s"] + spent["writing_s"]
    assert parts == pytest.approx(spent["wall_s"]) and spent["writing_s"] > 0
    assert spent["outside_pct"] == pytest.approx(100 * (1 - spent["rounds_s"] / spent["wall_s"]))
    assert f"({spent['outside_pct']:.1f} %): evaluation" in printed


def test_study_reuses_finished_runs_and_refuses_another_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import p2pfl.engine

    config = tmp_path / "tiny.toml"
    config.write_text(TINY + '[study]\ntopologies = ["complete", "ring"]\n')
    out = tmp_path / "study"
    assert main(["study", str(config), "--out", str(out), "--quiet", "--seeds", "0,1"]) == 0
    first = (out / "study.csv").read_text()

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished run ran again")

    monkeypatch.setattr(p2pfl.engine, "run", no_run)
    assert main(["study", str(config), "--out", str(out), "--quiet", "--seeds", "0,1"]) == 0
    assert (out / "study.csv").read_text() == first
    assert main(["study", str(config), "--out", str(out), "--quiet", "--seeds", "0,1",
                 "--target", "80"]) == 0  # percent, as `compare --target`
    assert json.loads((out / "study.json").read_text())["target"] == 0.8
    capsys.readouterr()
    assert main(["study", str(config), "--out", str(out), "--quiet", "--seeds", "0",
                 "--set", "algorithm.lr=0.2"]) == 2
    err = capsys.readouterr().err
    assert "was run with another config" in err and "algorithm.lr (0.1 -> 0.2)" in err


def test_study_plans_every_run_before_the_first(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY + '[study]\nseeds = [0]\ntopologies = ["complete", "grid:rows=3"]\n')
    out = tmp_path / "study"
    assert main(["study", str(config), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("p2pfl: error: study 'grid:rows=3': topology.rows: ")
    assert err.count("\n") == 1 and not out.exists()  # a wrong value: nothing ran
    assert main(["study", str(config), "--out", str(out), "--quiet", "--topologies", "complete",
                 "--set", "data.num_nodes=300"]) == 2  # 200 samples
    assert capsys.readouterr().err.startswith(
        "p2pfl: error: study dfedavg on complete (seed 0): data: ")
    assert not out.exists()
    assert main(["study", str(config), "--out", str(out), "--quiet", "--topologies",
                 "complete"]) == 0
    capsys.readouterr()
    assert main(["study", str(config), "--out", str(out), "--quiet", "--topologies",
                 "ring,complete", "--set", "algorithm.lr=0.2"]) == 2
    assert "algorithm.lr (0.1 -> 0.2)" in capsys.readouterr().err
    assert not (out / "ring").exists()  # refused before the new topology ran


def test_study_objects_are_checked_before_the_first_run(tmp_path: Path) -> None:
    from analysis.study import run_study
    from p2pfl.config import load_config

    (tmp_path / "tiny.toml").write_text(TINY)
    cfg = load_config(tmp_path / "tiny.toml")
    with pytest.raises(ConfigError, match="study 'big': topology: the topology has 10 nodes"):
        run_study(cfg, {"ring": "ring", "big": nx.star_graph(9)}, tmp_path / "a")
    shaped = load_config(tmp_path / "tiny.toml", {"topology.k": 2})
    with pytest.raises(ConfigError, match="study 'hub': topology.k: is set"):
        run_study(shaped, {"ring": "ring", "hub": nx.star_graph(3)}, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_study_counts_a_longer_run_up_to_its_rounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import p2pfl.engine

    config = tmp_path / "tiny.toml"
    config.write_text(TINY + '[study]\nseeds = [0]\ntopologies = ["ring"]\n')
    out = tmp_path / "study"
    assert main(["study", str(config), "--out", str(out), "--quiet", "--set", "rounds=3"]) == 0
    monkeypatch.setattr(p2pfl.engine, "run", lambda *a, **k: pytest.fail("ran again"))
    assert main(["study", str(config), "--out", str(out), "--quiet"]) == 0  # rounds = 2
    (row,) = _csv(out / "study.csv")
    history = [json.loads(line) for line in (out / "ring/seed0/metrics.jsonl").open()]
    assert len(history) == 3 and row["rounds"] == "2"
    assert float(row["final_acc"]) == history[1]["test_acc"]


def test_study_records_a_run_that_diverges_in_its_first_round(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY + '[study]\nseeds = [0]\ntopologies = ["complete"]\n')
    out = tmp_path / "study"
    assert main(["study", str(config), "--out", str(out), "--quiet",
                 "--set", "algorithm.lr=1e6"]) == 0
    (row,) = _csv(out / "study.csv")
    assert row["status"].startswith("diverged: round 1") and "diverged" in capsys.readouterr().out


def _ranked_rows(cells: list[tuple[float, int | None | str, int]]) -> list[dict]:
    """Study rows of algorithm "a" from (diameter, rounds to target or None or "diverged",
    rounds run)."""
    return [{"algorithm": "a", "run_dir": f"r{i}", "diameter": x, "rounds": rounds,
             "status": "diverged: round 2" if reach == "diverged" else "ok",
             **({} if reach == "diverged" else {"rounds_to_target": reach})}
            for i, (x, reach, rounds) in enumerate(cells)]


def test_diverged_runs_rank_after_every_run_that_did_not() -> None:
    from scipy.stats import kendalltau

    from analysis.study_rank import correlation_text, rank_correlations

    # diameters 1..5 reach the target in 2, 4, 3, 6, 5 rounds: 8 concordant pairs, 2 discordant,
    # tau 6 / 10 = 0.6 when the diverged runs are dropped (as before). A diverged run of
    # diameter 6 is slower than all five (5 concordant pairs), one of diameter 0.5 too (5
    # discordant); the two tie: tau-b = (13 - 7) / sqrt(21 x 20) = 0.293
    rows = _ranked_rows([(1, 2, 10), (2, 4, 10), (3, 3, 10), (4, 6, 10), (5, 5, 10),
                         (6, "diverged", 10), (0.5, "diverged", 10)])
    (c,) = rank_correlations(rows, ("diameter",))
    assert (c["n"], c["censored"], c["diverged"], c["pairs"]) == (7, 0, 2, 21)
    assert c["kendall_tau"] == pytest.approx(6 / math.sqrt(420), abs=1e-12)
    # every pair ordered: scipy's tau-b and its p-value with the diverged runs at 100 rounds
    tau, p = kendalltau([1, 2, 3, 4, 5, 6, 0.5], [2, 4, 3, 6, 5, 100, 100])
    assert (c["kendall_tau"], c["kendall_p"]) == (pytest.approx(tau, abs=1e-12), p)
    assert c["spearman_rho"] is not None
    text = correlation_text([c], "80 %", 0.9)
    assert "censored  diverged  pairs" in text and " 7      0         2         21/21" in text
    assert "left out" not in text


def test_a_run_censored_at_a_shorter_horizon_is_not_ordered() -> None:
    from analysis.study_rank import rank_correlations

    # rounds to target 3, > 5 (a run of 5 rounds), 8 and 10: the short run is known to be
    # slower than the first only, so 4 of the 6 pairs count, all concordant: tau 1. Ranked
    # after every run that reached the target (as before) it gave (4 - 2) / 6 = 1/3
    (c,) = rank_correlations(_ranked_rows([(1, 3, 20), (2, None, 5), (3, 8, 20), (4, 10, 20)]),
                             ("diameter",))
    assert (c["n"], c["censored"], c["pairs"], c["kendall_tau"]) == (4, 1, 4, 1.0)
    # no p-value (a pair left out), no Spearman rho (the short run cannot be ranked)
    assert (c["kendall_p"], c["spearman_rho"], c["spearman_p"]) == (None, None, None)
    # censored after 9 rounds: slower than the runs of 3 and 8 rounds, not ordered with 10
    (c,) = rank_correlations(_ranked_rows([(1, 3, 20), (2, None, 9), (3, 8, 20), (4, 10, 20)]),
                             ("diameter",))
    assert (c["pairs"], c["kendall_tau"]) == (5, pytest.approx(3 / 5, abs=1e-12))
    # censored after 10 or more rounds: slower than all three, every pair ordered
    (c,) = rank_correlations(_ranked_rows([(1, 3, 20), (2, None, 10), (3, 8, 20), (4, 10, 20)]),
                             ("diameter",))
    assert (c["pairs"], c["kendall_tau"]) == (6, pytest.approx(2 / 6, abs=1e-12))
    assert c["kendall_p"] is not None and c["spearman_rho"] is not None


def test_rank_correlation_refuses_outcomes_that_do_not_match() -> None:
    from analysis.study_rank import CENSORED, Outcome, correlation
    from topologies import ParameterError

    with pytest.raises(ParameterError, match="outcomes must have one entry per value of x"):
        correlation([1.0, 2.0], [Outcome(CENSORED, 3.0)])
    with pytest.raises(ParameterError, match="outcomes kind must be"):
        correlation([1.0], [Outcome("late", 3.0)])
    with pytest.raises(ParameterError, match="rounds of a censored run must be a finite"):
        correlation([1.0], [Outcome(CENSORED)])
    with pytest.raises(ParameterError, match="x must not hold NaN"):
        correlation([math.nan], [Outcome(CENSORED, 3.0)])


def test_study_from_python_with_objects_and_a_callable_sweep(tmp_path: Path) -> None:
    from analysis.study import run_study
    from analysis.study_spec import Sweep
    from p2pfl.config import load_config

    (tmp_path / "tiny.toml").write_text(TINY)
    cfg = load_config(tmp_path / "tiny.toml")
    hub = nx.star_graph(3)  # an nx.Graph of 4 nodes, passed as an object
    result = run_study(cfg, {"hub": hub, "ring": "ring"}, tmp_path / "py",
                       sweeps=[Sweep("own ring", "num_nodes", [4, 5], T.ring)], echo=print)
    assert [(r["label"], r["status"]) for r in result.rows] == [
        ("hub", "ok"), ("ring", "ok"), ("own ring num_nodes=4", "ok"),
        ("own ring num_nodes=5", "ok")]
    hub_row = result.rows[0]
    assert hub_row["diameter"] == 2 and hub_row["kind"] == "static"
    assert (Path(hub_row["run_dir"]) / "topology.json").exists()
    assert result.rows[3]["diameter"] == 2 and result.rows[3]["value"] == 5
    again = run_study(cfg, {"hub": hub, "ring": "ring"}, tmp_path / "py",
                      sweeps=[Sweep("own ring", "num_nodes", [4, 5], T.ring)])
    assert [r["final_acc"] for r in again.rows] == [r["final_acc"] for r in result.rows]
    with pytest.raises(ConfigError, match="the topology object differs"):
        run_study(cfg, {"hub": nx.cycle_graph(4)}, tmp_path / "py")  # folder 'hub' is taken


def test_round_time_is_the_union_of_the_rounds_spans() -> None:
    bar = Progress([], show=False)
    bar.round_spans = [(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]  # stacked rounds overlap
    assert bar.rounds_s() == pytest.approx(4.0)
    spent = study_time(10.0, 4.0, 1.5, 0.5)
    assert spent["startup_s"] == pytest.approx(4.0) and spent["outside_pct"] == pytest.approx(60)


def test_means_by_hand() -> None:
    from analysis.study import StudyResult

    def row(label: str, final: float, reach: int | None, exact: float = math.inf) -> dict:
        return {"label": label, "status": "ok", "kind": "static", "diameter": 2,
                "spectral_gap_per_round": 0.5, "exact_averaging_rounds": exact,
                "final_acc": final, "best_acc": final, "rounds_to_target": reach, "rounds": 6}

    rows = [row("a", 0.5, 4), row("a", 0.7, None),
            {"label": "a", "seed": 2, "status": "diverged: r 3"},
            {"label": "b", "seed": 0, "status": "skipped: not connected"},
            row("c", 0.8, 3, 1), row("c", 0.8, 5, 1), row("d", 0.2, None), row("d", 0.2, None),
            row("e", 0.6, 2), row("e", 0.6, 3), row("e", 0.6, None)]
    a, b, c, d, e = means(rows)
    assert (a["seeds"], a["finished"], a["reached"]) == (3, 2, 1)
    assert a["final_acc_mean"] == pytest.approx(0.6)
    assert a["final_acc_sd"] == pytest.approx(0.1 * 2**0.5)
    assert a["diameter_sd"] == 0.0 and a["exact_averaging_rounds_mean"] == math.inf
    assert b["status"] == "skipped: not connected" and b["final_acc_mean"] is None
    # censored: never the mean of the seeds that reached it (4); a lower bound, the censored
    # seed counted at its 6 rounds + 1: (4 + 7) / 2; the median with it at +inf is inf
    assert (a["rounds_to_target_mean"], a["rounds_to_target_sd"]) == (5.5, None)
    assert a["rounds_to_target_lower_bound"] is True
    assert a["rounds_to_target_median"] == math.inf
    assert (c["rounds_to_target_mean"], c["rounds_to_target_lower_bound"]) == (4.0, False)
    assert c["rounds_to_target_sd"] == pytest.approx(2**0.5)
    assert c["rounds_to_target_median"] == 4.0 and c["exact_averaging_rounds_mean"] == 1
    assert (d["reached"], d["rounds_to_target_mean"], d["rounds_to_target_median"]) == (
        0, 7.0, math.inf)
    assert (e["rounds_to_target_mean"], e["rounds_to_target_median"]) == (4.0, 3.0)
    text = format_table(StudyResult(rows, [a, b, c, d, e], 0.5))
    lines = {line.split()[0]: line for line in text.splitlines() if " static " in line}
    assert ">= 5.5" in lines["a"] and "1/2" in lines["a"]  # a lower bound, said as one
    assert "4.0 ± 1.4" in lines["c"] and "1 (exact: 1)" not in lines["c"]
    assert "> 6" in lines["d"] and "0/2" in lines["d"] and ">= 4.0" in lines["e"]
    assert "'>= x' is a lower bound" in text


def test_means_take_the_kind_of_a_finished_seed() -> None:
    rows = [{"label": "er", "status": "skipped: not connected"},
            {"label": "er", "status": "ok", "kind": "time-varying", "final_acc": 0.5}]
    (m,) = means(rows)
    assert m["kind"] == "time-varying" and m["final_acc_mean"] == 0.5


def test_sweep_values_are_plain_numbers_strings_or_booleans() -> None:
    from analysis.study_spec import Sweep, study_entries

    entries = study_entries([], [Sweep("r", "num_nodes", np.array([4, 6]), T.ring)])
    assert [(e.label, e.value, type(e.value)) for e in entries] == [
        ("r num_nodes=4", 4, int), ("r num_nodes=6", 6, int)]
    with pytest.raises(ConfigError, match="each value must be a number, a string or a boolean"):
        study_entries([], [Sweep("g", "shape", [(2, 4)], lambda s: nx.grid_2d_graph(*s))])
    with pytest.raises(ConfigError, match="study.sweep.1..label: 'exp' and 'exp' would share"):
        study_entries([], [Sweep("exp", "base", [2, 4], "exponential"),
                           Sweep("exp", "directed", [False], "exponential")])


@pytest.mark.parametrize(("table", "message"), [
    ('seed = [0]', "study.seed: did you mean 'seeds'? unknown field"),
    ('seeds = [0, 0]', "names a seed twice"),
    ('seeds = []', "must be a non-empty list"),
    ('target = 1.5', "study.target: must be a test accuracy in (0, 1]"),
    ('topologies = "ring"', "study.topologies: must be a list"),
    ('topologies = [{directed = true}]', "a topology table needs a name"),
    ('topologies = ["ring", "Ring"]', "would run in the same folder 'ring'"),
    ('topologies = [{label = "Study.CSV", name = "ring"}]', "named like the study's output"),
    ('topologies = ["ring:base"]',
     "study.topologies[0]: 'ring:base': an option is key=value, got 'base'"),
    ('topologies = ["ring:colour=1"]',
     "study 'ring:colour=1': topology.colour: did you mean 'topology.cols'?"),
    ('[[study.sweep]]\nlabel = "r"\nvary = "num_nodes"\ntopology = "ring"',
     "study.sweep[0].values: is required"),
    ('[[study.sweep]]\nlabel = "r"\nvary = "num_nodes"\nvalues = []\ntopology = "ring"',
     "sweep 'r' has no values"),
])
def test_bad_study_tables_are_one_line_errors(tmp_path: Path, table: str, message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(TINY + "[study]\n" + table + "\n")
    assert main(["study", str(config), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_study_config_is_not_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "s.toml"
    config.write_text(TINY + STUDY)
    assert main(["run", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "study: a [study] table is run by `p2pfl study CONFIG`" in capsys.readouterr().err


def test_study_rejects_compare_and_parses_options(tmp_path: Path) -> None:
    config = tmp_path / "cmp.toml"
    config.write_text(TINY + '[[compare]]\nlabel = "x"\n"algorithm.lr" = 0.2\n')
    assert main(["study", str(config), "--topologies", "ring", "--out", str(tmp_path)]) == 2
    assert parse_topology("exponential:directed=false:base=3") == (
        "exponential:directed=false:base=3",
        {"topology.name": "exponential", "topology.directed": False, "topology.base": 3})


def test_format_table_lists_skips() -> None:
    from analysis.study import StudyResult

    rows = [{"label": "ring", "seed": 0, "status": "ok", "kind": "static", "diameter": 8,
             "spectral_gap": 0.05, "final_acc": 0.8, "best_acc": 0.81, "rounds_to_target": None},
            {"label": "torus", "seed": 0, "status": "skipped: unknown"}]
    text = format_table(StudyResult(rows, means(rows), 0.7))
    assert "70.0 %" in text and "0/1" in text and "torus (seed 0): skipped: unknown" in text


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
    assert main(["analyze", "random_out", "--n", "16", "--set", "k=2",
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
    assert lines["mixing_time"] == "-"
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
    ):
        assert [p.suffix for p in paths] == [".png", ".pdf"]
        assert all(p.stat().st_size > 1000 for p in paths)
    np.testing.assert_array_equal(
        plots.label_counts(np.array([0, 1, 1, 2]), np.array([[0, 3], [1, 2]]), 3),
        [[1, 0, 1], [0, 2, 0]])
    with pytest.raises(ValueError, match="at most"):
        plots.draw_topology(nx.path_graph(plots.DRAW_MAX_NODES + 1), tmp_path / "big")


def test_a_study_where_every_topology_is_skipped_is_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "s.toml"
    config.write_text(TINY + '[study]\ntopologies = ["directed_ring", "exponential"]\n')
    assert main(["study", str(config), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("p2pfl: error: study: no cell can run, all are skipped (first: "
                          "dfedavg on directed_ring (seed 1): ") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_ctrl_c_in_a_study_says_to_rerun_the_study(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import p2pfl.engine
    from p2pfl.errors import RunInterrupted

    def interrupted(*args: object, **kwargs: object) -> None:
        raise RunInterrupted("stopped after round 1 with a checkpoint",
                             "continue with: p2pfl resume somewhere")

    monkeypatch.setattr(p2pfl.engine, "run", interrupted)
    config = tmp_path / "s.toml"
    config.write_text(TINY + '[study]\ntopologies = ["ring"]\n')
    assert main(["study", str(config), "--out", str(tmp_path / "o"), "--quiet"]) == 130
    assert capsys.readouterr().err == (
        "p2pfl: interrupted: stopped after round 1 with a checkpoint; continue the study by "
        "running the same command again (finished runs are kept)\n")


GRID = """
[study]
seeds = [0, 1]
algorithms = ["dfedavg", {name = "dfedavgm", momentum = 0.5, label = "dfedavgm"}, "fedavg"]
topologies = ["complete", "ring", "star"]
"""


def _table(path: Path) -> list[dict[str, str]]:
    """study.csv without its folders (two studies in two folders compare by their numbers)."""
    return [{k: v for k, v in r.items() if k != "run_dir"} for r in _csv(path)]


def test_a_grid_of_algorithms_runs_each_cell_in_its_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY + GRID)
    out = tmp_path / "grid"
    assert main(["study", str(config), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("skipping fedavg on") == 4 and "centralized" in printed  # off the star
    rows = _csv(out / "study.csv")
    assert len(rows) == 3 * 3 * 2
    ok = [r for r in rows if r["status"] == "ok"]
    assert {(r["algorithm"], r["label"]) for r in ok} == {
        ("dfedavg", "complete"), ("dfedavg", "ring"), ("dfedavg", "star"),
        ("dfedavgm", "complete"), ("dfedavgm", "ring"), ("dfedavgm", "star"),
        ("fedavg", "star")}
    for r in ok:  # OUT/<algorithm>/<topology>/seed<k>, each with its algorithm and options
        assert Path(r["run_dir"]) == out / r["algorithm"] / r["label"] / f"seed{r['seed']}"
        algorithm = json.loads((Path(r["run_dir"]) / "config.json").read_text())["algorithm"]
        assert algorithm["name"] == r["algorithm"]
        assert algorithm.get("momentum", 0.0) == (0.5 if r["algorithm"] == "dfedavgm" else 0.0)
    means = _csv(out / "study_mean.csv")
    assert [(m["algorithm"], m["label"]) for m in means][:3] == [
        ("dfedavg", "complete"), ("dfedavg", "ring"), ("dfedavg", "star")]
    assert any(line.startswith("algorithm  topology") for line in printed.splitlines())
    for name in ("convergence_vs_topology", "curves_by_diameter_dfedavgm", "curves_by_gap_fedavg"):
        assert (out / name).with_suffix(".png").stat().st_size > 1000


def test_algorithms_on_the_command_line_take_their_own_options(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--algorithms dfedavgm,dfedsgpsm --set algorithm.momentum=...: the option is checked
    against each named algorithm, not the config's dfedavg (which takes no momentum)."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "two"
    assert main(["study", str(config), "--out", str(out), "--quiet", "--topologies", "star",
                 "--algorithms", "dfedavgm,dfedsgpsm", "--set", "algorithm.momentum=0.7",
                 "--seeds", "0"]) == 0  # on a star, not the same computation: both run
    for name in ("dfedavgm", "dfedsgpsm"):
        run = out / name / "star" / "seed0"
        assert json.loads((run / "config.json").read_text())["algorithm"]["momentum"] == 0.7
    # An algorithm that does not take the option is named, before any run.
    assert main(["study", str(config), "--out", str(tmp_path / "refused"), "--quiet",
                 "--topologies", "ring", "--algorithms", "dfedavgm,dfedavg", "--set",
                 "algorithm.momentum=0.7"]) == 2
    assert "'dfedavg' on 'ring'" in capsys.readouterr().err
    assert not (tmp_path / "refused" / "dfedavgm").exists()


@pytest.mark.parametrize("stack", ["1", "3"])
def test_a_grid_killed_midway_reruns_only_the_missing_cells(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: str) -> None:
    """Also when the cells run stacked, 3 at a time: the same table (float64 runs)."""
    import p2pfl.engine
    import p2pfl.engine.experiment

    config = tmp_path / "tiny.toml"
    config.write_text(TINY + GRID)
    whole = tmp_path / "whole"
    assert main(["study", str(config), "--out", str(whole), "--quiet"]) == 0
    real, started = p2pfl.engine.run, []

    def killed_after_three(cfg: object, out_dir: Path, **kwargs: object) -> object:
        started.append(Path(out_dir))
        if len(started) > 3:
            raise KeyboardInterrupt
        return real(cfg, out_dir, **kwargs)

    def counted(cfg: object, out_dir: Path, **kwargs: object) -> object:
        started.append(Path(out_dir))
        return real(cfg, out_dir, **kwargs)

    grid = tmp_path / "grid"
    for module in (p2pfl.engine, p2pfl.engine.experiment):  # a stacked member runs the latter's
        monkeypatch.setattr(module, "run", killed_after_three)
    args = ["study", str(config), "--out", str(grid), "--quiet", "--stack", stack]
    assert main(args) != 0  # Ctrl-C
    done = started[:3]
    started.clear()
    for module in (p2pfl.engine, p2pfl.engine.experiment):
        monkeypatch.setattr(module, "run", counted)
    assert main(args) == 0
    assert len(started) == 14 - 3 and not set(done) & set(started)  # 14 cells can run
    assert _table(grid / "study.csv") == _table(whole / "study.csv")


def test_a_study_target_is_one_loss_or_one_accuracy(tmp_path: Path) -> None:
    from analysis.study import common_target, rounds_to_target
    from analysis.study import run as run_study
    from p2pfl.config import load_config

    history = [{"round": 1, "test_acc": 0.5, "test_loss": 1.2},
               {"round": 2, "test_acc": 0.7, "test_loss": 0.8}]
    assert rounds_to_target(history, 0.7) == 2 and rounds_to_target(history, 0.71) is None
    assert rounds_to_target(history, 1.0, metric="test_loss") == 2
    rows = [{"status": "ok", "final_acc": 0.7, "algorithm": "a", "label": "x", "seed": 0},
            {"status": "ok", "final_acc": 0.9, "algorithm": "a", "label": "x", "seed": 1},
            {"status": "ok", "final_acc": 0.82, "algorithm": "b", "label": "y", "seed": 0},
            {"status": "diverged: round 2", "algorithm": "b", "label": "z", "seed": 0}]
    metric, value, note = common_target(rows)  # 0.9 x the best mean, 0.82 (not a's best seed)
    assert (metric, value) == ("test_acc", 0.738)
    assert note == ("73.80 % test accuracy = 0.9 x 82.00 %, the best mean final accuracy "
                    "(b on y)")
    assert common_target(rows[3:]) == ("test_acc", None, "none (no run finished)")
    (tmp_path / "tiny.toml").write_text(TINY)
    cfg = load_config(tmp_path / "tiny.toml")
    result = run_study(cfg, ["complete"], tmp_path / "s", target_loss=50.0)
    assert result.target_metric == "test_loss" and result.rows[0]["rounds_to_target"] == 1
    with pytest.raises(ConfigError, match="one target"):
        run_study(cfg, ["complete"], tmp_path / "t", target=0.5, target_loss=1.0)


def test_load_runs_gives_one_row_per_run_and_round_with_the_study_labels(
        tmp_path: Path) -> None:
    """The study's labels, its measurements of an object topology, and the cells it reused."""
    import shutil

    from analysis.study import run as run_study
    from p2pfl.config import load_config

    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "study"
    exp = "exponential:directed=false"  # on 4 nodes: the complete graph, where SGP = DFedAvg
    run_study(load_config(tmp_path / "tiny.toml"), {exp: exp, "hub": nx.star_graph(3)}, out,
              seeds=[0, 1], algorithms=["dfedavg", "osgp"], echo=lambda line: None)
    df = A.load_runs(out)
    assert len(df) == 2 * 2 * 2 * 2  # algorithms x topologies x seeds x rounds
    assert list(df.columns[:9]) == ["run_dir", "algorithm", "topology", "num_nodes", "seed",
                                    "same_as", "diameter", "spectral_gap_per_round", "round"]
    assert {"test_acc", "train_loss", "algorithm.lr", "data.partition"} <= set(df.columns)
    assert set(df["topology"]) == {exp, "hub"}  # the study's labels, not "exponential"
    study = {(r["algorithm"], r["label"], int(r["seed"])): r for r in _csv(out / "study.csv")}
    for row in df.itertuples():  # the same numbers as the study's own table and the run's file
        cell = study[(row.algorithm, row.topology, row.seed)]
        assert row.diameter == int(cell["diameter"]) == (2 if row.topology == "hub" else 1)
        assert row.spectral_gap_per_round == float(cell["spectral_gap_per_round"]) > 0
        same_as = row.same_as if isinstance(row.same_as, str) else ""  # NaN: none
        assert row.run_dir == cell["run_dir"] and same_as == cell["same_as"]
        if row.round == 2:
            assert row.test_acc == float(cell["final_acc"])
    reused = df[df["same_as"].notna()]  # SGP on the complete graph: DFedAvg's run
    assert set(zip(reused["algorithm"], reused["topology"])) == {("osgp", exp)}
    assert set(reused["same_as"]) == {f"dfedavg on {exp} (seed {s})" for s in (0, 1)}
    assert df.groupby("run_dir").size().sort_values().tolist() == [2] * 4 + [4] * 2
    assert len(A.run_records([out / "osgp"], measure=False)) == 2 * 2  # osgp on the hub only
    alone = tmp_path / "alone"  # a run of no study: the config's names, the topology measured
    shutil.copytree(out / "dfedavg" / "exponential-directed-false" / "seed0", alone)
    row = A.run_records([alone])[-1]
    assert (row["algorithm"], row["topology"], row["diameter"]) == ("dfedavg", "exponential", 1)
    assert row["spectral_gap_per_round"] == pytest.approx(
        float(study[("dfedavg", exp, 0)]["spectral_gap_per_round"]))
    assert A.run_records([alone], measure=False)[-1]["diameter"] is None
