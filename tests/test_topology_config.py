"""The [topology] config table: validation naming the field, and a smoke run of every topology."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import topologies as T
from p2pfl.config import ConfigError, TopologyConfig
from p2pfl.engine import build, class_counts, run
from tests.conftest import play, small_config

SMOKE = {  # name -> (num_nodes, extra [topology] fields) giving a connected instance
    "hypercube": (8, {}),
    "torus": (9, {}),
    "erdos_renyi": (6, {"p": 0.9, "directed": False}),
    "random_regular": (6, {"d": 3}),
    "random_regular_schedule": (6, {"d": 3}),
    "random_out_graph": (6, {"k": 4}),
    "random_out": (6, {"k": 3, "selection": "loss_based"}),
    "one_peer_exponential": (8, {"window": 2}),
    "hyper_hypercube": (8, {}),
    "d_cliques": (6, {"clique_size": 3}),
    "stl_fw": (6, {"budget": 3}),
    "epidemic_oracle": (6, {"s": 2}),
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
    data = {"data__num_nodes": n, "data__synthetic_train": 200, "data__synthetic_test": 50}
    counts = (class_counts(small_config(**data)) if "class_counts" in T.REGISTRY[name].facts
              else None)  # a topology built from the run's partition
    schedule = T.build_schedule(name, n, class_counts=counts, **fields)
    rounds = min(schedule.period or 20, 20)  # a time-varying one is connected over its rounds
    cfg = small_config(rounds=rounds, topology__name=name,
                       algorithm__name="osgp" if schedule.directed else "dfedavg",
                       algorithm__local_steps=1, **data,
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
    small_config(topology__link_drop=0.5, topology__node_drop=0.2, topology__name="random_out",
                 topology__selection="loss_softmax", topology__temperature=0.1)


@pytest.mark.parametrize(
    ("key", "value", "field", "message"),
    [
        ("link_drop", 1.0, "topology.link_drop", "out of range"),
        ("link_drop", -0.1, "topology.link_drop", "out of range"),
        ("node_drop", 1.0, "topology.node_drop", "out of range"),
        ("selection", "greedy", "topology.selection", "unknown value"),
        ("window", 0, "topology.window", "out of range"),
        ("temperature", 0.5, "topology.temperature", "'ring' does not take temperature"),
        ("p", 0.5, "topology.p", "erdos_renyi, watts_strogatz do"),
        ("rows", -1, "topology.rows", "does not take rows"),
        ("k", 4, "topology.k", "does not take k"),
        ("name", "moebius", "topology.name", "unknown value .moebius."),
        ("nme", "ring", "topology.nme", "did you mean 'topology.name'"),
    ],
)
def test_config_rejects_bad_topology_fields(key: str, value, field: str, message: str) -> None:
    """The common fields are checked for range; an option the ring does not take is refused
    (it was silently ignored before)."""
    with pytest.raises(ConfigError, match=message) as err:
        small_config(**{f"topology__{key}": value})
    assert err.value.field == field


def test_options_are_the_builders_parameters_typed_by_its_annotations() -> None:
    cfg = small_config(topology__name="watts_strogatz", topology__k=6, topology__p=0.2)
    assert (cfg.topology.k, cfg.topology.p, cfg.topology.connected, cfg.topology.tries) == (
        6, 0.2, True, 100)  # connected and tries: defaults of T.watts_strogatz
    with pytest.raises(ConfigError, match="^topology.k: must be an integer, got 'six'"):
        small_config(topology__name="watts_strogatz", topology__k="six")


def test_old_flat_keys_work_for_one_release_with_a_warning() -> None:
    with pytest.warns(FutureWarning, match="topology.ws_k is now topology.k"):
        cfg = small_config(topology__name="watts_strogatz", topology__ws_k=6)
    assert cfg.topology.k == 6
    with pytest.warns(FutureWarning, match="out_degree is not read by topology 'ring': ignored"):
        small_config(topology__out_degree=3)
    with pytest.warns(FutureWarning, match="out_degree is now k"):
        assert T.build_schedule("random_out", 8, out_degree=3, seed=0).at(0).out_degree(0) == 3
    # a run directory of the release before records every flat key at its default: no warning
    import warnings

    old = {"name": "ring", "out_degree": 10, "directed": True, "base": 2, "rows": 0, "cols": 0,
           "p": 0.1, "degree": 4, "ws_k": 4, "rewire": 0.1, "ba_m": 2, "window": 1,
           "selection": "random", "temperature": 1.0, "path": "", "link_drop": 0.0,
           "node_drop": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert small_config(**{f"topology__{k}": v for k, v in old.items()}).topology == \
            small_config().topology


def test_an_override_naming_another_topology_starts_from_its_defaults() -> None:
    from p2pfl.config import with_overrides

    cfg = small_config(topology__name="random_out", topology__k=3, topology__link_drop=0.1,
                       algorithm__name="osgp")
    ring = with_overrides(cfg, {"topology.name": "exponential", "topology.base": 3})
    assert (ring.topology.name, ring.topology.base, ring.topology.link_drop) == (
        "exponential", 3, 0.1)
    assert not hasattr(ring.topology, "k")


def test_a_topology_of_ones_own_is_a_registered_function(tmp_path) -> None:
    """Registering a builder makes it a config name, its parameters the options."""
    from topologies.registry import REGISTRY

    def chord_ring(n: int, chord: int = 2) -> nx.Graph:
        """A ring with chords to i + chord.

        Parameters
        ----------
        n : number of nodes.
        chord : the chords' offset.
        """
        G = T.ring(n)
        G.add_edges_from((i, (i + chord) % n) for i in range(n))
        return G

    T.register(chord_ring)
    try:
        cfg = small_config(topology__name="chord_ring", topology__chord=3, data__num_nodes=8)
        ctx, _ = build(cfg)
        assert ctx.schedule.at(0).has_edge(0, 3)
        assert REGISTRY["chord_ring"].options["chord"].doc == "the chords' offset."
    finally:
        del REGISTRY["chord_ring"]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": "hypercube"}, "data.num_nodes", "power of two"),
        ({"name": "grid", "rows": 4}, "topology.rows", "does not divide"),
        ({"name": "watts_strogatz", "k": 3}, "topology.k", "even"),
        ({"name": "watts_strogatz", "p": 1.5}, "topology.p", r"\[0, 1\]"),
        ({"name": "random_regular", "d": 3, "num_nodes": 5}, "topology.d", "even"),
        ({"name": "random_out", "k": 2, "temperature": 0.0, "selection": "loss_softmax"},
         "topology.temperature", "temperature"),
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
    cfg = small_config(rounds=2, data__num_nodes=6, algorithm__name="osgp",
                       topology__name="random_regular_schedule", topology__d=3,
                       topology__window=2, algorithm__local_steps=1)
    history = run(cfg, tmp_path / "run")
    assert [r["round"] for r in history] == [1, 2]
    assert abs(history[-1]["ps_weight_sum"] - 6) < 1e-9


def test_a_run_of_an_option_left_unset_resumes_from_its_config_json(tmp_path) -> None:
    """equi_dyn's `m` defaults to None (config.json records null): the run resumes, and a
    study reruns it, from that record."""
    cfg = small_config(rounds=2, data__num_nodes=8, topology__name="equi_dyn",
                       algorithm__name="osgp")
    assert cfg.topology.m is None
    run(cfg, tmp_path / "run", progress=False, figures=False)
    longer = run(small_config(rounds=3, data__num_nodes=8, topology__name="equi_dyn",
                              algorithm__name="osgp"), tmp_path / "run", resume=True,
                 progress=False, figures=False)
    assert [r["round"] for r in longer] == [1, 2, 3]


def test_a_watts_strogatz_record_of_the_release_before_keeps_its_rewiring() -> None:
    """The flat record holds Erdos-Renyi's p = 0.1 beside watts_strogatz's rewire: the renamed
    key wins, and the graph is the one the run was built on."""
    old = {"name": "watts_strogatz", "out_degree": 10, "directed": True, "base": 2, "rows": 0,
           "cols": 0, "p": 0.1, "degree": 4, "ws_k": 6, "rewire": 0.3, "ba_m": 2, "window": 1,
           "selection": "random", "temperature": 1.0, "path": "", "link_drop": 0.0,
           "node_drop": 0.0}
    with pytest.warns(FutureWarning, match="rewire is now topology.p"):
        cfg = small_config(**{f"topology__{k}": v for k, v in old.items()})
    assert (cfg.topology.k, cfg.topology.p) == (6, 0.3)
    with pytest.warns(FutureWarning, match="out_degree is ignored: topology.k is given"):
        assert small_config(topology__name="random_out", topology__out_degree=3,
                            topology__k=4).topology.k == 4
    with pytest.warns(FutureWarning, match="out_degree is ignored: k is given"):
        assert T.build_schedule("random_out", 8, out_degree=3, k=5, seed=0).at(0).out_degree(
            0) == 5


def test_an_override_naming_another_algorithm_resolves_its_own_settings() -> None:
    """dpsgd's resolved order (cta) is not carried into dsgt (atc, its paper's); fedavg's
    variant is not carried into fedgmt (reference_code); a [[compare]] root's key of another
    topology reaches the variant that names it."""
    from p2pfl.config import config_from_dict, with_overrides

    cfg = small_config(algorithm__name="dpsgd")
    assert with_overrides(cfg, {"algorithm.name": "dsgt"}).algorithm.order == "atc"
    with_overrides(cfg, {"algorithm.name": "dfedavg"})  # no order of dpsgd's refused
    fedavg = small_config(algorithm__name="fedavg", topology__name="star")
    assert with_overrides(fedavg, {"algorithm.name": "fedgmt"}).algorithm.variant == \
        "reference_code"
    root = config_from_dict({"data": {"name": "synthetic", "num_nodes": 6},
                             "topology": {"name": "ring", "k": 3},
                             "compare": [{"label": "a", "topology.name": "random_out",
                                          "algorithm.name": "osgp"}]})
    variant = with_overrides(root, {"topology.name": "random_out", "algorithm.name": "osgp"})
    assert variant.topology.k == 3


def test_a_misspelt_topology_is_named_as_such() -> None:
    with pytest.raises(ConfigError, match="^topology.name: did you mean 'random_out'"):
        small_config(topology__name="rnadom_out", topology__k=3)
