"""Checkpoints and exact resume (after SIGKILL and Ctrl-C too), atomic results, divergence guard."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import p2pfl.engine as engine
import p2pfl.engine.loop as loop
import topologies as T
from algorithms import ALGORITHMS, Asynchronous, PushSum
from algorithms.weight_collapse import WeightCollapseWarning
from p2pfl.cli import main
from p2pfl.config import ConfigError, with_overrides
from p2pfl.core.guard import finite_rows
from p2pfl.engine import DivergenceError, run, run_compare
from p2pfl.engine.builder import build
from p2pfl.engine.checkpoint import CHECKPOINT
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import skip_plots, small_config, strip_times, tiny_toml, wait_mid_round

ROOT = Path(__file__).resolve().parents[1]
# A topology every algorithm of each kind accepts.
TOPOLOGY_FOR = {"server": "star", "doubly_stochastic": "ring", "column_stochastic": "exponential",
                "push_pull": "exponential"}


def tiny(**overrides: Any):
    """small_config with fewer samples and steps: a round takes a few milliseconds."""
    base = {"data__num_nodes": 4, "data__synthetic_train": 160, "data__synthetic_test": 40,
            "algorithm__local_steps": 2, "algorithm__batch_size": 8, "eval__local_samples": 20}
    return small_config(**(base | overrides))


def assert_same_state(a: Any, b: Any, where: str = "state") -> None:
    """Bitwise equality of two state trees (dicts, lists, tensors, numbers)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys differ"
        for k in a:
            assert_same_state(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def load(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    """Figures are not what these tests check; drawing them would dominate their run time."""
    skip_plots(monkeypatch)


def scramble_global_rngs() -> None:
    """Runs must not draw from process-global generators: make any such draw differ."""
    torch.manual_seed(987654)
    np.random.seed(4321)
    random.seed(77)


# --- exact resume -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_resumes_exactly(tmp_path, name):
    """3 rounds in one go == 1 round, checkpoint, resume for 2: metrics and final state bitwise.

    Covers every registered algorithm, so an algorithm whose state_dict misses cross-round state
    (or that draws from a global generator) fails here.
    """
    mixing = ALGORITHMS[name].mixing
    extra = {"algorithm__participation": 0.5} if mixing == "server" else {}  # sampling matters
    extra["topology__name"] = TOPOLOGY_FOR[mixing]
    if name in ("sgp", "adpsgd", "async_sgp"):  # one local step a round (a phase)
        extra["algorithm__local_steps"] = 1
    if issubclass(ALGORITHMS[name], Asynchronous):  # on the clock, with messages in flight
        extra.update(network__enabled=True, network__jitter=0.3, network__stragglers=0.3)
        extra.pop("algorithm__participation", None)
    if name == "fedbuff":  # 3 of the 4 clients training, a server step after every 2 updates
        extra.update(algorithm__concurrency=3, algorithm__buffer_size=2)
    if name == "dfedsgpsm_s":  # its neighbours depend on the losses kept in its state
        extra.update(topology__name="random_out", topology__k=2,
                     topology__selection="loss_based")
    cfg = tiny(rounds=3, algorithm__name=name, **extra)
    torch.manual_seed(1)
    whole = run(cfg, tmp_path / "whole")
    first = run(with_overrides(cfg, {"rounds": 1}), tmp_path / "part")
    assert load(tmp_path / "part" / CHECKPOINT)["round"] == 1
    scramble_global_rngs()
    resumed = run(cfg, tmp_path / "part", resume=True)
    assert strip_times(first) == strip_times(whole[:1])
    assert strip_times(resumed) == strip_times(whole)
    assert strip_times(read_metrics(tmp_path / "part" / METRICS)) == strip_times(whole)
    a, b = load(tmp_path / "whole" / "final.pt"), load(tmp_path / "part" / "final.pt")
    assert_same_state(a, b, "final.pt")
    a, b = load(tmp_path / "whole" / CHECKPOINT), load(tmp_path / "part" / CHECKPOINT)
    assert a["round"] == b["round"] == 3
    assert_same_state(a["algorithm"], b["algorithm"], "algorithm state")


def test_async_sgp_extended_on_resume_is_the_longer_run(tmp_path):
    """Asynchronous SGP evaluated at its last mark only, with stragglers: 6 marks in one go, and
    4 then extended to 6 on resume. The shorter run's last mark is evaluated (its rows show what
    has arrived) where the longer run's is not: the records (but that evaluation), the final
    evaluation, final.pt and the checkpoint's algorithm state are the same bit for bit."""
    cfg = tiny(rounds=6, algorithm__name="async_sgp", topology__name="exponential",
               algorithm__local_steps=1, network__enabled=True, network__jitter=0.3,
               network__stragglers=0.3, eval__every=6)
    whole = strip_times(run(cfg, tmp_path / "whole"))
    run(with_overrides(cfg, {"rounds": 4}), tmp_path / "part")
    resumed = strip_times(run(cfg, tmp_path / "part", resume=True))
    assert "test_acc" in resumed[3] and "test_acc" not in whole[3]

    def trained(record: dict) -> dict:
        return {k: v for k, v in record.items() if not k.startswith(("test_", "consensus"))}

    assert [trained(r) for r in resumed] == [trained(r) for r in whole]
    assert resumed[-1] == whole[-1]
    a, b = load(tmp_path / "whole" / "final.pt"), load(tmp_path / "part" / "final.pt")
    assert_same_state(a, b, "final.pt")
    a, b = load(tmp_path / "whole" / CHECKPOINT), load(tmp_path / "part" / CHECKPOINT)
    assert_same_state(a["algorithm"], b["algorithm"], "algorithm state")


def test_checkpoint_every_k_rounds_holds_the_state_of_that_round(tmp_path, monkeypatch):
    cfg = tiny(rounds=5, algorithm__name="osgp", topology__name="exponential",
               engine__checkpoint_every=2)
    saved = []
    real = loop.save_checkpoint

    def spy(run_dir, *args):
        real(run_dir, *args)
        state = load(Path(run_dir) / CHECKPOINT)
        saved.append((state["round"], state))

    monkeypatch.setattr(loop, "save_checkpoint", spy)
    run(cfg, tmp_path / "run")
    assert [r for r, _ in saved] == [2, 4, 5]  # every 2 rounds, and the end
    state = saved[0][1]
    assert state["config"] == cfg.to_dict() and state["population"]["flat"].dtype == torch.float64
    assert state["metrics"] == read_metrics(tmp_path / "run" / METRICS)[:2]
    assert not list((tmp_path / "run").glob(".*.tmp"))


def test_resume_drops_torn_line_and_rounds_after_the_checkpoint(tmp_path):
    """A kill during round 4, after round 3's line but before its checkpoint: round 3 is
    recomputed, the torn line and a stale temp file go, and the end is the uninterrupted run."""
    cfg = tiny(rounds=4, engine__checkpoint_every=2)
    whole = run(cfg, tmp_path / "whole")
    part = tmp_path / "part"
    run(with_overrides(cfg, {"rounds": 2}), part)
    with open(part / METRICS, "a") as f:
        f.write(json.dumps({"round": 3, "train_loss": -1.0}) + '\n{"round": 4, "train_lo')
    (part / f".{CHECKPOINT}.x1y2.tmp").write_bytes(b"half a checkpoint")
    assert len(read_metrics(part / METRICS)) == 3
    assert main(["resume", str(part), "--set", "rounds=4", "--quiet"]) == 0
    assert strip_times(read_metrics(part / METRICS)) == strip_times(whole)
    assert not list(part.glob(".*.tmp"))


def test_corrupt_line_before_the_end_is_an_error(tmp_path):
    path = tmp_path / METRICS
    path.write_text('{"round": 1}\n{"rou\n{"round": 3}\n')
    with pytest.raises(ConfigError, match="line 2"):
        read_metrics(path)


def test_resume_refuses_a_different_config_and_lists_the_fields(tmp_path, capsys):
    cfg = tiny(rounds=1)
    run(cfg, tmp_path / "run")
    code = main(["resume", str(tmp_path / "run"), "--set", "algorithm.lr=0.5", "--set", "seed=9",
                 "--set", "rounds=3", "--set", "engine.checkpoint_every=5", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "algorithm.lr (0.1 -> 0.5)" in err and "seed (3 -> 9)" in err
    assert "rounds (" not in err and "checkpoint_every (" not in err


def test_resume_refuses_fewer_rounds_than_the_checkpoint(tmp_path):
    run(tiny(rounds=2), tmp_path / "run")
    with pytest.raises(ConfigError, match="checkpointed at round 2") as err:
        run(tiny(rounds=1), tmp_path / "run", resume=True)
    assert err.value.field == "rounds"


def test_run_with_resume_flag_and_compare_root(tmp_path):
    """`p2pfl run CONFIG --resume DIR` continues every [[compare]] variant of a root directory."""
    text = """seed = 3
rounds = 2
device = "cpu"
[data]
name = "synthetic"
num_nodes = 4
synthetic_train = 160
synthetic_test = 40
[algorithm]
local_steps = 2
local_epochs = 0
batch_size = 8
[eval]
local_samples = 20
[[compare]]
label = "DFedAvg ring"
"algorithm.name" = "dfedavg"
"topology.name" = "ring"
[[compare]]
label = "SGP exp"
"algorithm.name" = "osgp"
"topology.name" = "exponential"
"""
    path = tmp_path / "exp.toml"
    path.write_text(text)
    assert main(["run", str(path), "--out", str(tmp_path / "whole"), "--quiet"]) == 0
    assert main(["run", str(path), "--set", "rounds=1", "--out", str(tmp_path / "part"),
                 "--quiet"]) == 0
    assert main(["run", str(path), "--resume", str(tmp_path / "part"), "--quiet"]) == 0
    for variant in ("dfedavg-ring", "sgp-exp"):
        a = read_metrics(tmp_path / "whole" / variant / "seed3" / METRICS)
        b = read_metrics(tmp_path / "part" / variant / "seed3" / METRICS)
        assert len(a) == 2 and strip_times(a) == strip_times(b)


# --- real processes: SIGKILL and Ctrl-C ---------------------------------------------------------

KILL_CONFIG = """seed = 5
rounds = 8
device = "cpu"
[data]
name = "synthetic"
num_nodes = 5
synthetic_train = 300
synthetic_test = 40
[topology]
name = "exponential"
[algorithm]
name = "osgp"
local_steps = 3
local_epochs = 0
batch_size = 16
[eval]
every = 2
local_samples = 20
[engine]
checkpoint_every = 3
"""


@pytest.fixture(scope="module")
def kill_setup(tmp_path_factory):
    """The config file of the process tests and its uninterrupted metrics."""
    root = tmp_path_factory.mktemp("kill")
    path = root / "exp.toml"
    path.write_text(KILL_CONFIG)
    with pytest.MonkeyPatch.context() as mp:
        skip_plots(mp)
        assert main(["run", str(path), "--out", str(root / "whole"), "--quiet"]) == 0
    return path, strip_times(read_metrics(root / "whole" / METRICS))


def _lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def _default_sigint() -> None:
    """In the child before it runs: Ctrl-C as in a terminal. A suite started in the background
    (`cmd &`) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(config: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "p2pfl.cli", "run", str(config), "--out",
                             str(out), "--quiet"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)


def test_sigkill_mid_round_then_resume_matches_uninterrupted(tmp_path, kill_setup):
    config, whole = kill_setup
    out = tmp_path / "run"
    proc = _start(config, out)
    wait_mid_round(proc, lambda: _lines(out / METRICS), 4)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    logged = read_metrics(out / METRICS)
    assert 4 <= len(logged) < 8 and strip_times(logged) == whole[:len(logged)]
    assert load(out / CHECKPOINT)["round"] in (3, 6)
    assert main(["resume", str(out), "--quiet"]) == 0
    assert strip_times(read_metrics(out / METRICS)) == whole


def test_ctrl_c_stops_after_the_round_with_a_checkpoint(tmp_path, kill_setup):
    config, whole = kill_setup
    out = tmp_path / "run"
    proc = _start(config, out)
    wait_mid_round(proc, lambda: _lines(out / METRICS), 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "stopped after round" in err and "p2pfl resume" in err
    logged = read_metrics(out / METRICS)
    assert 3 <= len(logged) < 8  # 3: the signal came while round 3 was being checkpointed
    assert load(out / CHECKPOINT)["round"] == len(logged)  # written on Ctrl-C, not on the grid
    assert main(["run", str(config), "--resume", str(out), "--quiet"]) == 0
    assert strip_times(read_metrics(out / METRICS)) == whole


def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path, kill_setup):
    """SIGINT 0.2 s after launch lands while torch is still being imported."""
    config, _ = kill_setup
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from p2pfl.cli.entry import main; "
                             "sys.exit(main())", "run", str(config), "--out",
                             str(tmp_path / "run")], stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().splitlines() == [
        "p2pfl: interrupted while starting; nothing was written"], err
    assert not (tmp_path / "run").exists()


# --- divergence guard ---------------------------------------------------------------------------


def poison(monkeypatch, nodes: list[int] | slice) -> None:
    """Make the training data of `nodes` NaN in every run built from now on."""
    real = engine.build

    def build(cfg, *args, **kwargs):
        ctx, algorithm = real(cfg, *args, **kwargs)
        chosen = range(ctx.num_nodes)[nodes] if isinstance(nodes, slice) else nodes
        rows = torch.cat([ctx.data.node_indices(i) for i in chosen])
        ctx.data.x_train[rows] = float("nan")
        return ctx, algorithm

    monkeypatch.setattr("p2pfl.engine.experiment.build", build)


def test_divergence_stop_names_round_nodes_and_last_loss(tmp_path, capsys, monkeypatch):
    cfg = tiny(rounds=1, engine__checkpoint_every=1)
    first = run(cfg, tmp_path / "run")
    poison(monkeypatch, [2])
    assert main(["resume", str(tmp_path / "run"), "--set", "rounds=3", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "round 2: non-finite training loss at nodes [2]" in err
    assert f"last finite mean loss {first[0]['train_loss']:.4g}" in err
    assert "checkpoint at round 1" in err
    assert strip_times(read_metrics(tmp_path / "run" / METRICS)) == strip_times(first)
    assert load(tmp_path / "run" / CHECKPOINT)["round"] == 1


def test_push_sum_divergence_names_the_weight_and_step_of_each_diverged_node(tmp_path):
    """SGP at lr 5 over one random out-neighbour: a node that kept 1/8 of the mass steps 8-fold
    and blows up. The message names each diverged node's weight in that round's local phase
    (the weights of the checkpoint after the previous round) and its step lr / w."""
    cfg = small_config(rounds=6, data__num_nodes=8, algorithm__name="osgp", algorithm__lr=5.0,
                       algorithm__local_steps=3, topology__name="random_out",
                       topology__k=1, engine__checkpoint_every=1)
    with pytest.raises(DivergenceError) as err:
        run(cfg, tmp_path / "run")
    message = str(err.value)
    assert "\n" not in message and "Push-Sum weights in the local phase" in message
    checkpoint = load(tmp_path / "run" / CHECKPOINT)
    t = checkpoint["round"]  # the diverging round is t + 1 (0-based t)
    # Caught in training, or in evaluation when the parameters stayed finite but overflow there.
    assert message.startswith((f"round {t + 1}: non-finite training loss at nodes ",
                               f"round {t + 1}: non-finite test_loss in evaluation; the largest "
                               "training losses were at nodes "))
    weights = checkpoint["algorithm"]["weights"]
    step = 5.0 * 0.998**t
    bad = json.loads(message.split(" at nodes ")[1].split(" (")[0])
    for i in bad[:5]:
        w = weights[i].item()
        assert f"node {i} w = {w:.3g}, lr / w = {step / w:.3g}" in message
    assert f"smallest w of any node {weights.min().item():.3g}" in message


@pytest.mark.parametrize("name", sorted(n for n, c in ALGORITHMS.items() if issubclass(c, PushSum)))
def test_a_collapsed_push_sum_weight_is_warned_once_and_named(name):
    """Every synchronous Push-Sum algorithm, by hand: node 2's weight at 1e-4 warns once (the
    rounds after it say nothing), naming the node, its weight, the round and its step lr / w; the
    divergence clause names the weight and step; the warning is kept in the state."""
    topology = {"topology__name": "random_out", "topology__k": 2} if name == "dfedsgpsm_s" \
        else {"topology__name": "exponential"}
    ctx, algorithm = build(small_config(algorithm__name=name, algorithm__local_steps=1,
                                        **topology))
    algorithm.weights = algorithm.phase_weights = torch.tensor([1, 1, 1e-4, 1, 1, 1.0],
                                                               dtype=torch.float64)
    step = algorithm.step_size(4)
    with pytest.warns(WeightCollapseWarning) as said:
        for t in (4, 5, 6):
            algorithm.node_lr(ctx, t)
    assert len(said) == 1 and str(said[0].message).startswith(
        f"Push-Sum weight collapse: node 2 has w = 0.0001 in round 5 (every weight starts at 1; "
        f"this warning is at 0.01), so its local step lr / w = {step / 1e-4:.3g} is 1e+04 "
        "times lr; likely cause: it received little weight")
    assert (f"node 2 w = 0.0001, lr / w = {step / 1e-4:.3g} (lr {step:.3g}; smallest w of any "
            "node 0.0001)") in algorithm.divergence_hint(4, [2])
    assert algorithm.state_dict()["collapse_warned"]


def test_momentum_divergence_names_the_heavy_ball_step(tmp_path):
    cfg = tiny(algorithm__name="dfedavgm", algorithm__momentum=0.9, algorithm__lr=50.0,
               algorithm__clip_norm=0.0, rounds=4)
    with pytest.raises(DivergenceError, match=r"heavy-ball momentum 0\.9 without clip_norm "
                       r"multiplies a steady step by 1 / \(1 - momentum\) = 10 "):
        run(cfg, tmp_path / "run")


def test_divergence_of_every_node_stops_even_with_skip_node(tmp_path, monkeypatch):
    poison(monkeypatch, slice(None))
    with pytest.raises(DivergenceError, match=r"round 1: .* at nodes \[0, 1, 2, 3\]"):
        run(tiny(engine__on_divergence="skip_node"), tmp_path / "run")


def test_skip_node_gossip_equals_training_without_the_node_on_the_cut_graph(tmp_path,
                                                                             monkeypatch):
    """DFedAvg on a ring of 6 with node 2 diverging every round: node 2 keeps its initial model,
    the others train and mix with Metropolis weights of the ring without node 2's links."""
    cfg = tiny(rounds=2, data__num_nodes=6, engine__on_divergence="skip_node")
    ctx, algorithm = engine.build(cfg)  # clean data: the reference computation
    initial = ctx.population.flat.clone()
    poison(monkeypatch, [2])
    history = run(cfg, tmp_path / "run")
    assert [r["nodes_skipped"] for r in history] == [1, 1]
    assert [r["nodes_trained"] for r in history] == [5, 5]
    assert [r["messages"] for r in history] == [8, 8]  # 4 undirected links left, 2 messages each
    assert all(np.isfinite(r["train_loss"]) and np.isfinite(r["test_acc"]) for r in history)

    keep = torch.tensor([0, 1, 3, 4, 5])
    cut = T.ring(6)
    cut.remove_edges_from([(1, 2), (2, 3)])
    W = ctx.comm.matrix(T.doubly_stochastic(cut))
    a = cfg.algorithm
    for t in range(2):
        rows = ctx.population.rows(keep)
        plan = ctx.data.plan(cfg.seed, t, a.batch_size, a.local_epochs, a.local_steps)
        lr = torch.full((5,), algorithm.lr(t), dtype=torch.float64)
        ctx.trainer.train(rows, keep, plan, algorithm.solver, lr)
        for k, v in rows.items():
            ctx.population.params[k][keep] = v
        ctx.comm.mix(W, ctx.population.params)
    final = load(tmp_path / "run" / "final.pt")["population"]["flat"]
    torch.testing.assert_close(final, ctx.population.flat, rtol=0, atol=1e-12)
    ctx.population.flat.copy_(initial)
    node2 = ctx.population.rows(torch.tensor([2]))
    ctx.population.flat.copy_(final)
    assert_same_state(node2, ctx.population.rows(torch.tensor([2])), "node 2")


def test_skip_node_push_sum_keeps_the_mass(tmp_path, monkeypatch):
    """SGP with node 1 diverging: its weight stays 1, sum(w) stays N, the rest converge."""
    poison(monkeypatch, [1])
    cfg = tiny(rounds=3, data__num_nodes=6, algorithm__name="osgp", topology__name="exponential",
               engine__on_divergence="skip_node")
    history = run(cfg, tmp_path / "run")
    for r in history:
        assert r["nodes_skipped"] == 1 and r["nodes_trained"] == 5
        assert r["ps_weight_sum"] == pytest.approx(6, abs=1e-9)
    weights = load(tmp_path / "run" / "final.pt")["algorithm"]["weights"]
    assert weights[1].item() == 1.0


def test_skip_node_server_freezes_the_client(tmp_path, monkeypatch):
    """FedAvg with every client sampled and client 0 diverging: the server model is the mean
    over all clients where client 0 returns the server model unchanged (a zero update)."""
    cfg = tiny(rounds=1, algorithm__name="fedavg", topology__name="star",
               algorithm__participation=1.0, engine__on_divergence="skip_node")
    ctx, algorithm = engine.build(cfg)
    server = {k: v.clone() for k, v in algorithm.server.items()}
    poison(monkeypatch, [0])
    history = run(cfg, tmp_path / "run")
    assert history[0]["nodes_trained"] == 3 and history[0]["nodes_skipped"] == 1
    clients = load(tmp_path / "run" / "final.pt")["population"]["flat"]
    ctx.population.flat.copy_(clients)
    state = load(tmp_path / "run" / "final.pt")["algorithm"]["server"]
    for k, x in server.items():
        rows = ctx.population.params[k]
        assert torch.equal(rows[0], x)
        torch.testing.assert_close(state[k], (x + rows[1:].sum(0)) / 4, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["fedfsa", "scaffold", "dfedsgpsm"])
def test_skip_node_works_through_an_algorithms_own_trainer(tmp_path, monkeypatch, name):
    """With a personal split a server algorithm trains through a trainer of its own (on each
    client's training share): the guard watches it too, so a diverging client is frozen, not
    a reason to stop."""
    centralized = name in ("fedfsa", "scaffold")
    extra = ({"topology__name": "star", "algorithm__participation": 1.0} if centralized else
             {"topology__name": "exponential"})
    if name == "fedfsa":
        extra["algorithm__personal_fraction"] = 0.3
    cfg = tiny(rounds=2, algorithm__name=name, engine__on_divergence="skip_node", **extra)
    poison(monkeypatch, [0])
    history = run(cfg, tmp_path / "run")
    assert [r["nodes_skipped"] for r in history] == [1, 1]
    assert all(np.isfinite(r["test_acc"]) and np.isfinite(r["train_loss"]) for r in history)
    if name == "fedfsa":
        assert all(np.isfinite(r["test_acc_personal"]) for r in history)


def test_parameters_going_non_finite_are_caught(tmp_path, monkeypatch):
    """A node whose parameters become inf while its losses stay finite is named too."""
    real = engine.build

    class Overflowing:
        """The run's trainer, then node 3's parameters set to inf."""

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def train(self, params, nodes, plan, solver, lr, terms=None):
            losses = self.inner.train(params, nodes, plan, solver, lr, terms)
            first = next(iter(params.values()))
            first[(nodes == 3).nonzero().squeeze(1)] = float("inf")
            return losses

    def build(cfg, *args, **kwargs):
        ctx, algorithm = real(cfg, *args, **kwargs)
        ctx.trainer = ctx.guard.wrap(Overflowing(ctx.trainer.inner))  # guarded, overflowing
        return ctx, algorithm

    monkeypatch.setattr("p2pfl.engine.experiment.build", build)
    with pytest.raises(DivergenceError, match=r"round 1: non-finite parameters at nodes \[3\]"):
        run(tiny(), tmp_path / "run")


def test_nan_from_mixing_is_found_through_the_average_and_named(tmp_path, monkeypatch):
    """Training stays finite; the mix puts a NaN into node 1's row. The guard's check of trained
    rows cannot see it: the average model does, and the full scan names the row."""
    real = engine.build

    def build(cfg, *args, **kwargs):
        ctx, algorithm = real(cfg, *args, **kwargs)
        mix = ctx.comm.mix

        def leaking(W, params, steps=1):
            mix(W, params, steps)
            next(iter(params.values()))[1] = float("nan")

        ctx.comm.mix = leaking
        return ctx, algorithm

    monkeypatch.setattr("p2pfl.engine.experiment.build", build)
    with pytest.raises(DivergenceError, match=r"round 1: non-finite parameters at nodes \[1\]"):
        run(tiny(), tmp_path / "run")


def test_sigint_handler_is_restored(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    run(tiny(rounds=1), tmp_path / "run")
    assert signal.getsignal(signal.SIGINT) is before
    assert os.path.exists(tmp_path / "run" / CHECKPOINT)


def test_run_compare_refuses_an_existing_root_without_resume(tmp_path):
    cfg = tiny(rounds=1)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "config.json").write_text(json.dumps(cfg.to_dict()))
    variants = with_overrides(cfg, {})
    variants.compare = [{"label": "a", "algorithm.name": "dfedavg"}]
    with pytest.raises(ConfigError, match="already holds a run"):
        run_compare(variants, tmp_path / "root")


def _three_variants(rounds: int, middle: dict[str, Any]) -> Any:
    """A tiny float64 comparison whose variant b sets `middle`."""
    return with_overrides(tiny(rounds=rounds), {"compare": [
        {"label": "a"}, {"label": "b", **middle}, {"label": "c", "algorithm.lr": 0.05}]})


def _files_but_the_lock(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != ".lock"}


def test_run_compare_runs_every_variant_past_a_divergence(tmp_path):
    """Variant b (lr 20: a loss of about 2.5e3 in round 1, 2e21 in round 2, above max_loss 1e4)
    diverges in round 2; c still runs, and the one DivergenceError at the end names b and holds
    every variant's history, b's up to its last logged round (as `p2pfl compare` goes on)."""
    cfg = _three_variants(2, {"algorithm.lr": 20.0, "engine.max_loss": 1e4})
    with pytest.raises(DivergenceError) as err:
        run_compare(cfg, tmp_path / "out")
    message = str(err.value)
    assert message.startswith("1 of 3 variants diverged") and "\n" not in message
    assert message.endswith("): b: round 2: training loss above engine.max_loss = 10000 at "
                            "nodes [0, 1, 2, 3] (last finite mean loss 2480)")  # b's tail cut
    assert {k: len(h) for k, h in err.value.histories.items()} == {"a": 2, "b": 1, "c": 2}
    assert (tmp_path / "out" / "c" / "seed3" / "summary.json").exists()
    summary = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert [summary[k]["diverged"] for k in "abc"] == [False, True, False]


def test_run_compare_writes_seed_folders_and_refuses_to_resume_the_old_layout(tmp_path,
                                                                               monkeypatch):
    """OUT/<variant>/seed<seed>/, as `p2pfl compare`; a resume of a root whose variant's files
    lie in OUT/<variant>/ (the layout before) is one line saying where to move them, and once
    they are moved it continues them."""
    skip_plots(monkeypatch)
    cfg, out = _three_variants(1, {"algorithm.lr": 0.2}), tmp_path / "out"
    run_compare(cfg, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/seed*")) == [
        "a/seed3", "b/seed3", "c/seed3"]
    for path in (out / "b" / "seed3").iterdir():  # b as the layout before wrote it
        path.rename(out / "b" / path.name)
    (out / "b" / "seed3").rmdir()
    before = _files_but_the_lock(out)
    with pytest.raises(ConfigError, match=r"^out: \S+/out/b holds variant 'b' in the layout "
                                          r"before seed folders: move its files into "
                                          r"\S+/out/b/seed3 to continue it there$"):
        run_compare(with_overrides(cfg, {"rounds": 2}), out, resume=True)
    assert _files_but_the_lock(out) == before
    (out / "b" / "seed3").mkdir()
    for path in [p for p in (out / "b").iterdir() if p.name != "seed3"]:
        path.rename(out / "b" / "seed3" / path.name)
    histories = run_compare(with_overrides(cfg, {"rounds": 2}), out, resume=True)
    assert [len(h) for h in histories.values()] == [2, 2, 2]


def test_resume_refuses_a_checkpoint_whose_streams_were_derived_differently(tmp_path):
    cfg = tiny(rounds=1)
    run(cfg, tmp_path / "run")
    state = load(tmp_path / "run" / CHECKPOINT)
    state["streams"] = state["streams"] | {"batches": 99, "a_newer_stream": 7}
    torch.save(state, tmp_path / "run" / CHECKPOINT)
    (tmp_path / "run" / "checkpoint.json").unlink()  # a checkpoint from before the manifest
    with pytest.raises(ConfigError, match=r"random streams \['a_newer_stream', 'batches'\]"):
        run(with_overrides(cfg, {"rounds": 2}), tmp_path / "run", resume=True)


def test_finite_rows_is_exact_when_a_row_sum_overflows():
    big = torch.finfo(torch.float32).max
    params = {"w": torch.tensor([[big, big], [1.0, 2.0], [1.0, float("nan")]]),
              "b": torch.tensor([[0.0], [float("inf")], [0.0]])}
    assert finite_rows(params).tolist() == [True, False, False]


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch /tmp/p2pfl-pwned-by-checkpoint",))


def test_a_crafted_checkpoint_cannot_run_code_on_resume(tmp_path, capsys):
    """checkpoint.pt is loaded with weights_only=True: a pickle that names a function is refused
    with one line, and the function never runs."""
    out = tmp_path / "run"
    run(tiny(rounds=1), out)
    state = torch.load(out / CHECKPOINT, weights_only=True)
    state["metrics"].append(_Payload())
    torch.save(state, out / CHECKPOINT)
    (out / "checkpoint.json").unlink()  # a crafted directory need not carry the checksum
    if os.path.exists("/tmp/p2pfl-pwned-by-checkpoint"):
        os.remove("/tmp/p2pfl-pwned-by-checkpoint")
    assert main(["resume", str(out), "--set", "rounds=2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err
    assert not os.path.exists("/tmp/p2pfl-pwned-by-checkpoint")


def test_a_second_writer_of_a_run_directory_is_refused(tmp_path, kill_setup, capsys):
    """While one process runs into OUT, a run or resume into OUT exits 2 naming the holder (not
    interleaving its rows); once the holder is killed the lock is gone and the resume works."""
    config, whole = kill_setup
    out = tmp_path / "run"
    proc = _start(config, out)
    wait_mid_round(proc, lambda: _lines(out / METRICS), 2)
    for argv in (["resume", str(out), "--quiet"],
                 ["run", str(config), "--resume", str(out), "--quiet"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is being written by another p2pfl run (pid " in err
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert main(["resume", str(out), "--quiet"]) == 0
    assert strip_times(read_metrics(out / METRICS)) == whole


def test_a_corrupt_checkpoint_is_refused_by_its_checksum(tmp_path, capsys):
    out = tmp_path / "run"
    run(tiny(rounds=1), out)
    manifest = json.loads((out / "checkpoint.json").read_text())
    assert len(manifest["sha256"]) == 1 and manifest["round"] == 1
    run(tiny(rounds=2), out, resume=True)
    assert len(json.loads((out / "checkpoint.json").read_text())["sha256"]) == 2
    data = bytearray((out / CHECKPOINT).read_bytes())
    rng = random.Random(0)
    for i in rng.sample(range(len(data) // 2, len(data)), 100):
        data[i] ^= 0xFF
    (out / CHECKPOINT).write_bytes(bytes(data))
    assert main(["resume", str(out), "--set", "rounds=3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not match its SHA-256 in checkpoint.json" in err
    assert len(read_metrics(out / METRICS)) == 2


def test_resume_batches_nodes_as_the_run_did_and_refuses_another_chunk_size(tmp_path,
                                                                            monkeypatch):
    cfg = tiny(rounds=2, engine__checkpoint_every=1)
    monkeypatch.setattr("p2pfl.engine.builder.plan_chunks", lambda *a, **k: type(
        "Plan", (), {"train": 4, "eval": 5})())  # an automatic plan of this machine's memory
    run(cfg, tmp_path)
    assert torch.load(tmp_path / CHECKPOINT, weights_only=True)["chunks"] == [4, 5]
    built = []
    real_build = engine.build
    monkeypatch.setattr("p2pfl.engine.builder.plan_chunks",
                        lambda *a, **k: pytest.fail("replanned"))
    monkeypatch.setattr("p2pfl.engine.experiment.build",
                        lambda *a, **k: built.append(real_build(*a, **k)) or built[-1])
    run(with_overrides(cfg, {"rounds": 3}), tmp_path, resume=True)
    assert built[0][0].chunks == (4, 5)
    with pytest.raises(ConfigError, match=r"engine.chunk_size \(0 -> 1\)"):
        run(with_overrides(cfg, {"rounds": 4, "engine.chunk_size": 1}), tmp_path, resume=True)


def test_resume_reads_the_edge_file_the_run_read_and_refuses_a_changed_one(tmp_path,
                                                                          monkeypatch, capsys):
    (tmp_path / "graphs").mkdir()
    edges = tmp_path / "graphs" / "ring.txt"
    edges.write_text("".join(f"{i} {(i + 1) % 4}\n" for i in range(4)))
    monkeypatch.chdir(tmp_path)
    cfg = tiny(rounds=1, algorithm__name="osgp", topology__name="from_edges",
               topology__path="graphs/ring.txt")
    run(cfg, tmp_path / "run")
    recorded = load_json(tmp_path / "run" / "config.json")["topology"]["path"]
    assert recorded == str(edges)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a relative path would now name no file
    assert main(["resume", str(tmp_path / "run"), "--set", "rounds=2"]) == 0
    edges.write_text("".join(f"{i} {(i - 1) % 4}\n" for i in range(4)))
    assert main(["resume", str(tmp_path / "run"), "--set", "rounds=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("p2pfl: error: topology.path: the file") and "differs from what" in err


def test_resume_refuses_a_dataset_whose_files_changed(tmp_path):
    from tests.test_data import make_idx_dataset

    make_idx_dataset(tmp_path / "fmnist", gz=True, seed=0)
    cfg = tiny(rounds=1, data__name="fashion_mnist", data__root=str(tmp_path / "fmnist"),
               data__partition="iid", data__alpha=0.3, algorithm__batch_size=2,
               eval__local_samples=3)
    run(cfg, tmp_path / "run")
    assert "sha256" in load_json(tmp_path / "run" / "inputs.json")["data"]
    run(with_overrides(cfg, {"rounds": 2}), tmp_path / "run", resume=True)
    make_idx_dataset(tmp_path / "fmnist", gz=True, seed=1)
    with pytest.raises(ConfigError, match="^data: the fashion_mnist data as loaded differs"):
        run(with_overrides(cfg, {"rounds": 3}), tmp_path / "run", resume=True)


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_a_single_run_and_a_compare_root_never_turn_into_each_other(tmp_path, capsys):
    single = tmp_path / "single.toml"
    single.write_text(tiny_toml("", rounds=1))
    variants = '[[compare]]\nlabel = "a"\n[[compare]]\nlabel = "b"\n"algorithm.lr" = 0.05\n'
    two = tmp_path / "two.toml"
    two.write_text(tiny_toml(variants, rounds=1))
    assert main(["run", str(single), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert main(["run", str(two), "--out", str(tmp_path / "c"), "--quiet"]) == 0
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    attempts = [
        (["resume", str(tmp_path / "s"), "--set", 'compare=[{label="x"}]'], "holds a single run"),
        (["run", str(two), "--resume", str(tmp_path / "s")], "holds a single run"),
        (["run", str(single), "--resume", str(tmp_path / "c")], "holds 2 [[compare]] variants"),
        (["resume", str(tmp_path / "c"), "--set", 'compare=[{label="a"}]'],
         "other [[compare]] variants"),
    ]
    for argv, message in attempts:
        assert main([*argv, "--quiet"]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("mode", ["stop", "skip_node"])
def test_an_evaluation_that_is_not_finite_is_a_divergence(tmp_path, monkeypatch, mode):
    """Finite parameters whose outputs overflow: the run stops as for any divergence, in either
    mode, before the round's row is written."""
    import p2pfl.engine.evaluation as evaluation

    real, calls = evaluation.evaluate_sums, []

    def overflowing(*args, **kwargs):
        correct, loss = real(*args, **kwargs)
        calls.append(1)
        return correct, loss * math.inf if len(calls) >= 2 else loss  # round 2's average model

    monkeypatch.setattr(evaluation, "evaluate_sums", overflowing)
    with pytest.raises(DivergenceError, match=r"^round 2: non-finite test_loss in evaluation"):
        run(tiny(rounds=3, engine__on_divergence=mode), tmp_path / "run")
    assert len(read_metrics(tmp_path / "run" / METRICS)) == 1


def test_metrics_are_strict_json_and_a_round_without_training_reads_as_nan(tmp_path):
    cfg = tiny(rounds=4, algorithm__name="fedavg", topology__name="star",
               algorithm__participation=0.25, topology__node_drop=0.6)
    history = run(cfg, tmp_path / "run")
    lines = (tmp_path / "run" / METRICS).read_text().splitlines()
    untrained = [i for i, r in enumerate(history) if r["nodes_trained"] == 0]
    assert untrained, "node_drop 0.6 left every round with a trained client"
    for i in untrained:
        assert json.loads(lines[i])["train_loss"] is None and "NaN" not in lines[i]
        assert math.isnan(read_metrics(tmp_path / "run" / METRICS)[i]["train_loss"])
    json.loads((tmp_path / "run" / "summary.json").read_text(), parse_constant=pytest.fail)


def test_a_full_disk_is_one_line_and_the_last_checkpoint_stays(tmp_path, monkeypatch, capsys):
    import errno

    import p2pfl.engine.checkpoint as checkpoint

    config = tmp_path / "cfg.toml"
    config.write_text(tiny_toml("", rounds=2))
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--quiet", "--set", "rounds=1"]) == 0
    saved = (out / CHECKPOINT).read_bytes()
    real = checkpoint._HashingWriter.write

    def full(self, data):
        if len(data) > 100:  # the tensors, not the archive header
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(checkpoint._HashingWriter, "write", full)
    capsys.readouterr()
    assert main(["resume", str(out), "--quiet", "--set", "rounds=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"p2pfl: error: {out / CHECKPOINT}: No space left on device; a run keeps its "
                   "last checkpoint: free space, then p2pfl resume")
    assert (out / CHECKPOINT).read_bytes() == saved and not list(out.glob(".*.tmp"))
    monkeypatch.undo()
    assert main(["resume", str(out), "--quiet", "--set", "rounds=2"]) == 0


def test_ctrl_c_in_a_comparison_says_to_rerun_it(tmp_path, monkeypatch, capsys):
    import p2pfl.engine.compare
    from p2pfl.errors import RunInterrupted

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise RunInterrupted("stopped after round 1 with a checkpoint",
                             "continue with: p2pfl resume somewhere")

    monkeypatch.setattr(p2pfl.engine.compare, "run", interrupted)
    config = tmp_path / "c.toml"
    config.write_text(tiny_toml('[[compare]]\nlabel = "a"\n"algorithm.name" = "dfedavg"\n'))
    assert main(["compare", str(config), "--out", str(tmp_path / "o"), "--quiet"]) == 130
    assert capsys.readouterr().err == (
        "p2pfl: interrupted: stopped after round 1 with a checkpoint; continue the comparison "
        "by running the same command again (finished runs are kept)\n")


def test_the_data_digest_is_taken_once_and_again_after_a_change():
    from types import SimpleNamespace

    import p2pfl.objects.inputs as I

    x, y = torch.zeros(4, 3), torch.tensor([0, 1, 0, 1])
    data = SimpleNamespace(x_train=x, y_train=y, x_test=x[:2].clone(), y_test=y[:2].clone())
    first = I.data_sha256(data)
    assert I.data_sha256(data) == first and I._DIGESTS[id(x)][3] == first  # cached
    x[0, 0] = 1.0  # an in-place change bumps the version: hashed again
    assert I.data_sha256(data) != first
    data.y_test = torch.tensor([1, 1])  # another tensor: hashed again
    changed = I.data_sha256(data)
    x[0, 0] = 0.0
    assert changed != first and I.data_sha256(data) != changed
    key = id(x)
    del data, x
    import gc

    gc.collect()
    assert key not in I._DIGESTS  # the entry left with its tensor


def test_a_finite_loss_above_max_loss_is_a_divergence(tmp_path, capsys, monkeypatch):
    """engine.max_loss: node 2's inputs scaled by 1e4 give it a huge but finite loss; it is
    named (stop) or frozen (skip_node) like a non-finite one, and the other nodes train on."""
    real = engine.build

    def build(cfg, *args, **kwargs):
        ctx, algorithm = real(cfg, *args, **kwargs)
        ctx.data.x_train[ctx.data.node_indices(2)] *= 1e4
        return ctx, algorithm

    monkeypatch.setattr("p2pfl.engine.experiment.build", build)
    history = run(tiny(rounds=1), tmp_path / "unguarded")
    assert np.isfinite(history[0]["train_loss"]) and history[0]["train_loss"] > 50
    config = tmp_path / "x.toml"
    config.write_text(tiny_toml("", rounds=1, extra="[engine]\nmax_loss = 50.0"))
    assert main(["run", str(config), "--out", str(tmp_path / "stop"), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "round 1: training loss above engine.max_loss = 50 at nodes [2]" in err
    skipped = run(tiny(rounds=2, engine__max_loss=50.0, engine__on_divergence="skip_node"),
                  tmp_path / "skip")
    assert [r["nodes_skipped"] for r in skipped] == [1, 1]
    assert all(r["train_loss"] < 50 for r in skipped)
