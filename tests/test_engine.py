"""Config validation, the CLI, the run directory and determinism."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import p2pfl
import topologies as T
from algorithms import ALGORITHMS
from p2pfl.cli import main
from p2pfl.config import (
    ConfigError,
    config_from_dict,
    folder_name,
    load_config,
    parse_overrides,
    variant_overrides,
    with_overrides,
)
from p2pfl.data import DEBIAN_FASHION_MNIST
from p2pfl.engine import check_topology, run, run_compare
from p2pfl.report.results import read_metrics
from tests.conftest import small_config, strip_times

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--set", "data.name='synthetic'", "--set", "data.num_nodes=4", "--set",
        "data.synthetic_train=200", "--set", "data.synthetic_test=50", "--set", "rounds=2",
        "--set", "algorithm.local_steps=2", "--set", "algorithm.batch_size=8", "--quiet"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


BASE = """
seed = 0
rounds = 2
[data]
name = "synthetic"
num_nodes = 4
[topology]
k = 2
[algorithm]
name = "osgp"
"""

BAD_CONFIGS = [
    ("algorithm.name", '[algorithm]\nname = "nope"'),
    ("topology.name", '[topology]\nname = "moebius"'),
    ("data.name", '[data]\nname = "imagenet"'),
    ("model.name", '[model]\nname = "gpt"'),
    ("data.partition", '[data]\npartition = "random"'),
    ("rounds", 'rounds = "ten"'),
    ("rounds", "rounds = 0"),
    ("seed", "seed = 1.5"),
    ("data.alpha", "[data]\nalpha = -0.1"),
    ("data.num_nodes", "[data]\nnum_nodes = 0"),
    ("algorithm.participation", "[algorithm]\nparticipation = 0.0"),
    ("algorithm.participation", "[algorithm]\nparticipation = 1.5"),
    ("algorithm.lr", "[algorithm]\nlr = -1"),
    ("algorithm.momentum", "[algorithm]\nmomentum = 1.0"),
    ("algorithm.batch_size", '[algorithm]\nbatch_size = "big"'),
    ("topology.directed", '[topology]\ndirected = "yes"'),
    ("data.colour", '[data]\ncolour = "red"'),
    ("learning_rate", "learning_rate = 0.1"),
    ("device", 'device = "tpu"'),
    ("engine.dtype", '[engine]\ndtype = "float16"'),
]


@pytest.mark.parametrize(("field", "text"), BAD_CONFIGS)
def test_bad_config_is_one_line_error_naming_the_field(tmp_path, capsys, field, text):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.field == field
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and field in stderr and "Traceback" not in stderr


def test_missing_dataset_is_a_clean_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("P2PFL_DATA", raising=False)
    path = _write(tmp_path, f'rounds = 1\n[data]\nname = "mnist"\nroot = "{tmp_path}"\n')
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and "mnist" in stderr and str(tmp_path) in stderr
    assert not (tmp_path / "run").exists()


def test_cli_exit_status_from_a_real_process(tmp_path):
    path = _write(tmp_path, '[algorithm]\nname = "nope"\n')
    proc = subprocess.run([sys.executable, "-m", "p2pfl.cli", "run", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.startswith("p2pfl: error: algorithm.name") and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("algorithm", "topology", "message"), [
    ("fedavg", "ring", "star"),
    ("dfedavg", "directed_ring", "undirected"),
])
def test_algorithm_refuses_wrong_topology(algorithm, topology, message):
    with pytest.raises(ConfigError, match=message):
        run(small_config(algorithm__name=algorithm, topology__name=topology))


def test_pushsum_refuses_graph_that_is_not_strongly_connected():
    G = nx.DiGraph([(0, 1), (1, 0), (2, 3), (3, 2)])
    algorithm = ALGORITHMS["osgp"](small_config().algorithm)
    with pytest.raises(ConfigError, match="not strongly connected"):
        check_topology(algorithm, T.static(G), rounds=10)


def test_set_overrides_and_compare_variants_are_validated(tmp_path):
    path = _write(tmp_path, BASE + '[[compare]]\nlabel = "x"\n"algorithm.name" = "nope"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.field == "compare[0].algorithm.name"
    cfg = load_config(_write(tmp_path, BASE), {"algorithm.lr": 0.5, "topology.name": "ring"})
    assert cfg.algorithm.lr == 0.5 and cfg.topology.name == "ring"


def test_run_directory_contents_and_refusal_to_overwrite(tmp_path):
    cfg = small_config(rounds=3, algorithm__name="osgp", topology__name="random_out",
                       topology__k=2, eval__every=2)
    history = run(cfg, tmp_path / "run")
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert records == history and [r["round"] for r in records] == [1, 2, 3]
    assert "test_acc" not in records[0] and "test_acc" in records[1] and "test_acc" in records[2]
    for key in ("train_loss", "bytes_sent", "wall_s", "ps_weight_min", "ps_weight_max",
                "ps_weight_sum"):
        assert key in records[0]
    for key in ("test_acc", "test_acc_local_mean", "consensus_dist"):
        assert key in records[2]
    assert records[0]["bytes_sent"] == 12 * (records[0]["bytes_sent"] // 12)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["rounds"] == 3 and summary["final"]["round"] == 3
    assert json.loads((tmp_path / "run" / "config.json").read_text())["seed"] == cfg.seed
    for name in ("curves.png", "curves.pdf", "final.pt"):
        assert (tmp_path / "run" / name).stat().st_size > 0
    with pytest.raises(ConfigError, match="already holds a run"):
        run(cfg, tmp_path / "run")


def test_torn_last_metrics_line_is_dropped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"round": 1}\n{"round": 2}\n{"rou')
    assert read_metrics(path) == [{"round": 1}, {"round": 2}]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_same_config_and_seed_give_identical_metrics(tmp_path, dtype):
    cfg = small_config(rounds=3, algorithm__name="osgp", topology__name="random_out",
                       topology__k=2, engine__dtype=dtype)
    a = strip_times(run(cfg, tmp_path / "a"))
    b = strip_times(run(cfg, tmp_path / "b"))
    assert a == b
    other = strip_times(run(p2pfl.with_overrides(cfg, {"seed": 4}), tmp_path / "c"))
    assert other != a


def test_cli_run_and_plot(tmp_path, capsys):
    cfg = ROOT / "configs" / "demo.toml"
    assert main(["run", str(cfg), "--out", str(tmp_path / "demo"), *TINY]) == 0
    out = capsys.readouterr().out
    assert out.count("final test_acc") == 4
    assert (tmp_path / "demo" / "comparison.png").exists()
    runs = sorted((tmp_path / "demo").glob("*/seed0"))  # OUT/<variant>/seed<k>, as compare
    assert len(runs) == 4
    assert main(["plot", *map(str, runs), "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp.png").exists()


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.exists(), reason="Fashion-MNIST not installed")
@pytest.mark.parametrize(("algorithm", "topology"), [
    ("fedavg", "star"), ("dfedavg", "ring"), ("osgp", "exponential")])
def test_real_fashion_mnist_reaches_078(tmp_path, algorithm, topology):
    raw = {"seed": 0, "rounds": 4, "device": "cpu",
           "data": {"name": "fashion_mnist", "num_nodes": 10, "partition": "iid"},
           "model": {"name": "mlp"},
           "topology": {"name": topology, "directed": True},
           "algorithm": {"name": algorithm, "lr": 0.05, "local_epochs": 1, "batch_size": 64,
                         **({"participation": 1.0} if algorithm == "fedavg" else {})},
           "eval": {"local_samples": 500}}
    history = run(config_from_dict(raw), tmp_path / "run")
    assert history[-1]["test_acc"] >= 0.78


def test_divergence_stops_with_one_line_and_keeps_metrics(tmp_path, capsys):
    path = _write(tmp_path, BASE.replace("rounds = 2", "rounds = 8") + "local_steps = 1\nlr = 10\n")
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 3
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and re.search("non-finite (training loss|test_loss)", stderr)
    assert "Traceback" not in stderr
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert 1 <= len(records) < 8
    assert f"round {len(records) + 1}:" in stderr
    assert all(r["round"] == i + 1 for i, r in enumerate(records))


@pytest.mark.parametrize("module", ["algorithms", "analysis", "topologies", "p2pfl", "p2pfl.cli"])
def test_every_package_imports_first_in_a_fresh_interpreter(module):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_with_overrides_keeps_the_compare_variants_and_none_drops_them():
    """Overriding `rounds` of a comparison leaves a comparison (it used to empty [[compare]]);
    {"compare": None} removes them, as each variant's own config does."""
    variants = [{"label": "a", "algorithm.lr": 0.05}, {"label": "b", "topology.name": "torus"}]
    cfg = config_from_dict({**small_config().to_dict(), "compare": variants})
    longer = p2pfl.with_overrides(cfg, {"rounds": 5})
    assert longer.rounds == 5 and longer.compare == variants
    one = with_overrides(longer, {**variant_overrides(variants[1]), "compare": None})
    assert (one.compare, one.topology.name, one.rounds) == ([], "torus", 5)
    with pytest.raises(ConfigError, match=r"^compare\[1\]\.topology\.name: .*'tours'"):
        with_overrides(cfg, {"compare": [variants[0], {"topology.name": "tours"}]})


def test_a_dotted_key_in_a_compare_table_or_set_merges_into_the_table(tmp_path):
    """TOML reads an unquoted `algorithm.lr = 0.05` in [[compare]] as {algorithm = {lr = 0.05}}:
    it changes lr only; the table's other fields (local_steps, batch_size) keep their values."""
    path = tmp_path / "c.toml"
    path.write_text('seed = 0\n[data]\nname = "synthetic"\nnum_nodes = 4\n'
                    '[topology]\nname = "ring"\n'
                    '[algorithm]\nname = "dfedavg"\nlocal_steps = 3\nlocal_epochs = 0\n'
                    'batch_size = 16\n'
                    '[[compare]]\nlabel = "a"\nalgorithm.lr = 0.05\n')
    cfg = load_config(path)
    variant = with_overrides(cfg, {**variant_overrides(cfg.compare[0]), "compare": None})
    assert (variant.algorithm.lr, variant.algorithm.local_steps, variant.algorithm.batch_size,
            variant.algorithm.local_epochs) == (0.05, 3, 16, 0)
    merged = load_config(path, parse_overrides(["algorithm={lr=0.2}"]))
    assert (merged.algorithm.lr, merged.algorithm.batch_size) == (0.2, 16)


def test_a_new_run_never_writes_into_a_directory_holding_other_files(tmp_path):
    """A user's folder with its own config.json is refused, not overwritten; so is a file."""
    cfg = small_config()
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text("my own notes")
    (folder / "summary.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"^out: .*mine already holds a run \(config.json, "
                                          r"summary.json\): choose a new or empty directory"):
        run(cfg, folder)
    assert (folder / "config.json").read_text() == "my own notes"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        run(cfg, tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(run(cfg, empty)) == cfg.rounds


def test_compare_labels_stay_inside_the_root_and_are_distinct(tmp_path):
    base = small_config().to_dict()
    for i, label in enumerate(("..", ".", ".hidden")):
        root = tmp_path / f"case{i}" / "root"
        run_compare(config_from_dict({**base, "compare": [{"label": label}]}), root)
        assert sorted(p.name for p in root.parent.iterdir()) == ["root"]
        assert (root / folder_name(label) / "seed3" / "metrics.jsonl").exists()
        assert folder_name(label) in ("run", "hidden")
    with pytest.raises(ConfigError, match=r"^compare\[1\]\.label: 'A b' runs in the folder "
                                          r"'a-b' of compare\[0\]"):
        config_from_dict({**base, "compare": [{"label": "a b"}, {"label": "A b"}]})
