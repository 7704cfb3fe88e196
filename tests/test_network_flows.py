"""The "flow" network model in the clock: a node's messages share its uplink and downlink
(hand-computed rounds, the issue's degree check), the star's server links, the separate knobs
of stragglers and slow links, and the settings that the model refuses."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
import torch

import topologies as T
from p2pfl.config import ConfigError, NetworkConfig
from p2pfl.engine import run
from p2pfl.scale.network import Clock
from tests.conftest import small_config, strip_times

MLP_BYTES = 796_840  # mnist_2NN in float32: 6.37 Mbit


def round_s(graph: nx.Graph, model: str, **net) -> float:
    """The transfer part of one synchronous round (no compute): when the last node may start."""
    config = NetworkConfig(enabled=True, step_s=0.0, latency_s=0.0, model=model, **net)
    c = Clock(config, graph.number_of_nodes(), seed=0, steps=1, message_bytes=MLP_BYTES)
    return c.commit(c.plan_round(0, graph, T.Faults.none(graph.number_of_nodes())))["sim_time_s"]


def test_degree_costs_time_when_messages_share_the_node_links() -> None:
    """Complete graph of 16: 15 models out through each 1 Gbit/s uplink, 95.6 ms; the ring's 2:
    12.7 ms; the ideal model gives both one model's 6.37 ms."""
    one = MLP_BYTES * 8 / 1e9
    complete, ring = round_s(T.complete(16), "flow"), round_s(T.ring(16), "flow")
    assert complete == pytest.approx(15 * one, rel=1e-9) and complete >= 0.9 * 15 * one
    assert ring == pytest.approx(2 * one, rel=1e-9) and complete >= 5 * ring
    assert round_s(T.complete(16), "ideal") == pytest.approx(one) == round_s(T.ring(16), "ideal")


def test_the_default_model_makes_degree_cost_time(tmp_path) -> None:
    """The issue's check, end to end with the default [network] (only no latency and no
    compute): a D-PSGD round of mlp on the complete graph of 16 takes 15 model transfers, at
    least 0.9 x 15 x one, and the ring's at least 5x less."""
    times = {}
    for name in ("complete", "ring"):
        cfg = small_config(rounds=1, algorithm__name="dpsgd", algorithm__local_steps=1,
                           topology__name=name, data__num_nodes=16, engine__dtype="float32",
                           network__enabled=True, network__step_s=0.0, network__latency_s=0.0)
        record = run(cfg, tmp_path / name, figures=False)[0]
        one = record["bytes_sent"] / record["messages"] * 8 / 1e9  # a model over 1 Gbit/s
        times[name] = record["sim_time_s"]
    assert times["complete"] >= 0.9 * 15 * one and times["complete"] >= 5 * times["ring"]


def test_a_hub_uplink_and_a_slow_downlink_by_hand() -> None:
    """Star of 4 (hub 0) with 1 Gbit/s and 1 ms latency; leaf 3's downlink at 0.25 Gbit/s.
    Hub -> 1, 2, 3 share its uplink at 1/3 each until hub -> 3 is held to 0.25 by leaf 3's
    downlink: the other two get 0.375 each. Leaves -> hub share its downlink at 1/3 each."""
    G = nx.star_graph(3)
    G.nodes[3]["downlink_gbps"] = 0.25
    config = NetworkConfig(enabled=True, step_s=0.0, latency_s=0.001, model="flow")
    c = Clock(config, 4, seed=0, steps=1, message_bytes=1_000_000)  # 8 Mbit
    src, dst = np.array([0, 0, 0, 1, 2, 3]), np.array([1, 2, 3, 0, 0, 0])
    got = c.flows(0, src, dst, np.zeros(6), G)
    # hub -> 1, 2: 8e6 / 0.375e9 = 21.33 ms; hub -> 3: 32 ms; leaves -> hub: 8e6 / (1e9/3) = 24 ms
    np.testing.assert_allclose(got, 0.001 + np.array([8 / 375, 8 / 375, 0.032, 0.024, 0.024,
                                                      0.024]), rtol=1e-9)


def test_the_server_downlink_is_shared_by_the_sampled_clients() -> None:
    """Server 0, clients 1..4 of 1 Gbit/s links, 8 Mbit models, no latency, 1 s of compute:
    down 4 x 8 Mbit through the server's uplink (32 ms), compute, 4 uploads into its downlink
    (32 ms): the round ends at 1.064 s; the ideal model says 1.016 s."""
    for model, end in (("flow", 1.064), ("ideal", 1.016)):
        config = NetworkConfig(enabled=True, step_s=1.0, latency_s=0.0, model=model)
        c = Clock(config, 5, seed=0, steps=1, message_bytes=1_000_000)
        assert c.commit(c.plan_server(0, np.arange(1, 5)))["sim_time_s"] == pytest.approx(end)


def test_stragglers_and_slow_links_have_their_own_knobs() -> None:
    """8x slower compute beside 50 ms / 100 Mbit/s slow links (every node and link slow here)."""
    config = NetworkConfig(enabled=True, step_s=1.0, latency_s=0.0, stragglers=1.0,
                           straggler_factor=8.0, slow_links=1.0, slow_link_latency_s=0.05,
                           slow_link_gbps=0.1)
    c = Clock(config, 2, seed=0, steps=1, message_bytes=1_250_000)  # 10 Mbit
    src, dst = np.array([0]), np.array([1])
    assert c.compute(0, np.array([True, True])).tolist() == [8.0, 8.0]
    assert c.transfer(0, src, dst) == pytest.approx([0.05 + 0.1])
    flow = Clock(NetworkConfig(**(config.__dict__ | {"model": "flow"})), 2, 0, 1, 1_250_000)
    assert flow.flows(0, src, dst, np.zeros(1)) == pytest.approx([0.05 + 0.1])
    factor = Clock(NetworkConfig(enabled=True, latency_s=0.01, slow_links=1.0,
                                 slow_link_factor=3.0, model="flow"), 2, 0, 1, 1_250_000)
    assert factor.flows(0, src, dst, np.zeros(1)) == pytest.approx([3 * (0.01 + 0.01)])


def test_settings_the_model_cannot_honour_are_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="^network.uplink_gbps: is set but network.model is"):
        small_config(network__enabled=True, network__model="ideal", network__uplink_gbps=10.0)
    with pytest.raises(ConfigError, match="^network.straggler_factor: is set but network."
                                          "stragglers is 0"):
        small_config(network__enabled=True, network__straggler_factor=8.0)


def test_messages_share_the_underlay_links_of_their_paths() -> None:
    """Underlay path 0 - 1 - 2 - 3, 1 ms a link, link 1 - 2 of 0.5 Gbit/s (10 elsewhere), 8 Mbit
    messages 0 -> 3, 1 -> 2 and 3 -> 0. 1 -> 2 starts after 1 ms alone on 1 -> 2 (1 Mbit by
    3 ms), then shares it with 0 -> 3 at 0.25 each: it ends at 31 ms, 0 -> 3 (7 Mbit by then)
    at 33 ms; 3 -> 0 crosses the other direction alone: 3 ms + 16 ms."""
    U = nx.path_graph(4)
    nx.set_edge_attributes(U, 10.0, "capacity_gbps")
    nx.set_edge_attributes(U, 0.001, "latency_s")
    U.edges[1, 2]["capacity_gbps"] = 0.5
    config = NetworkConfig(enabled=True, step_s=0.0, latency_s=0.0, model="flow")
    c = Clock(config, 4, seed=0, steps=1, message_bytes=1_000_000, underlay=U)
    got = c.flows(0, np.array([0, 1, 3]), np.array([3, 2, 0]), np.zeros(3))
    np.testing.assert_allclose(got, [0.033, 0.031, 0.019], rtol=1e-9)


def test_a_shipped_underlay_times_a_run(tmp_path) -> None:
    G = T.underlay("gaia")
    assert G.number_of_nodes() == 11 and G.nodes[4]["label"] == "Frankfurt"
    assert {d["capacity_gbps"] for *_, d in G.edges(data=True)} <= {0.1, 0.3, 0.5, 1.0, 1.5}
    base = {"rounds": 1, "network__enabled": True, "network__model": "flow",
            "network__step_s": 0.0, "network__latency_s": 0.0}
    flat = run(small_config(**base), tmp_path / "flat", figures=False)
    over = run(small_config(**base, network__underlay="gaia"), tmp_path / "gaia", figures=False)
    assert over[0]["sim_time_s"] > flat[0]["sim_time_s"] + 0.01  # intercontinental paths


def test_underlay_settings_are_checked(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^network.underlay: .*unknown value 'gaya' \(allowed: "
                                          r"'', gaia, "):
        small_config(network__enabled=True, network__model="flow", network__underlay="gaya")
    with pytest.raises(ConfigError, match="^network.underlay: is set but network.model is"):
        small_config(network__enabled=True, network__model="ideal", network__underlay="gaia")
    with pytest.raises(ConfigError, match="^network.underlay: 'gaia' has 11 nodes, fewer"):
        run(small_config(data__num_nodes=12, network__enabled=True, network__model="flow",
                         network__underlay="gaia"), tmp_path / "r")


def test_a_resume_refuses_a_changed_underlay_file(tmp_path, monkeypatch) -> None:
    import shutil

    from p2pfl.objects import inputs

    base = {"rounds": 1, "network__enabled": True, "network__model": "flow",
            "network__underlay": "gaia", "engine__checkpoint_every": 1}
    run(small_config(**base), tmp_path / "r", figures=False)
    changed = tmp_path / "underlays"
    shutil.copytree(inputs.UNDERLAY_FOLDER, changed)
    (changed / "gaia.gml").write_text((changed / "gaia.gml").read_text().replace(
        "capacity 1000000000.0", "capacity 2000000000.0", 1))
    monkeypatch.setattr(inputs, "UNDERLAY_FOLDER", changed)
    with pytest.raises(ConfigError, match="^network.underlay: the file .*gaia.gml differs"):
        run(small_config(**(base | {"rounds": 2})), tmp_path / "r", resume=True)


def test_overlapped_messages_share_links_with_those_of_earlier_slots() -> None:
    """Slots of 1 s; a message alone on a link takes 0.9 s. Node 0 sends to 1 and 2 at the end of
    slot 0 (1 s): half its uplink each, 0.5 s of their 0.9 done by 2 s. At the end of slot 1,
    node 1 sends to 2 (node 2's downlink: half each) and node 0 to 1 again, behind its first
    message to 1 (one connection). The first two end at 2.8 s (taken at the end of slot 2); then
    1 -> 2 (0.4 done) ends alone at 3.3 s and the second 0 -> 1 at 3.7 s (slot 3). Alone on
    their links (ideal) they end at 1.9, 1.9, 2.9 and 2.9 s: slots 1, 1, 2 and 2."""
    taken = {}
    for model in ("flow", "ideal"):
        config = NetworkConfig(enabled=True, step_s=1.0, latency_s=0.0, overlap=True,
                               model=model, bandwidth_gbps=8e-9 / 0.9)
        c = Clock(config, 3, seed=0, steps=1, message_bytes=1)
        sends = [([0, 0], [1, 2]), ([0, 1], [1, 2]), ([], []), ([], []), ([], [])]
        taken[model] = []
        for t, (src, dst) in enumerate(sends):
            if model == "flow" and t == 1:  # node 0's first push is in flight until 2.8 s
                assert c.sending(1).tolist() == [True, False, False]
            timing = c.plan(t, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                            np.ones(3, dtype=bool))
            c.commit(timing)
            if model == "flow":
                a_src, a_dst, a_round = timing.arrived
            else:
                a_src, a_dst, late = timing.delays
                a_round, t = np.full(len(a_src), t), t + late
            taken[model] += [(int(i), int(j), int(r), int(at)) for i, j, r, at in
                             zip(a_src, a_dst, a_round, np.broadcast_to(t, a_src.shape))]
    assert sorted(taken["flow"]) == [(0, 1, 0, 2), (0, 1, 1, 3), (0, 2, 0, 2), (1, 2, 1, 3)]
    assert sorted(taken["ideal"]) == [(0, 1, 0, 1), (0, 1, 1, 2), (0, 2, 0, 1), (1, 2, 1, 2)]


def test_a_node_whose_push_is_in_flight_keeps_its_shares() -> None:
    """Overlap on the flow model: a node pushes only when its previous push has arrived (its
    shares stay with it, as a lost message's do), so a node never has messages of two pushes
    in flight; the mass stays N."""
    from p2pfl.engine.builder import build

    ctx, _ = build(overlap_on_flows())
    graph = ctx.schedule.at(0)
    faults = T.Faults.none(6, sparse=True)
    src, dst, _ = T.messages(graph)
    lost = faults.losing(src[src == 2], dst[src == 2])
    assert lost.lost(src, dst).tolist() == (src == 2).tolist()
    dense = T.Faults.none(6).losing(src[src == 2], dst[src == 2])
    assert dense.lost(src, dst).tolist() == (src == 2).tolist()
    from tests.conftest import play

    ctx, algorithm = build(overlap_on_flows())
    held = 0
    for t in range(12):
        graph = ctx.schedule.at(t)
        held += int(ctx.clock.sending(t).sum())
        faults = ctx.faults(t, graph)
        play(algorithm, ctx, t, graph)
        ctx.clock.commit(ctx.clock.plan_round(t, graph, faults))
        group = ctx.clock.network.in_flight()
        sent_round, sender = group // 36, group // 6 % 6
        for i in np.unique(sender):  # every message a node has in flight is of one push
            assert len(np.unique(sent_round[sender == i])) == 1
        assert algorithm.weights.sum().item() + algorithm.in_flight.weight() == \
            pytest.approx(6, abs=1e-9)
    assert held > 6


def test_a_message_of_weight_zero_arrives_with_nothing() -> None:
    """Edges of weight 0 (a valid weight) still send a message on the flow network; it carries
    a share of 0, so its arrival adds nothing (and its round may hold nothing in flight)."""
    from p2pfl.engine.builder import build
    from tests.conftest import play

    ctx, algorithm = build(overlap_on_flows())
    G = nx.DiGraph()
    G.add_nodes_from(range(6))
    for i in range(6):
        G.add_edge(i, (i + 1) % 6, weight=0.0)
        G.add_edge(i, (i + 2) % 6, weight=0.0)
    for t in range(8):
        faults = ctx.faults(t, G)
        play(algorithm, ctx, t, G)
        ctx.clock.commit(ctx.clock.plan_round(t, G, faults))
        assert algorithm.weights.sum().item() + algorithm.in_flight.weight() == \
            pytest.approx(6, abs=1e-9)


def overlap_on_flows(**overrides):
    base = {"algorithm__name": "osgp", "topology__name": "exponential", "topology__directed": True,
            "data__num_nodes": 6, "network__enabled": True, "network__overlap": True,
            "network__bandwidth_gbps": 0.05, "network__max_delay": 3}
    return small_config(**(base | overrides))


def test_overlap_on_flows_keeps_the_mass_and_resumes_exactly(tmp_path) -> None:
    from p2pfl.report.results import METRICS, read_metrics
    from tests.test_reliability import strip_times

    cfg = overlap_on_flows(rounds=5, engine__checkpoint_every=1)
    whole = run(cfg, tmp_path / "whole", figures=False)
    run(overlap_on_flows(rounds=2, engine__checkpoint_every=1), tmp_path / "part",
        figures=False)
    resumed = run(cfg, tmp_path / "part", resume=True, figures=False)
    assert strip_times(resumed) == strip_times(whole)
    assert strip_times(read_metrics(tmp_path / "part" / METRICS)) == strip_times(whole)
    assert any(r["ps_weight_in_flight"] > 0.5 for r in whole)
    for r in whole:
        assert r["ps_weight_sum"] + r["ps_weight_in_flight"] == pytest.approx(6, abs=1e-9)


def test_overlap_on_flows_keeps_the_exact_average_without_gradients() -> None:
    """No gradient: sum_i w_i z_i plus the numerators in flight (P_ji w_i z_i of the senders'
    z and w when sent) stays N times the start's average, round after round, with messages of
    several rounds in flight (jitter: pushes end at different slots)."""
    from p2pfl.engine.builder import build
    from tests.conftest import play

    ctx, algorithm = build(overlap_on_flows(algorithm__lr=1e-300, algorithm__local_steps=1,
                                            algorithm__batch_size=1, network__jitter=0.5))
    rng = np.random.default_rng(0)
    for v in ctx.population.params.values():
        v.copy_(torch.as_tensor(rng.standard_normal(tuple(v.shape))))
    start = {k: v.sum(0) for k, v in ctx.population.params.items()}
    for t in range(30):
        graph = ctx.schedule.at(t)
        faults = ctx.faults(t, graph)
        play(algorithm, ctx, t, graph)
        ctx.clock.commit(ctx.clock.plan_round(t, graph, faults))
        for k, v in ctx.population.params.items():
            total = (algorithm.weights.view(-1, *[1] * (v.dim() - 1)) * v).sum(0)
            for z, w, P in algorithm.in_flight.sent.values():
                mass = torch.as_tensor(P.sum(axis=0)) * w  # what each sender has in flight
                total += (mass.view(-1, *[1] * (v.dim() - 1)) * z[k]).sum(0)
            assert (total - start[k]).abs().max().item() < 1e-9
    assert algorithm.in_flight.weight() > 0.5 and len(algorithm.in_flight.sent) > 1


def test_a_run_saved_before_the_flow_default_resumes_as_it_ran(tmp_path) -> None:
    """A saved config without network.model (written before "flow" became the default) means
    "ideal"; one without async_sgp's one_push_in_flight means false. `p2pfl resume` continues
    such a run as it ran, and a config with the new defaults is refused."""
    import json

    from p2pfl.engine import read_run_config
    from p2pfl.engine.checkpoint import as_written, check_resumable

    cfg = small_config(rounds=1, network__enabled=True)
    run(cfg, tmp_path / "r", figures=False)
    path = tmp_path / "r" / "config.json"
    raw = json.loads(path.read_text())
    del raw["network"]["model"]
    path.write_text(json.dumps(raw))
    assert read_run_config(tmp_path / "r").network.model == "ideal"
    with pytest.raises(ConfigError, match="^resume: .*differing fields: network.model"):
        check_resumable(raw, cfg, 1, tmp_path / "r")
    old_async = {"algorithm": {"name": "async_sgp"}, "network": {"enabled": False}}
    assert as_written(old_async)["algorithm"]["one_push_in_flight"] is False
    assert "model" not in as_written(old_async)["network"]  # off: nothing to mean


@pytest.mark.parametrize("name", ["dpsgd", "adpsgd"])
def test_a_run_ends_at_its_simulated_time_horizon(tmp_path, name) -> None:
    """[network] horizon_s: the run ends, evaluated, at the first round (an asynchronous run's
    mark) whose simulated time reaches it; rounds stays the upper bound, and a resume with a
    later horizon goes on."""
    base = {"rounds": 40, "algorithm__name": name, "algorithm__local_steps": 1,
            "eval__every": 7, "network__enabled": True}
    first = run(small_config(**base, network__horizon_s=0.1), tmp_path / "r", figures=False)
    times = [r["sim_time_s"] for r in first]
    assert len(first) < 40 and times[-1] >= 0.1 > times[-2]
    assert "test_acc" in first[-1]  # the last round is evaluated, off the every-7 grid
    more = run(small_config(**base, network__horizon_s=0.2), tmp_path / "r", resume=True,
               figures=False)
    assert len(more) > len(first) and more[-1]["sim_time_s"] >= 0.2 > more[-2]["sim_time_s"]


def test_an_underlay_object_times_a_run_as_its_name_does_and_is_recorded(tmp_path) -> None:
    """The shipped gaia passed as a graph gives the run the named one gives (the same simulated
    times and metrics); underlay.json lets a resume rebuild it without it being passed; another
    graph on resume, a malformed one, and one without the flow network are refused."""
    from p2pfl.engine.checkpoint import read_run_config
    from p2pfl.objects.underlay import UNDERLAY_RECORD

    base = {"network__enabled": True, "network__model": "flow", "network__step_s": 0.001,
            "engine__checkpoint_every": 1}
    named = run(small_config(**base, rounds=3, network__underlay="gaia"), tmp_path / "named",
                figures=False)
    G = T.underlay("gaia")
    half = run(small_config(**base), tmp_path / "object", figures=False, underlay=G)
    assert json.loads((tmp_path / "object" / "config.json").read_text())["network"][
        "underlay"] == "object"
    assert (tmp_path / "object" / UNDERLAY_RECORD).exists() and len(half) == 2
    whole = run(read_run_config(tmp_path / "object", {"rounds": 3}), tmp_path / "object",
                resume=True, figures=False)  # as `p2pfl resume` does: rebuilt from underlay.json
    assert strip_times(whole) == strip_times(named)
    other = G.copy()
    other.edges[0, 1]["capacity_gbps"] = 0.2
    with pytest.raises(ConfigError, match="^underlay: differs from the one"):
        run(read_run_config(tmp_path / "object", {"rounds": 4}), tmp_path / "object",
            resume=True, underlay=other)
    del other.edges[0, 1]["capacity_gbps"]
    with pytest.raises(ConfigError, match=r"^underlay: link \(0, 1\) needs capacity_gbps > 0"):
        run(small_config(**base), tmp_path / "bad", underlay=other)
    with pytest.raises(ConfigError, match="^underlay: is the physical network of the flow"):
        run(small_config(), tmp_path / "off", underlay=G)


def test_a_comparison_keeps_its_underlay_object_for_every_variant_on_resume(tmp_path) -> None:
    """run_compare records the underlay at its root: a resume without it rebuilds it for a
    variant that had not started (not the config's named underlay, none); a variant that
    cannot take it is refused before the first one trains."""
    import shutil

    from p2pfl.config import with_overrides
    from p2pfl.engine import run_compare
    from p2pfl.engine.checkpoint import read_run_config

    base = small_config(network__enabled=True, network__model="flow", network__step_s=0.001,
                        rounds=1)
    cfg = with_overrides(base, {"compare": [{"label": "a"}, {"label": "b",
                                                               "algorithm.lr": 0.05}]})
    G = T.underlay("gaia")
    out = tmp_path / "cmp"
    first = run_compare(cfg, out, underlay=G)
    shutil.rmtree(out / "b")  # as if stopped before b began
    again = run_compare(read_run_config(out), out, resume=True)
    assert json.loads((out / "b" / "seed3" / "config.json").read_text())["network"][
        "underlay"] == "object"
    assert strip_times(again["b"]) == strip_times(first["b"])
    bad = with_overrides(cfg, {"compare": [{"label": "a"}, {"label": "big",
                                                              "data.num_nodes": 12}]})
    with pytest.raises(ConfigError, match=r"^compare\[1\] \(big\)\.underlay: has 11 nodes, "
                                          r"fewer than the run's 12"):
        run_compare(bad, tmp_path / "bad", underlay=G)
    assert not (tmp_path / "bad" / "a").exists()
