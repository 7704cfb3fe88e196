"""Simulated network time: the clock on hand-computed graphs, overlap Push-Sum's mass and limits,
and exact resume with messages in flight."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

import topologies as T
from p2pfl.config import ConfigError, NetworkConfig
from p2pfl.engine import run
from p2pfl.engine.builder import build
from p2pfl.report.results import METRICS, read_metrics
from p2pfl.scale.network import Clock
from tests.conftest import play, small_config, strip_times


def clock(n: int, **net) -> Clock:
    """One local step of 1 s per round, messages of 0 bytes (latency only)."""
    config = NetworkConfig(enabled=True, step_s=1.0, **net)
    return Clock(config, n, seed=0, steps=1, message_bytes=0)


def advance(c: Clock, graph: nx.Graph, rounds: int) -> list[list[float]]:
    starts = []
    for t in range(rounds):
        c.commit(c.plan_round(t, graph, T.Faults.none(graph.number_of_nodes())))
        starts.append(c.start.tolist())
    return starts


def test_clock_on_a_chain_waits_for_the_slowest_neighbour():
    """0 - 1 - 2, latency 0.5 s but 2 s on the link 0 - 1: node 2 runs ahead until node 1, held
    back by node 0's slow link, holds it back in turn."""
    G = nx.path_graph(3)
    G.edges[0, 1]["latency_s"] = 2.0
    assert advance(clock(3, latency_s=0.5), G, 2) == [[3.0, 3.0, 1.5], [6.0, 6.0, 4.5]]


def test_clock_on_a_directed_cycle_with_one_slow_link():
    """0 -> 1 -> 2 -> 0, latency 0.5 s but 5 s on 1 -> 2: the delay goes around the cycle."""
    G = nx.DiGraph([(0, 1), (1, 2), (2, 0)])
    G.edges[1, 2]["latency_s"] = 5.0
    assert advance(clock(3, latency_s=0.5), G, 2) == [[1.5, 1.5, 6.0], [7.5, 3.0, 7.5]]


def test_clock_on_a_star_server_round():
    """Server 0, clients 1..3: down 0.5 s, 2 steps of 1 s, up 0.5 s; unsampled clients wait."""
    c = Clock(NetworkConfig(enabled=True, step_s=1.0, latency_s=0.5), 4, 0, 2, 0)
    record = c.commit(c.plan_server(0, np.array([1, 3])))
    assert record["sim_time_s"] == 3.0 and c.start.tolist() == [3.0] * 4
    c.commit(c.plan_server(1, np.array([2])))
    assert c.start.tolist() == [6.0] * 4
    c.commit(c.plan_server(2, np.array([], dtype=np.int64)))  # no client: no time passes
    assert c.start.tolist() == [6.0] * 4


def test_bandwidth_stragglers_and_slow_links():
    """A message of 1.25 MB over 1 Gbit/s takes 10 ms more than its latency; a straggler and a
    slow link take slow_factor times longer (which ones is fixed by the seed)."""
    plain = Clock(NetworkConfig(enabled=True, step_s=1.0, latency_s=0.0), 2, 0, 1, 1_250_000)
    src, dst = np.array([0, 1]), np.array([1, 0])
    assert plain.transfer(0, src, dst) == pytest.approx([0.01, 0.01])
    slow = Clock(NetworkConfig(enabled=True, step_s=1.0, latency_s=0.0, slow_links=1.0,
                               stragglers=1.0, slow_factor=4.0), 2, 0, 3, 1_250_000)
    assert slow.transfer(0, src, dst) == pytest.approx([0.04, 0.04])
    assert slow.compute(0, np.array([True, False])).tolist() == [12.0, 0.0]
    some = Clock(NetworkConfig(enabled=True, stragglers=0.3), 1000, 0, 1, 0)
    assert 250 < (some.step_s > some.net.step_s).sum() < 350


def overlap(**overrides):
    base = {"algorithm__name": "osgp", "topology__name": "exponential", "topology__directed": True,
            "data__num_nodes": 6, "network__enabled": True, "network__overlap": True,
            "network__delays": "random", "network__max_delay": 3}
    return small_config(**(base | overrides))


def test_overlap_without_delays_is_synchronous_push_sum(tmp_path):
    sync = run(overlap(rounds=3, network__overlap=False, network__delays="clock",
                       network__max_delay=8), tmp_path / "sync")
    delayed = run(overlap(rounds=3, network__max_delay=0), tmp_path / "overlap")
    keep = ("test_acc", "test_loss", "train_loss", "consensus_dist", "ps_weight_min")
    assert [{k: r[k] for k in keep} for r in sync] == [{k: r[k] for k in keep} for r in delayed]


def test_overlap_keeps_the_mass_with_delays_and_link_drops(tmp_path):
    history = run(overlap(rounds=6, topology__link_drop=0.3), tmp_path / "run")
    assert any(r["ps_weight_in_flight"] > 0.5 for r in history)
    for r in history:
        assert r["ps_weight_sum"] + r["ps_weight_in_flight"] == pytest.approx(6, abs=1e-9)


def test_overlap_push_sum_reaches_the_exact_average_without_gradients():
    ctx, algorithm = build(overlap(algorithm__lr=1e-300, algorithm__local_steps=1,
                                   algorithm__batch_size=1, topology__name="one_peer_exponential"))
    rng = torch.Generator().manual_seed(0)
    for v in ctx.population.params.values():
        v.copy_(torch.randn(v.shape, generator=rng, dtype=v.dtype))
    start = {k: v.mean(0) for k, v in ctx.population.params.items()}
    for t in range(150):
        play(algorithm, ctx, t, ctx.schedule.at(t))
    assert algorithm.in_flight.weight() > 0  # messages are still in flight at the end
    for k, v in ctx.population.params.items():
        assert (v - start[k]).abs().max().item() < 1e-9


def test_resume_with_messages_in_flight_is_exact(tmp_path):
    cfg = overlap(rounds=5, engine__checkpoint_every=1)
    whole = run(cfg, tmp_path / "whole")
    run(overlap(rounds=2, engine__checkpoint_every=1), tmp_path / "part")
    resumed = run(cfg, tmp_path / "part", resume=True)
    assert strip_times(resumed) == strip_times(whole)
    assert strip_times(read_metrics(tmp_path / "part" / METRICS)) == strip_times(whole)
    assert any(r["ps_weight_in_flight"] > 0 for r in whole[:2])


def test_network_settings_are_checked():
    with pytest.raises(ConfigError,
                       match="^network.overlap: dfedavg does not mix messages that arrive late"):
        small_config(network__enabled=True, network__overlap=True)
    with pytest.raises(ConfigError, match="^network.slow_links: is set but network.enabled"):
        small_config(network__slow_links=0.1)
    with pytest.raises(ConfigError, match="^network.delays: unknown value"):
        small_config(network__enabled=True, network__delays="soon")


def test_time_to_accuracy_in_the_table_and_on_the_plot(tmp_path, capsys):
    from p2pfl.cli import main

    run(small_config(rounds=3, network__enabled=True), tmp_path / "timed")
    run(small_config(rounds=3), tmp_path / "rounds")
    assert main(["table", str(tmp_path / "timed"), "--target", "0.01"]) == 0
    table = capsys.readouterr().out
    assert "| simulated s to 1% |" in table
    first = read_metrics(tmp_path / "timed" / METRICS)[0]["sim_time_s"]
    assert f"| {first:.3g} |" in table
    out = tmp_path / "curves"
    assert main(["plot", str(tmp_path / "timed"), "--x", "time", "--out", str(out)]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 0
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "rounds"), "--x", "time", "--out", str(out)]) == 2
    assert "has no simulated time" in capsys.readouterr().err


def test_network_study_table_reads_time_to_target():
    from analysis.network_study import seconds_to, table

    def history(pace: float, accs: list[float]) -> list[dict]:
        return [{"round": t + 1, "sim_time_s": pace * (t + 1), "test_acc": a}
                for t, a in enumerate(accs)]

    results = {0.0: {"a": history(1.0, [0.5, 0.8, 0.9]), "b": history(0.5, [0.4, 0.5, 0.6])},
               0.3: {"a": history(2.0, [0.5, 0.7, 0.8]), "b": history(0.5, [0.4, 0.5, 0.8])}}
    assert seconds_to(results[0.3]["a"], 0.8) == 6.0
    assert seconds_to(results[0.0]["b"], 0.8) is None
    lines = table(results, 0.8, shown=0.3).splitlines()
    assert lines[0] == ("| variant | final acc @ 0.3 | s/round @ 0.3 | s to 80% @ 0 "
                        "| s to 80% @ 0.3 |")
    assert lines[2] == "| a | 80.0 % | 2.00 | 2.0 | 6.0 |"
    assert lines[3] == "| b | 80.0 % | 0.50 | not reached | 1.5 |"


def test_overlap_rounds_are_slots_and_a_straggler_takes_part_when_its_phase_ends():
    """Slots of 1 s; node 2 takes 3 s per local phase: it trains and sends in slots 2, 5, 8
    only, the others in every slot; a message (latency 0.5 s) is one slot late."""
    c = clock(3, latency_s=0.5, overlap=True)
    c.step_s = np.array([1.0, 1.0, 3.0])
    c.ready = c.compute(0, np.ones(3, dtype=bool))
    G = nx.DiGraph([(0, 1), (1, 2), (2, 0)])
    active_slots, records = [], []
    for t in range(9):
        busy = c.busy(t)
        timing = c.plan_round(t, G, T.Faults(np.zeros((3, 3), dtype=bool), busy))
        records.append(c.commit(timing))
        if not busy[2]:
            active_slots.append(t)
        assert timing.delays[2].tolist() == [1] * len(timing.delays[0])
    assert active_slots == [2, 5, 8]
    assert [r["sim_time_s"] for r in records] == [float(t + 1) for t in range(9)]


def test_the_delayed_path_with_no_delay_equals_the_synchronous_mix():
    """InFlight.mix (numerators x = w z mixed, then z = x / w) against PushSum.mix (the scaled
    operator on z): two code paths, one Push-Sum step, float64."""
    from algorithms.delayed import InFlight

    ctx, algorithm = build(overlap(topology__name="one_peer_exponential"))
    rng = torch.Generator().manual_seed(1)
    for v in ctx.population.params.values():
        v.copy_(torch.randn(v.shape, generator=rng, dtype=v.dtype))
    algorithm.weights = torch.rand(6, generator=rng, dtype=torch.float64) + 0.5
    graph = ctx.schedule.at(1)
    P = T.column_stochastic(graph)
    src, dst, _ = T.messages(graph)
    start = {k: v.clone() for k, v in ctx.population.params.items()}
    weights = algorithm.weights.clone()
    algorithm.mix(ctx, P)
    synchronous = {k: v.clone() for k, v in ctx.population.params.items()}
    for k, v in ctx.population.params.items():
        v.copy_(start[k])
    delayed_w = InFlight().mix(ctx, 1, P, (src, dst, np.zeros(len(src), dtype=np.int64)),
                               weights)
    assert torch.allclose(delayed_w, algorithm.weights, rtol=0, atol=1e-14)
    for k, v in ctx.population.params.items():
        assert (v - synchronous[k]).abs().max().item() < 1e-12
        assert (v - start[k]).abs().max().item() > 1e-3  # the step mixed something


def test_delay_options_without_overlap_are_refused():
    with pytest.raises(ConfigError, match="^network.max_delay: is set but network.overlap"):
        small_config(network__enabled=True, network__max_delay=3)
