"""A topology handed to p2pfl.run as a Python object: it is what runs, config.json and
topology.json say what it was, and a resume rebuilds it or refuses a different one."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import numpy as np
import pytest
import torch

import topologies as T
from p2pfl import engine
from p2pfl.config import ConfigError, config_from_dict, load_config, with_overrides
from p2pfl.engine import build
from p2pfl.objects import resolve
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import play, small_config, strip_times


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch):
    monkeypatch.setattr("p2pfl.engine.experiment.plot_histories", lambda *args, **kwargs: [])


def _hand_built() -> nx.DiGraph:
    """A directed ring on 6 nodes plus two chords: strongly connected, not a catalogue graph."""
    return nx.DiGraph([(i, (i + 1) % 6) for i in range(6)] + [(0, 3), (4, 1)])


def _changing(t: int) -> nx.DiGraph:
    """Round t: a directed ring whose step alternates 1, 5 (pure function of t)."""
    step = 1 if t % 2 == 0 else 5
    return nx.DiGraph([(i, (i + step) % 6) for i in range(6)])


_CALLS = itertools.count()


def _drifting(t: int) -> nx.DiGraph:
    """A callable with hidden state: its graph changes from call to call, not only with t."""
    step = next(_CALLS) % 5 + 1
    return nx.DiGraph([(i, (i + step) % 6) for i in range(6)])


def _sgp(**overrides):
    return small_config(**{"algorithm__name": "osgp", "rounds": 4, **overrides})


def test_a_hand_built_digraph_runs_and_is_recorded(tmp_path):
    out = tmp_path / "run"
    engine.run(_sgp(), out, topology=_hand_built())
    assert json.loads((out / "config.json").read_text())["topology"]["name"] == "object"
    record = json.loads((out / "topology.json").read_text())
    assert record["class"] == "topologies.schedules.StaticSchedule" and record["period"] == 1
    assert record["graphs"] == [[[0, 1, None], [0, 3, None], [1, 2, None], [2, 3, None],
                                 [3, 4, None], [4, 1, None], [4, 5, None], [5, 0, None]]]
    # The graph that ran is the object: two messages more than the directed ring's six.
    assert all(r["messages"] == 8 for r in read_metrics(out / METRICS))


def test_a_periodic_object_resumes_from_its_record_without_the_object(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    engine.run(_sgp(), whole, topology=[_changing(0), _changing(1)])
    engine.run(_sgp(rounds=2), part, topology=[_changing(0), _changing(1)])
    config = engine.read_run_config(part, {"rounds": 4})
    engine.run(config, part, resume=True)  # as `p2pfl resume part --set rounds=4` does
    assert strip_times(read_metrics(part / METRICS)) == strip_times(read_metrics(whole / METRICS))


def test_a_callable_must_be_passed_again_and_the_same(tmp_path):
    out = tmp_path / "run"
    engine.run(_sgp(rounds=2), out, topology=_changing)
    config = engine.read_run_config(out, {"rounds": 4})
    with pytest.raises(ConfigError, match="cannot rebuild .*pass it again"):
        engine.run(config, out, resume=True)
    with pytest.raises(ConfigError, match="differs from the one"):
        engine.run(config, out, resume=True, topology=lambda t: _changing(t + 1))
    engine.run(config, out, resume=True, topology=_changing)
    whole = tmp_path / "whole"
    engine.run(_sgp(), whole, topology=_changing)
    assert strip_times(read_metrics(out / METRICS)) == strip_times(read_metrics(whole / METRICS))


def test_a_named_run_refuses_an_object_on_resume(tmp_path):
    out = tmp_path / "run"
    engine.run(_sgp(rounds=2, topology__name="exponential"), out)
    with pytest.raises(ConfigError, match="topology.name"):
        engine.run(_sgp(topology__name="exponential"), out, resume=True, topology=_hand_built())


def test_a_mixing_matrix_is_the_mixing(tmp_path):
    rng = np.random.default_rng(0)
    W = rng.random((6, 6)) * (rng.random((6, 6)) < 0.5) + np.roll(np.eye(6), 1, axis=0)
    W /= W.sum(axis=0, keepdims=True)  # column-stochastic with a directed ring inside
    ctx, _ = build(*engine_args(_sgp(), W))
    np.testing.assert_allclose(T.column_stochastic(ctx.schedule.at(0)), W, atol=1e-12)


def engine_args(cfg, topology):
    cfg, parts = resolve(cfg, None, False, topology)
    return cfg, None, parts


def test_symmetric_weights_given_to_a_gossip_algorithm_are_used():
    G = nx.cycle_graph(6)
    nx.set_edge_attributes(G, 0.3, "weight")
    ctx, algorithm = build(*engine_args(small_config(), G))
    W = T.doubly_stochastic(ctx.schedule.at(0))
    assert W[0, 1] == 0.3 and W[0, 0] == pytest.approx(0.4)
    play(algorithm, ctx, 0, ctx.schedule.at(0))
    assert all(torch.isfinite(v).all() for v in ctx.population.params.values())


@pytest.mark.parametrize("topology, match", [
    (nx.cycle_graph(5, create_using=nx.DiGraph), "has 5 nodes, data.num_nodes is 6"),
    (nx.DiGraph([(0, 1), (1, 2), (2, 1), (3, 4), (4, 5), (5, 3)]), "not strongly connected"),
    (lambda t: "not a graph", "not a networkx graph"),
    (_drifting, "two different graphs"),
    ("ring", "expected a networkx graph"),
])
def test_bad_topology_objects_are_one_line_errors(tmp_path, topology, match):
    with pytest.raises(ConfigError, match=match) as err:
        engine.run(_sgp(), tmp_path / "run", topology=topology)
    assert "\n" not in str(err.value)


def test_topology_settings_an_object_would_ignore_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="topology.k: is set"):
        engine.run(_sgp(topology__name="random_out", topology__k=3), tmp_path / "run",
                   topology=_hand_built())


def test_a_config_naming_object_without_one_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="none was passed"):
        engine.run(_sgp(topology__name="object"), tmp_path / "run")


def test_an_override_of_none_frees_a_file_topology_for_an_object(tmp_path):
    """A config naming an edge file is refused beside a topology object; None removes
    topology.path (back to its default) in with_overrides, load_config and a table override,
    and the object then runs. A misspelt table is still refused."""
    edges = tmp_path / "ring.txt"
    edges.write_text("".join(f"{i} {(i + 1) % 6}\n" for i in range(6)))
    cfg = _sgp(rounds=2, topology__name="from_edges", topology__path=str(edges))
    with pytest.raises(ConfigError, match="^topology.path: is set"):
        engine.run(cfg, tmp_path / "refused", topology=_hand_built())
    freed = with_overrides(cfg, {"topology.path": None})
    assert (freed.topology.name, freed.topology.path) == ("from_edges", "")
    assert len(engine.run(freed, tmp_path / "run", topology=_hand_built())) == 2
    toml = tmp_path / "c.toml"
    toml.write_text(f'[topology]\nname = "from_edges"\npath = "{edges}"\n')
    assert load_config(toml, {"topology": {"path": None}}).topology.path == ""
    assert with_overrides(cfg, {"topology.name": None}).topology.name == "random_out"  # default
    with pytest.raises(ConfigError, match="^topolgy: did you mean 'topology'"):
        with_overrides(cfg, {"topolgy.path": None})


def test_compare_runs_every_variant_on_the_object(tmp_path):
    cfg = config_from_dict({**_sgp().to_dict(), "compare": [
        {"label": "sgp", "algorithm.name": "osgp"},
        {"label": "momentum", "algorithm.name": "dfedsgpm", "algorithm.momentum": 0.9}]})
    histories = engine.run_compare(cfg, tmp_path / "cmp", topology=_hand_built())
    assert set(histories) == {"sgp", "momentum"}
    for label in histories:
        run_dir = tmp_path / "cmp" / label / f"seed{cfg.seed}"
        assert json.loads((run_dir / "config.json").read_text())["topology"]["name"] == "object"
        assert all(r["messages"] == 8 for r in read_metrics(run_dir / METRICS))
    bad = config_from_dict({**_sgp().to_dict(), "compare": [
        {"label": "exponential", "topology.name": "exponential", "topology.directed": False}]})
    with pytest.raises(ConfigError, match="topology.directed: is set"):
        engine.run_compare(bad, tmp_path / "bad", topology=_hand_built())


def test_dfedsgpsm_s_with_an_object_names_its_real_need(tmp_path):
    with pytest.raises(ConfigError, match="dfedsgpsm_s selects its out-neighbours by loss on "
                                          "'random_out'"):
        engine.run(_sgp(algorithm__name="dfedsgpsm_s"), tmp_path / "run", topology=_hand_built())
