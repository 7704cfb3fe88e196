"""Sharded runs (p2pfl.scale.distributed): the exchange plan by hand, then R processes on 127.0.0.1
(gloo) against one process: a Push-Sum, a gossip and a centralized algorithm, the bytes that
cross processes, a killed process and a resume on another number of processes, and a topology
given as a Python object under torchrun."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
import torch

import topologies as T
from p2pfl import engine
from p2pfl.cli import main
from p2pfl.config import load_config
from p2pfl.core.mixing import LocalComm
from p2pfl.engine.builder import build
from p2pfl.engine.checkpoint import read_population
from p2pfl.report.results import METRICS, read_metrics
from p2pfl.scale.distributed import ExchangePlan, Shard
from tests.conftest import TIME_KEYS, skip_plots

RANK_KEYS = ("rank_bytes_mixing", "rank_bytes_collective")  # only distributed runs have them
RANK_SUMS = ("test_loss", "test_acc_local_mean", "consensus_dist")  # float64 sums over ranks
TIMEOUT = 120


# --- the plan of one product, by hand ------------------------------------------------------


def test_shards_are_contiguous_blocks_the_first_ranks_one_larger() -> None:
    assert [Shard(r, 3, 7).bounds(r) for r in range(3)] == [(0, 3), (3, 5), (5, 7)]
    assert Shard(1, 3, 7).mine(torch.arange(7)).tolist() == [False] * 3 + [True] * 2 + [False] * 2


@pytest.mark.parametrize("sparse", [False, True])
def test_exchange_on_a_ring_sends_each_boundary_row_once(sparse: bool) -> None:
    """Ring of 6 on 3 ranks: rank 1 holds nodes 2, 3; it needs node 1 (rank 0) and node 4
    (rank 2), and sends node 2 to rank 0 and node 3 to rank 2."""
    W = torch.as_tensor(T.doubly_stochastic(nx.cycle_graph(6)))
    if sparse:
        W = LocalComm(torch.device("cpu"), torch.float64, "sparse").matrix(W)
    plan = ExchangePlan(W, Shard(1, 3, 6), torch.float64, torch.device("cpu"))
    assert {s: v.tolist() for s, v in plan.send.items()} == {0: [0], 2: [1]}  # positions 0, 1
    assert plan.receive == {0: 1, 2: 1} and plan.needed == 2
    own, received = ((plan.own.to_dense(), plan.received.to_dense()) if sparse
                     else (plan.own, plan.received))
    dense = W.to_dense() if sparse else W
    assert torch.equal(own, dense[2:4, 2:4]) and torch.equal(received, dense[2:4][:, [1, 4]])


def test_exchange_on_a_complete_graph_receives_every_other_row_once() -> None:
    """Complete graph, 7 nodes on 3 ranks: every rank needs every other rank's rows, once
    each: the bytes of an all-gather, which is therefore never cheaper."""
    W = torch.as_tensor(T.doubly_stochastic(nx.complete_graph(7)))
    for rank in range(3):
        shard = Shard(rank, 3, 7)
        plan = ExchangePlan(W, shard, torch.float64, torch.device("cpu"))
        assert plan.needed == 7 - shard.rows
        assert {s: len(v) for s, v in plan.send.items()} == {
            s: shard.rows for s in range(3) if s != rank}


# --- R processes against one ----------------------------------------------------------------


def dist_toml(algorithm: str, topology: str, rounds: int, dtype: str = "float64",
              extra: str = "") -> str:
    return f"""seed = 5
rounds = {rounds}
device = "cpu"
[data]
name = "synthetic"
num_nodes = 7
partition = "dirichlet"
alpha = 0.5
synthetic_train = 700
synthetic_test = 100
[model]
name = "mlp"
[topology]
name = "{topology}"
{extra}
[algorithm]
name = "{algorithm}"
lr = 0.05
local_steps = 2
local_epochs = 0
batch_size = 16
[eval]
local_samples = 50
[engine]
dtype = "{dtype}"
checkpoint_every = 1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


def single(cfg_path: Path, out: Path, **objects: Any) -> list[dict[str, Any]]:
    """The run in this process (the reference)."""
    engine.run(load_config(cfg_path), out, **objects)
    return read_metrics(out / METRICS)


def nproc(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """`python -m p2pfl ARGS` (with --nproc R among them) as a user runs it."""
    return subprocess.run([sys.executable, "-m", "p2pfl", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


def assert_same_run(ours: Path, reference: Path, exact: bool = False) -> None:
    """Same metrics (times and byte counts aside) and final parameters: within 1e-12, or
    `exact`ly equal except the evaluation's sums over ranks, whose terms a process of another
    thread count may round differently in their last float32 bit (1e-6)."""
    a, b = read_metrics(ours / METRICS), read_metrics(reference / METRICS)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert set(x) - set(RANK_KEYS) == set(y)
        for key in set(y) - set(TIME_KEYS):
            rtol = 1e-6 if exact and key in RANK_SUMS else 0 if exact else 1e-12
            assert x[key] == pytest.approx(y[key], rel=rtol, abs=0), key
    final = torch.load(ours / "final.pt", weights_only=True)
    widths = [v.numel() for v in final["average_model"].values()]
    pa = read_population(ours, final["population"], widths)["flat"]
    pb = torch.load(reference / "final.pt", weights_only=True)["population"]["flat"]
    assert (pa - pb).abs().max().item() <= (0.0 if exact else 1e-12)


@pytest.fixture
def quick(monkeypatch: Any) -> None:
    skip_plots(monkeypatch)


def expected_mixing_bytes(cfg_path: Path, world: int) -> list[int]:
    """Per round: (node i, receiving rank s != i's rank) pairs with P[j, i] != 0 for some node j
    of s, times a model in float64: each row crosses once per rank that needs it."""
    cfg = load_config(cfg_path)
    ctx, algorithm = build(cfg)
    shard = Shard(0, world, cfg.data.num_nodes)
    owner = np.repeat(np.arange(world), [hi - lo for lo, hi in map(shard.bounds, range(world))])
    counts = []
    for t in range(cfg.rounds):
        graph = ctx.schedule.at(t)
        P = T.column_stochastic(graph, faults=ctx.faults(t, graph))
        pairs = {(i, owner[j]) for j, i in zip(*np.nonzero(P)) if owner[j] != owner[i]}
        counts.append(len(pairs) * ctx.population.num_params * 8)
    return counts


def test_push_sum_with_faults_on_3_processes_equals_one(tmp_path: Path, quick: None) -> None:
    """SGP with 20 % of messages lost and 30 % of nodes offline (in round 1, both nodes of
    rank 2): the metrics and parameters of 3 processes equal one process's within 1e-12
    (float64), the Push-Sum mass is N every round, the mixing bytes are the rows that cross
    processes, and the collective bytes are the round's own collectives (not the checkpoint's
    gather)."""
    cfg = write(tmp_path, dist_toml("osgp", "exponential", 4,
                                    extra="link_drop = 0.2\nnode_drop = 0.3"))
    reference = single(cfg, tmp_path / "one")
    assert reference[0]["nodes_trained"] == 3  # nodes 0, 1, 5, 6 offline
    done = nproc("run", str(cfg), "--out", str(tmp_path / "three"), "--quiet", "--nproc", "3")
    assert done.returncode == 0, done.stderr
    assert_same_run(tmp_path / "three", tmp_path / "one")
    records = read_metrics(tmp_path / "three" / METRICS)
    assert all(abs(r["ps_weight_sum"] - 7) < 1e-9 for r in records)
    assert len({r["messages"] for r in reference}) > 1  # links were lost
    assert [r["rank_bytes_mixing"] for r in records] == expected_mixing_bytes(cfg, 3)
    # per rank and round: the average model twice (divergence check, evaluation), the losses
    # [7] float64, the two divergence records [7] int32, the evaluation's sums (2 + 3 float64,
    # a float32 minimum) and the accounting all-reduce (2 float64)
    model = build(load_config(cfg))[0].population.num_params * 8
    small = 7 * 8 + 2 * 7 * 4 + (2 + 3) * 8 + 4 + 2 * 8
    assert [r["rank_bytes_collective"] for r in records] == [3 * (2 * model + small)] * 4


def test_sharded_checkpoints_resume_in_one_process_and_refuse_a_changed_shard(
        tmp_path: Path, quick: None, capsys: Any) -> None:
    """Each of 2 processes writes its rows; one process resumes them (R' = 1) to the numbers
    of an uninterrupted run, and a shard whose bytes changed is refused in one line."""
    cfg = write(tmp_path, dist_toml("osgp", "exponential", 2, extra="link_drop = 0.2"))
    out = tmp_path / "two"
    done = nproc("run", str(cfg), "--out", str(out), "--quiet", "--nproc", "2")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (out / "shards").iterdir()) == [
        "round1-nodes0-4.pt", "round1-nodes4-7.pt", "round2-nodes0-4.pt", "round2-nodes4-7.pt"]
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    shard = broken / "shards" / "round2-nodes4-7.pt"
    shard.write_bytes(shard.read_bytes()[:-1] + b"x")
    assert main(["resume", str(broken), "--set", "rounds=3", "--quiet"]) == 2
    assert "round2-nodes4-7.pt is missing or does not match its SHA-256" in capsys.readouterr().err
    assert main(["resume", str(out), "--set", "rounds=3", "--quiet"]) == 0
    single(write(tmp_path, dist_toml("osgp", "exponential", 3, extra="link_drop = 0.2")),
           tmp_path / "one")
    assert_same_run(out, tmp_path / "one")


def test_centralized_on_3_processes_is_bitwise_the_single_process_in_float32(
        tmp_path: Path, quick: None) -> None:
    """FedAvg: each process trains the sampled clients it holds, an all-reduce of zero-filled
    rows gathers them exactly, and the server's aggregation is the single process's: float32
    results are equal bit for bit."""
    cfg = write(tmp_path, dist_toml("fedavg", "star", 3, dtype="float32").replace(
        '[algorithm]\nname = "fedavg"', '[algorithm]\nname = "fedavg"\nparticipation = 0.6'))
    single(cfg, tmp_path / "one")
    done = nproc("run", str(cfg), "--out", str(tmp_path / "three"), "--quiet", "--nproc", "3")
    assert done.returncode == 0, done.stderr
    assert_same_run(tmp_path / "three", tmp_path / "one", exact=True)


def test_unequal_nodes_on_2_processes_equal_one(tmp_path: Path, quick: None) -> None:
    """Nodes of unequal sizes taking one local epoch each (K_i differ), with offline nodes and
    per-node local test splits: 2 processes give one process's metrics (the per-node
    accuracies included) and parameters within 1e-12 (float64)."""
    text = dist_toml("dfedsgpsm", "exponential", 2, extra="node_drop = 0.3").replace(
        'partition = "dirichlet"\nalpha = 0.5',
        'partition = "label_dirichlet"\nalpha = 0.5\nlocal_test = 0.2').replace(
        "local_steps = 2\nlocal_epochs = 0", "local_steps = 0\nlocal_epochs = 1")
    cfg = write(tmp_path, text.replace('name = "dfedsgpsm"', 'name = "dfedsgpsm"\nrho = 0.05'))
    reference = single(cfg, tmp_path / "one")
    assert "test_acc_node_worst10" in reference[-1]
    done = nproc("run", str(cfg), "--out", str(tmp_path / "two"), "--quiet", "--nproc", "2")
    assert done.returncode == 0, done.stderr
    assert_same_run(tmp_path / "two", tmp_path / "one")


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_a_killed_process_stops_the_others_and_the_run_resumes_on_2(tmp_path: Path,
                                                                     quick: None) -> None:
    """Gossip (DFedAvg) on 3 processes; SIGKILL one mid-run: the others exit with one line
    naming the lost rank and the intact checkpoint, and `resume --nproc 2` finishes the run
    equal to one uninterrupted process (float64, 1e-12)."""
    rounds = 60
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", rounds))
    out = tmp_path / "three"
    proc = subprocess.Popen([sys.executable, "-m", "p2pfl", "run", str(cfg), "--out", str(out),
                             "--quiet", "--nproc", "3"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + TIMEOUT
    while not (out / METRICS).exists() or len((out / METRICS).read_text().splitlines()) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended first"
        time.sleep(0.02)
    killed = time.monotonic()
    os.kill(children(proc.pid)[2], signal.SIGKILL)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert time.monotonic() - killed < 60
    assert proc.returncode == 4, err
    assert "Traceback" not in err and "lost another rank" in err and "is intact" in err
    done = nproc("resume", str(out), "--quiet", "--nproc", "2")
    assert done.returncode == 0, done.stderr
    single(cfg, tmp_path / "one")
    assert_same_run(out, tmp_path / "one")


SCRIPT = """import sys
import networkx as nx
from p2pfl.config import load_config
from p2pfl.engine import run

graph = nx.cycle_graph(7)
graph.add_edge(0, 3)
run(load_config(sys.argv[1]), sys.argv[2], topology=graph)
"""


def test_python_topology_under_torchrun_in_float32(tmp_path: Path, quick: None) -> None:
    """A script that hands the engine a networkx graph, launched as users launch it
    (torchrun, 2 processes), in float32: the mixing adds the same terms in another order, so
    the run equals one process's to float32 rounding (parameters within 1e-5 after 3 rounds,
    losses within 1e-4 relative, accuracies within one test sample of 100)."""
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 3, dtype="float32"))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    graph = nx.cycle_graph(7)
    graph.add_edge(0, 3)
    single(cfg, tmp_path / "one", topology=graph)
    done = torchrun(script, str(cfg), str(tmp_path / "two"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "two" / "config.json").read_text())["topology"]
    ours, reference = read_metrics(tmp_path / "two" / METRICS), read_metrics(
        tmp_path / "one" / METRICS)
    for x, y in zip(ours, reference, strict=True):
        for key in set(y) - set(TIME_KEYS):
            if key.startswith("test_acc"):
                assert abs(x[key] - y[key]) <= 0.0101, key
            else:
                assert x[key] == pytest.approx(y[key], rel=1e-4, abs=1e-6), key
    final = torch.load(tmp_path / "two" / "final.pt", weights_only=True)
    widths = [v.numel() for v in final["average_model"].values()]
    pa = read_population(tmp_path / "two", final["population"], widths)["flat"]
    pb = torch.load(tmp_path / "one" / "final.pt", weights_only=True)["population"]["flat"]
    assert (pa - pb).abs().max().item() <= 1e-5


def torchrun(script: Path, *args: str) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node 2 SCRIPT ARGS`, as a user launches a script."""
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(script), *args],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "OMP_NUM_THREADS": "1",
                               "PYTHONPATH": str(Path(__file__).parents[1])})


def test_an_error_on_one_rank_stops_every_rank_before_anything_is_written(
        tmp_path: Path) -> None:
    """Rank 1 gets a graph of the wrong size: rank 0 raises rank 1's error, naming it, and
    neither writes the run directory."""
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 2))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.replace("nx.cycle_graph(7)",
                                     "nx.cycle_graph(7 if os.environ['RANK'] == '0' else 5)")
                      .replace("import sys", "import os\nimport sys"))
    done = torchrun(script, str(cfg), str(tmp_path / "two"))
    assert done.returncode != 0
    assert "[rank0]: p2pfl.scale.processes.AgreedError: rank 1: topology: the topology has 5" in (
        done.stderr)
    assert not (tmp_path / "two").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--nproc", "0"], "--nproc: must be at least 1"),
    (["--nproc", "8"], "8 processes for 7 nodes"),
])
def test_bad_launches_are_one_line(tmp_path: Path, capsys: Any, args: list[str],
                                   message: str) -> None:
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 2))
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("rank", "lines"), [("0", 1), ("1", 0)])
def test_what_every_rank_has_alike_is_printed_once(tmp_path: Path, capsys: Any,
                                                   monkeypatch: Any, rank: str,
                                                   lines: int) -> None:
    """Under torchrun (whose ranks' outputs all reach the terminal) the final record and the
    line of a second Ctrl-C come from rank 0 alone."""
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 2))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setattr(engine, "run", lambda *args, **kwargs: [{"round": 2}])
    assert main(["run", str(cfg), "--out", str(tmp_path / "run")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == lines

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "run", interrupted)
    assert main(["run", str(cfg), "--out", str(tmp_path / "run")]) == 130
    assert len(capsys.readouterr().err.splitlines()) == lines


@pytest.mark.parametrize("command", ["run", "compare"])
def test_compare_variants_under_torchrun_are_one_line(tmp_path: Path, capsys: Any,
                                                      monkeypatch: Any, command: str) -> None:
    """A config with [[compare]] variants runs in one process: under torchrun it is refused
    before anything is written (not raced by every rank into one directory)."""
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 2)
                + "[[compare]]\nalgorithm.lr = 0.1\n[[compare]]\nalgorithm.lr = 0.2\n")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main([command, str(cfg), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "runs in one process" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_sigterm_to_the_launcher_stops_every_rank(tmp_path: Path) -> None:
    """The ranks of --nproc run in their own sessions: a SIGTERM to the launcher (a scheduler,
    `timeout`) stops them too, rather than leaving them running."""
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 10_000))
    proc = subprocess.Popen([sys.executable, "-m", "p2pfl", "run", str(cfg), "--out",
                             str(tmp_path / "run"), "--quiet", "--nproc", "2"],
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(ranks) < 2:
            assert proc.poll() is None and time.monotonic() < deadline
            ranks = children(proc.pid)
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert not any(Path(f"/proc/{pid}").exists() for pid in ranks)
    finally:
        for pid in ranks:
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)


def test_nproc_however_abbreviated_is_not_passed_on_and_never_nests(tmp_path: Path,
                                                                    capsys: Any,
                                                                    monkeypatch: Any) -> None:
    """argparse takes --npro 3 for --nproc 3: the ranks must not get it (each would launch 3
    more, without end), and a process of a distributed launch refuses --nproc."""
    from p2pfl.cli.main import _without_nproc

    assert _without_nproc(["run", "c.toml", "--npro", "3", "--quiet", "--np=2", "--nproc",
                           "2", "--out", "x"]) == ["run", "c.toml", "--quiet", "--out", "x"]
    cfg = write(tmp_path, dist_toml("dfedavg", "ring", 2))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--npro", "2"]) == 2
    err = capsys.readouterr().err
    assert "already one of a distributed run's processes" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_cuda_run_joins_with_a_backend_for_its_cpu_tensors(monkeypatch: Any) -> None:
    """NCCL carries CUDA tensors only; the startup agreement, the stop flags and the byte
    counts are CPU tensors, so the process group of a CUDA run needs gloo for those too."""
    from torch.distributed.distributed_c10d import BackendConfig

    from p2pfl.scale import processes as distributed

    asked: dict[str, str] = {}
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group",
                        lambda backend, **kwargs: asked.update(backend=backend))
    monkeypatch.setattr(distributed.atexit, "register", lambda f: None)
    assert distributed.init(torch.device("cuda")) == torch.device("cuda", 0)
    assert BackendConfig(asked["backend"]).get_device_backend_map() == {"cpu": "gloo",
                                                                         "cuda": "nccl"}


def test_a_rank_killed_by_a_signal_is_the_launchers_status_128_plus_it(tmp_path: Path,
                                                                       monkeypatch: Any) -> None:
    """Rank 0 killed (SIGKILL: out of memory) ends --nproc with 137, as a shell says, not
    sys.exit(-9), which the shell reads as 247."""
    from p2pfl.scale import launch

    victim = tmp_path / "victim"
    victim.write_text("#!/bin/sh\nkill -9 $$\n")
    victim.chmod(0o755)
    monkeypatch.setattr(launch.sys, "executable", str(victim))
    assert launch.spawn(["run"], 2) == 128 + signal.SIGKILL
