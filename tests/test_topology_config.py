"""The [topology] config table: validation naming the field, and a smoke run of every topology."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import topologies as T
from p2pfl.config import ConfigError, TopologyConfig
from p2pfl.engine import build, run
from tests.conftest import play, small_config

SMOKE = {  # name -> (num_nodes, extra [topology] fields) giving a connected instance
    "hypercube": (8, {}),
    "torus": (9, {}),
    "erdos_renyi": (6, {"p": 0.9, "directed": False}),
    "random_regular": (6, {"degree": 3}),
    "random_regular_schedule": (6, {"degree": 3}),
    "random_out_graph": (6, {"out_degree": 4}),
    "random_out": (6, {"out_degree": 3, "selection": "loss_based"}),
    "one_peer_exponential": (8, {"window": 2}),
}


@pytest.mark.parametrize("name", T.TOPOLOGIES)
def test_every_topology_runs_one_round(name: str, tmp_path) -> None:
    n, fields = SMOKE.get(name, (6, {}))
    if name == "from_adjacency":
        np.savetxt(tmp_path / "a.csv", nx.to_numpy_array(T.complete(n)), delimiter=",")
        fields = {"path": str(tmp_path / "a.csv")}
    if name == "from_edges":
        (tmp_path / "e.txt").write_text("".join(f"{i} {(i + 1) % n}\n" for i in range(n)))
        fields = {"path": str(tmp_path / "e.txt")}
    directed = T.build_schedule(name, n, **fields).directed
    cfg = small_config(rounds=1, data__num_nodes=n, topology__name=name,
                       algorithm__name="sgp" if directed else "dfedavg",
                       algorithm__local_steps=1, data__synthetic_train=200,
                       data__synthetic_test=50,
                       **{f"topology__{k}": v for k, v in fields.items()})
    ctx, algorithm = build(cfg)
    report = play(algorithm, ctx, 0, ctx.schedule.at(0))
    assert ctx.schedule.n == n and report.losses.shape == (n,)


def test_topology_fields_reach_the_builders() -> None:
    cfg = small_config(data__num_nodes=12, topology__name="torus", topology__rows=3,
                       algorithm__name="dfedavg")
    ctx, _ = build(cfg)
    assert set(ctx.schedule.at(0).edges) == set(T.torus(3, 4).edges)


def test_topology_config_defaults_are_valid() -> None:
    defaults = TopologyConfig()
    assert (defaults.link_drop, defaults.node_drop, defaults.selection) == (0.0, 0.0, "")
    assert small_config().topology.selection == "random"  # resolved for the algorithm
    small_config(topology__link_drop=0.5, topology__node_drop=0.2,
                 topology__selection="loss_softmax", topology__temperature=0.1)


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("link_drop", 1.0, "topology.link_drop"),
        ("link_drop", -0.1, "topology.link_drop"),
        ("node_drop", 1.0, "topology.node_drop"),
        ("selection", "greedy", "topology.selection"),
        ("temperature", 0.0, "topology.temperature"),
        ("window", 0, "topology.window"),
        ("p", 1.5, "topology.p"),
        ("rewire", -1.0, "topology.rewire"),
        ("rows", -1, "topology.rows"),
        ("ws_k", 1, "topology.ws_k"),
        ("ba_m", 0, "topology.ba_m"),
        ("name", "moebius", "topology.name"),
    ],
)
def test_config_rejects_bad_topology_fields(key: str, value, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        small_config(**{f"topology__{key}": value})
    assert err.value.field == field


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": "hypercube"}, "data.num_nodes", "power of two"),
        ({"name": "grid", "rows": 4}, "topology.rows", "does not divide"),
        ({"name": "watts_strogatz", "ws_k": 3}, "topology.ws_k", "even"),
        ({"name": "random_regular", "degree": 3, "num_nodes": 5}, "topology.degree", "even"),
        ({"name": "ring", "selection": "loss_based"}, "topology.selection", "random_out"),
        ({"name": "from_edges"}, "topology.path", "must name the file"),
    ],
)
def test_engine_errors_name_the_topology_field(fields: dict, field: str, message: str) -> None:
    n = fields.pop("num_nodes", 6)
    cfg = small_config(data__num_nodes=n, **{f"topology__{k}": v for k, v in fields.items()})
    with pytest.raises(ConfigError, match=message) as err:
        build(cfg)
    assert err.value.field == field


def test_full_run_on_a_time_varying_topology(tmp_path) -> None:
    cfg = small_config(rounds=2, data__num_nodes=6, algorithm__name="sgp",
                       topology__name="random_regular_schedule", topology__degree=3,
                       topology__window=2, algorithm__local_steps=1)
    history = run(cfg, tmp_path / "run")
    assert [r["round"] for r in history] == [1, 2]
    assert abs(history[-1]["ps_weight_sum"] - 6) < 1e-9
