"""`p2pfl table` and `p2pfl compare`: the comparison table of finished runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p2pfl.cli import main
from p2pfl.config import ConfigError
from p2pfl.report.labels import distinct_labels, unique_paths
from p2pfl.report.summary import find_runs, summarize
from p2pfl.report.table import comparison_table, parse_target
from tests.conftest import tiny_toml


def _fake_run(path: Path, accs: list[float], messages: int = 8,
              config: dict | None = None, **series: list[float]) -> Path:
    """A run directory with one evaluated round per accuracy; `series` adds metrics by round
    (e.g. test_acc_personal=[...]), `config` writes config.json."""
    path.mkdir(parents=True)
    with open(path / "metrics.jsonl", "w") as f:
        for t, acc in enumerate(accs, start=1):
            extra = {key: values[t - 1] for key, values in series.items()}
            f.write(json.dumps({"round": t, "test_acc": acc, "messages": messages,
                                "bytes_sent": 1e6, **extra}) + "\n")
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    return path


def _config(lr: float = 0.1, seed: int = 0, **top: object) -> dict:
    """A config.json as a run writes it (the fields the table compares)."""
    return {"seed": seed, "rounds": 2, "device": "cpu", **top,
            "algorithm": {"name": "dfedavg", "lr": lr},
            "engine": {"checkpoint_every": 0, "chunk_size": 0}}


def _rows(table: str) -> dict[str, list[str]]:
    """The table's rows as label -> cells (the header row included, under "run")."""
    lines = [line.strip("|").split(" | ") for line in table.splitlines()
             if line.startswith("|") and "---" not in line]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in lines}


def test_summary_takes_the_mean_of_the_last_rounds_and_the_first_round_at_target(tmp_path):
    run = _fake_run(tmp_path / "a", [0.1, 0.5, 0.7, 0.6, 0.9])
    s = summarize(run, last=3, target=0.65)
    assert s.last_mean == pytest.approx((0.7 + 0.6 + 0.9) / 3)
    assert s.best == 0.9 and s.rounds_to_target == 3 and s.label == "a"
    assert summarize(run, last=3, target=0.95).rounds_to_target is None


def test_table_groups_seeds_and_sorts_by_accuracy(tmp_path):
    _fake_run(tmp_path / "slow" / "seed0", [0.2, 0.4])
    _fake_run(tmp_path / "fast" / "seed0", [0.5, 0.8])
    _fake_run(tmp_path / "fast" / "seed1", [0.7, 0.6])
    table = comparison_table(find_runs([tmp_path]), last=1, target=0.75)
    rows = table.splitlines()[2:]
    assert rows[0].startswith("| fast | 2 | 2 (2 unfinished) | 70.00 ± 10.00 | 75.00 ± 5.00 | "
                              "2.0 (1/2 runs) | 2.0 (1/2 runs) |")  # 1 MB a round
    assert rows[1].startswith("| slow | 1 | 2 (1 unfinished) | 40.00 | 40.00 | not reached | "
                              "not reached |")
    _fake_run(tmp_path / "slow" / "seed1", [0.2, 0.4, 0.5])
    (tmp_path / "slow" / "seed1" / "summary.json").write_text("{}")
    assert "| slow | 2 | 2-3 (1 unfinished) |" in comparison_table(find_runs([tmp_path]))


def test_seeds_pool_across_folders_and_other_configs_get_rows_named_by_their_path(tmp_path):
    """runs/a/ring and runs/c/ring ran one config (seeds 0-2, one extended to more rounds on
    another device), runs/b/ring another: two rows, never one mean of both."""
    _fake_run(tmp_path / "a" / "ring" / "seed0", [0.5, 0.6], config=_config(seed=0))
    _fake_run(tmp_path / "a" / "ring" / "seed1", [0.5, 0.8],
              config={**_config(seed=1), "rounds": 3, "device": "cuda"})
    _fake_run(tmp_path / "c" / "ring" / "seed2", [0.5, 0.7], config=_config(seed=2))
    _fake_run(tmp_path / "b" / "ring" / "seed0", [0.5, 0.2], config=_config(lr=0.5))
    _fake_run(tmp_path / "b" / "star" / "seed0", [0.5, 0.9], config=_config(lr=0.5))
    rows = _rows(comparison_table(find_runs([tmp_path]), last=1))
    assert list(rows) == ["run", "star", "a/ring + c/ring", "b/ring"]
    assert rows["a/ring + c/ring"][:3] == ["3", "2 (3 unfinished)", "70.00 ± 8.16"]
    assert rows["b/ring"][:3] == ["1", "2 (1 unfinished)", "20.00"]
    assert list(_rows(comparison_table(find_runs([tmp_path / "a", tmp_path / "c"]))))[1:] == [
        "ring"]


def test_a_folder_whose_seeds_ran_different_configs_is_refused(tmp_path, capsys):
    _fake_run(tmp_path / "x" / "ring" / "seed0", [0.5], config=_config(lr=0.1))
    _fake_run(tmp_path / "x" / "ring" / "seed1", [0.5], config=_config(lr=0.2, seed=1))
    with pytest.raises(ConfigError, match=r"seed0 and seed1 differ in algorithm.lr "
                       r"\(0.1 -> 0.2\)\); the seed folders of one variant may differ only"):
        comparison_table(find_runs([tmp_path]))
    assert main(["table", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_run_given_twice_counts_once(tmp_path, capsys):
    _fake_run(tmp_path / "ring" / "seed0", [0.5, 0.6])
    _fake_run(tmp_path / "ring" / "seed1", [0.5, 0.8])
    assert main(["table", str(tmp_path), str(tmp_path / "ring" / "seed1"), "--last", "1"]) == 0
    assert _rows(capsys.readouterr().out)["ring"][:3] == ["2", "2 (2 unfinished)", "70.00 ± 10.00"]


def test_the_header_names_the_evaluations_averaged(tmp_path):
    _fake_run(tmp_path / "long", [0.1] * 8)
    rows = _rows(comparison_table([tmp_path / "long"], last=10))
    assert rows["run"][2:4] == ["test_acc % (mean of last 10 evaluations)",
                                "evaluations averaged (rounds)"]
    assert rows["long"][3] == "1 to 8"
    _fake_run(tmp_path / "short" / "seed0", [0.1] * 3)
    _fake_run(tmp_path / "short" / "seed1", [0.1] * 12)
    rows = _rows(comparison_table(find_runs([tmp_path]), last=10))
    assert rows["short"][3] == "1-3 to 3-12"
    final = comparison_table(find_runs([tmp_path]))  # by default: each run's final evaluation
    assert _rows(final)["run"][2] == "test_acc % (final)"
    assert "Accuracies: each run's final evaluation" in final


def test_an_algorithms_own_accuracies_get_columns(tmp_path):
    _fake_run(tmp_path / "fedfsa" / "seed0", [0.5, 0.6, 0.7], test_acc_personal=[0.2, 0.8, 0.9],
              test_acc_local_mean=[0.1, 0.1, 0.1])
    _fake_run(tmp_path / "fedfsa" / "seed1", [0.5, 0.6, 0.7], test_acc_personal=[0.2, 0.8, 0.7])
    _fake_run(tmp_path / "dfedavg", [0.5, 0.6, 0.8])
    rows = _rows(comparison_table(find_runs([tmp_path]), last=2))
    assert rows["run"][4] == "test_acc_personal %" and rows["run"][5] == "best test_acc %"
    assert rows["fedfsa"][4] == "80.00 ± 5.00" and rows["dfedavg"][4] == "-"
    assert "test_acc_personal" not in comparison_table([tmp_path / "dfedavg"])


def test_plot_draws_one_curve_per_run_labelled_by_its_distinct_path(tmp_path, monkeypatch,
                                                                    capsys):
    drawn = {}
    monkeypatch.setattr("p2pfl.report.plots.plot_histories",
                        lambda histories, path, title, x, facts: drawn.update(histories) or [path])
    runs = [_fake_run(tmp_path / "x" / name / "seed0", [0.5]) for name in ("ring", "exp")]
    assert main(["plot", *map(str, runs), str(runs[0]), "--out", str(tmp_path / "f")]) == 0
    assert list(drawn) == ["ring/seed0", "exp/seed0"]
    assert distinct_labels(unique_paths([tmp_path / "a" / "r", tmp_path / "b" / "r",
                                         tmp_path / "b" / "s"])) == ["a/r", "b/r", "b/s"]


def test_plot_seeds_pools_the_seed_folders_of_each_variant(tmp_path, monkeypatch, capsys):
    drawn = {}

    def bands(groups, path, title, metric, ylabel, x, facts):
        drawn.update(groups, metric=metric)
        return [path]

    monkeypatch.setattr("analysis.plots.plot_seed_bands", bands)
    runs = [_fake_run(tmp_path / name / f"seed{s}", [0.5, 0.1 * s], test_acc_personal=[0.2, s])
            for name in ("fedavg", "fedfsa") for s in (0, 1)]
    alone = _fake_run(tmp_path / "single", [0.4])
    out = str(tmp_path / "f")
    assert main(["plot", "--seeds", *map(str, runs), str(alone), "--out", out,
                 "--metric", "test_acc_personal"]) == 0
    assert drawn.pop("metric") == "test_acc_personal"
    assert {k: [h[-1]["test_acc"] for h in v] for k, v in drawn.items()} == {
        "fedavg": [0.0, 0.1], "fedfsa": [0.0, 0.1]}
    assert "not drawn, no 'test_acc_personal' logged: single" in capsys.readouterr().err
    assert main(["plot", "--seeds", str(alone), "--out", out, "--metric", "test_acc_x"]) == 2
    assert "no run logged 'test_acc_x'" in capsys.readouterr().err


def test_plot_metric_names_its_axis_and_its_curves(tmp_path, monkeypatch, capsys):
    """--metric: a readable y label (or --ylabel's), --names renames the curves (the mechanism
    of analysis.across); without --seeds a curve per run."""
    drawn = {}

    def bands(groups, path, title, metric, ylabel, x, facts):
        drawn.update(labels=list(groups), metric=metric, ylabel=ylabel)
        return [path]

    monkeypatch.setattr("analysis.plots.plot_seed_bands", bands)
    runs = [_fake_run(tmp_path / name / f"seed{s}", [0.5], test_acc_personal=[0.2])
            for name in ("fedavg", "fedfsa") for s in (0, 1)]
    out = str(tmp_path / "f")
    assert main(["plot", "--seeds", *map(str, runs), "--out", out, "--metric",
                 "test_acc_personal", "--names", "fedfsa=FedFSA,fedavg=FedAvg-FT"]) == 0
    assert drawn == {"labels": ["FedAvg-FT", "FedFSA"], "metric": "test_acc_personal",
                     "ylabel": "personalised test accuracy, mean over clients (%)"}
    assert main(["plot", *map(str, runs[:2]), "--out", out, "--metric", "test_acc_local_x",
                 "--ylabel", "mine (%)", "--names", "seed1=second"]) == 2  # never logged
    _fake_run(tmp_path / "x", [0.4], test_acc_local_x=[0.1])
    assert main(["plot", *map(str, runs[:2]), str(tmp_path / "x"), "--out", out, "--metric",
                 "test_acc_local_x", "--ylabel", "mine (%)", "--names", "seed1=second"]) == 0
    assert drawn == {"labels": ["x"], "metric": "test_acc_local_x",
                     "ylabel": "mine (%)"}  # a curve per run that logged it
    assert "not drawn, no 'test_acc_local_x' logged: seed0, second" in capsys.readouterr().err
    assert main(["plot", str(runs[0]), "--out", out, "--ylabel", "y"]) == 2
    assert main(["plot", str(runs[0]), "--out", out, "--seeds", "--names", "fedavg"]) == 2
    assert "--names: is a comma-separated list of label=name" in capsys.readouterr().err


def test_plot_seeds_of_an_honest_metric_draw_a_baseline_without_attackers_over_all_nodes(
        tmp_path, monkeypatch, capsys):
    """--metric test_acc_honest_mean: a run without attackers is drawn with its nodes' own models
    (all honest) and says so; a run with attackers but without the key is named as not drawn;
    --x time is accepted with --seeds."""
    drawn = {}

    def bands(groups, path, title, metric, ylabel, x, facts):
        drawn.update(groups=groups, x=x, title=title)
        return [path]

    monkeypatch.setattr("analysis.plots.plot_seed_bands", bands)
    attacked = {**_config(), "data": {"name": "fashion_mnist", "num_nodes": 8},
                "byzantine": {"nodes": 2, "attack": "alie"}}
    runs = [_fake_run(tmp_path / "median" / "seed0", [0.5], config=attacked,
                      test_acc_honest_mean=[0.4], sim_time_s=[1.0]),
            _fake_run(tmp_path / "clean" / "seed0", [0.6], config={**attacked, "byzantine": {}},
                      test_acc_local_mean=[0.55], sim_time_s=[1.0]),
            _fake_run(tmp_path / "old" / "seed0", [0.6], config=attacked, sim_time_s=[1.0])]
    assert main(["plot", "--seeds", *map(str, runs), "--out", str(tmp_path / "f"), "--metric",
                 "test_acc_honest_mean", "--x", "time"]) == 0
    assert "not drawn, no 'test_acc_honest_mean' logged: old" in capsys.readouterr().err
    groups = drawn["groups"]
    assert list(groups) == ["median", "clean (no attackers: all nodes)"]
    assert groups["clean (no attackers: all nodes)"][0][0]["test_acc_honest_mean"] == 0.55
    assert drawn["x"] == "time" and drawn["title"].startswith("Fashion-MNIST, 8 nodes")


def test_bad_inputs_give_one_line_errors(tmp_path, capsys):
    with pytest.raises(ConfigError, match="no run directory"):
        find_runs([tmp_path])
    assert parse_target("80") == 0.8
    with pytest.raises(ConfigError, match="--target"):
        parse_target("-3")
    assert main(["table", str(tmp_path)]) == 2
    assert "no run directory" in capsys.readouterr().err


def test_compare_runs_the_chosen_variants_over_seeds_and_writes_the_table(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text(tiny_toml("""[[compare]]
label = "DFedAvg"
"algorithm.name" = "dfedavg"
[[compare]]
label = "dfedavgm"
"algorithm.name" = "dfedavgm"
"algorithm.momentum" = 0.9
[[compare]]
label = "fedavg"
"algorithm.name" = "fedavg"
"topology.name" = "star"
"""))
    out = tmp_path / "runs"
    args = ["compare", str(config), "--only", "dfedavg,fedavg", "--seeds", "0,1", "--out",
            str(out), "--quiet"]
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == ["dfedavg", "fedavg", "table.md"]
    table = (out / "table.md").read_text()
    assert "| dfedavg | 2 | 2 |" in table.replace("DFedAvg", "dfedavg")
    assert "| fedavg | 2 | 2 |" in table
    assert main(args) == 0  # finished runs are kept, not rerun
    assert main([*args[:3], "fedavg", *args[4:]]) == 0  # a later --only adds to table.md
    assert (out / "table.md").read_text() == table
    assert main(["compare", str(config), "--only", "nope", "--out", str(out)]) == 2
    assert "no variant named 'nope'" in capsys.readouterr().err


def _records(path: Path) -> list[dict]:
    drop = ("wall_s", "eval_s")
    return [{k: v for k, v in json.loads(line).items() if k not in drop}
            for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_compare_continues_a_killed_run_and_extends_a_finished_one(tmp_path, capsys):
    """The same command, rerun: a run killed after its checkpoint resumes, a finished run with
    fewer rounds is extended, and both end as if run in one go."""
    config = tmp_path / "c.toml"
    config.write_text(tiny_toml("""[[compare]]
label = "sgp"
"algorithm.name" = "osgp"
""", topology="exponential", extra="[engine]\ncheckpoint_every = 1"))
    whole, out = tmp_path / "whole", tmp_path / "parts"
    base = ["compare", str(config), "--quiet", "--set"]
    assert main([*base, "rounds=4", "--out", str(whole)]) == 0
    assert main([*base, "rounds=2", "--out", str(out)]) == 0
    run_dir = out / "sgp" / "seed0"
    assert main([*base, "rounds=3", "--out", str(out)]) == 0  # extended 2 -> 3
    assert json.loads((run_dir / "summary.json").read_text())["rounds"] == 3
    (run_dir / "summary.json").unlink()  # as if killed after round 3's checkpoint
    assert main([*base, "rounds=4", "--out", str(out)]) == 0
    (run_dir / "checkpoint.pt").unlink()  # a finished run that cannot be extended
    assert main([*base, "rounds=5", "--out", str(out)]) == 2
    assert "without checkpoint.pt: it cannot be continued" in capsys.readouterr().err
    assert _records(run_dir) == _records(whole / "sgp" / "seed0")
    assert "| sgp | 1 | 4 |" in (out / "table.md").read_text()


def test_compare_goes_on_after_a_divergence_and_then_names_it(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text(tiny_toml("""[[compare]]
label = "wild"
"algorithm.name" = "dfedavg"
"algorithm.lr" = 1e6
[[compare]]
label = "tame"
"algorithm.name" = "dfedavg"
""", every=2))
    out = tmp_path / "runs"
    assert main(["compare", str(config), "--quiet", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 of 2 runs diverged" in err and "wild (seed 0)" in err
    assert (out / "tame" / "seed0" / "summary.json").exists()
    table = (out / "table.md").read_text()
    assert "| tame | 1 | 2 |" in table  # and the one that diverged before its first eval:
    assert "| wild | 1 | diverged at round 2 | - |" in table
    assert main(["compare", str(config), "--quiet", "--out", str(out)]) == 3  # the same again


def _attacked(accs: list[float], honest: list[float], attack: str = "alie") -> dict:
    """A config with Byzantine nodes and the honest metrics of its records."""
    return {"config": {**_config(), "algorithm": {"name": "dpsgd"},
                       "byzantine": {"nodes": 2, "attack": attack}},
            "test_acc_honest_mean": honest, "test_acc_honest_min": [h - 0.1 for h in honest],
            "consensus_dist_honest": [0.5] * len(accs), "consensus_dist": [9.0] * len(accs)}


def test_with_attackers_the_honest_nodes_lead_and_a_baseline_counts_all_its_nodes(tmp_path):
    """Rows sort by the honest mean, not by the average model (attackers included); a run
    without attackers shows its nodes' own models there; consensus is the honest nodes'."""
    _fake_run(tmp_path / "mean-alie", [0.9, 0.9], **_attacked([0.9] * 2, [0.3, 0.4]))
    _fake_run(tmp_path / "median-alie", [0.5, 0.6], **_attacked([0.5] * 2, [0.6, 0.7]))
    _fake_run(tmp_path / "clean", [0.7, 0.8], config={**_config(), "algorithm": {
        "name": "dpsgd"}}, test_acc_local_mean=[0.5, 0.65], test_acc_local_min=[0.4, 0.45],
        consensus_dist=[0.1, 0.2])
    _fake_run(tmp_path / "bare", [0.99, 0.99], config={**_config(), "algorithm": {
        "name": "dpsgd"}})  # no nodes' own accuracy: ranked last, not as NaN
    table = comparison_table(find_runs([tmp_path]))
    rows = _rows(table)
    assert list(rows) == ["run", "median-alie", "clean", "mean-alie", "bare"]
    assert rows["run"][2:5] == ["honest nodes, mean % (final)", "honest nodes, worst %",
                                "average model of all nodes %"]
    assert rows["median-alie"][2:5] == ["70.00", "60.00", "60.00"]
    assert rows["clean"][2:5] == ["65.00", "45.00", "80.00"]
    assert rows["run"][6] == "honest consensus distance (final)"
    assert rows["mean-alie"][6] == "0.5" and rows["clean"][6] == "0.2"
    assert "attackers excluded" in table


def test_server_models_and_clock_marks_are_named(tmp_path):
    """FedBuff's test_acc is its server's model and its records are marks; seconds and rounds to
    the target have their spread over seeds."""
    for seed, times in ((0, [1.0, 2.0]), (1, [1.5, 3.0])):
        _fake_run(tmp_path / "fedbuff" / f"seed{seed}", [0.5, 0.8],
                  config={**_config(seed=seed), "algorithm": {"name": "fedbuff"}},
                  sim_time_s=times)
    _fake_run(tmp_path / "dpsgd", [0.7, 0.9], config={**_config(), "algorithm": {
        "name": "dpsgd"}}, sim_time_s=[2.0, 4.0])
    rows = _rows(comparison_table(find_runs([tmp_path]), target=0.75))
    header = rows["run"]
    assert header[1] == "rounds / marks"
    assert header[2] == "average or server model % (final)" and header[3] == "model"
    assert rows["fedbuff"][1:4] == ["2 marks (2 unfinished)", "80.00 ± 0.00", "server model"]
    assert rows["dpsgd"][1:4] == ["2 rounds (1 unfinished)", "90.00", "average model"]
    at = header.index("rounds / marks to 75% (average or server model)")
    assert rows["fedbuff"][at] == "2.0 ± 0.0 marks" and rows["dpsgd"][at] == "2.0 rounds"
    seconds = header.index("simulated s to 75%")
    assert rows["fedbuff"][seconds] == "2.5 ± 0.5" and rows["dpsgd"][seconds] == "4"


def test_a_diverged_run_is_shown_where_it_diverged(tmp_path, capsys):
    """A run that diverged before its first evaluation has a row; one that diverged later keeps
    its accuracies out of its row's mean."""
    early = tmp_path / "wild" / "seed0"
    early.mkdir(parents=True)
    (early / "diverged.json").write_text(json.dumps({"round": 1, "message": "m"}))
    late = _fake_run(tmp_path / "shaky" / "seed0", [0.5, 0.1])
    (late / "diverged.json").write_text(json.dumps({"round": 3, "message": "m"}))
    _fake_run(tmp_path / "shaky" / "seed1", [0.5, 0.7])
    assert main(["table", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert list(rows)[1:] == ["shaky", "wild"]
    assert rows["wild"][1:3] == ["diverged at round 1", "-"]
    assert rows["shaky"][1:3] == ["2 (1/2 runs diverged at round 3; 1 unfinished)",
                                  "70.00 (1/2 runs)"]
    assert "left out of its row" in out
