"""Bad input: a table of invalid configs through the CLI, and a fuzzed config loader.

Every invalid config must end in one line on stderr naming the field, exit status 2, no traceback,
and no run directory. The fuzz tests mutate valid configs at random (fixed budget, derandomized)
and require the loader and the pre-training checks to either accept a config or raise ConfigError.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, get_type_hints

import networkx as nx
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topologies as T
from algorithms import ALGORITHMS
from p2pfl.cli import main
from p2pfl.config import (
    _RANGES,
    Config,
    ConfigError,
    TopologyConfig,
    _choices,
    config_from_dict,
    declared_options,
    load_config,
)
from p2pfl.engine import check_topology, schedule_for
from p2pfl.options import AlgorithmOptions
from tests.conftest import fuzz_budget, option_names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BASE = """seed = 0
rounds = 1
device = "cpu"
[data]
name = "synthetic"
num_nodes = 4
synthetic_train = 100
synthetic_test = 20
[model]
name = "mlp"
[topology]
name = "ring"
[algorithm]
name = "dfedavg"
local_steps = 1
local_epochs = 0
batch_size = 4
[eval]
local_samples = 10
[engine]
dtype = "float32"
"""
HINTS = get_type_hints(Config)
SECTIONS = [name for name, tp in HINTS.items() if dataclasses.is_dataclass(tp)]


def scalar_fields() -> list[tuple[str, type]]:
    """(dotted name, type) of every scalar field of Config and its sections."""
    out = []
    for name, tp in HINTS.items():
        if name == "compare":
            continue
        if dataclasses.is_dataclass(tp):
            out += [(f"{name}.{k}", v) for k, v in get_type_hints(tp).items()]
        else:
            out.append((name, tp))
    return out


WRONG_TYPE = {int: ['"ten"', "1.5", "true", "[1]", "{a = 1}"],
              float: ['"x"', "true", "[0.1]", "{a = 1}"],
              str: ["5", "true", "[\"a\"]", "{a = 1}"],
              bool: ["1", '"yes"', "[true]"],
              Any: ['"x"', "true", "{a = 1}", "[0.5]"]}  # byzantine.nodes: number or ids


def _literal(value: float, tp: type) -> str:
    return str(int(value)) if tp is int else repr(float(value))


def algorithm_fields() -> list[tuple[str, type, list[str], dataclasses.Field]]:
    """(dotted name, type, the --set that picks an algorithm declaring it, field) of every
    [algorithm] field outside the common ones."""
    common = {f.name for f in dataclasses.fields(AlgorithmOptions)}
    out = []
    for key, (f, tp) in declared_options().items():
        if key not in common:
            owner = next(c.name for c in ALGORITHMS.values() if key in option_names(c))
            out.append((f"algorithm.{key}", tp, [f"algorithm.name='{owner}'"], f))
    return out


def _range_cases(name: str, tp: type, bounds: tuple, pick: list[str]) -> list:
    low, high, low_incl, high_incl = bounds
    step = 1 if tp is int else 0.5
    cases = []
    if low is not None:
        cases.append((name, [*pick, f"{name}={_literal(low - step if low_incl else low, tp)}"]))
    if high is not None:
        cases.append((name, [*pick, f"{name}={_literal(high + step if high_incl else high, tp)}"]))
    if tp is float:
        cases += [(name, [*pick, f"{name}={bad}"]) for bad in ("nan", "inf", "-inf")]
    return cases


def out_of_range_cases() -> list[tuple[str, list[str]]]:
    types = dict(scalar_fields())
    cases = []
    for (section, key), bounds in _RANGES.items():
        name = f"{section}.{key}" if section else key
        cases += _range_cases(name, types[name], bounds, [])
    options = [(f"{section}.{f.name}", get_type_hints(cls)[f.name], [], f)
               for section, cls in (("algorithm", AlgorithmOptions), ("topology", TopologyConfig))
               for f in dataclasses.fields(cls)]
    for name, tp, pick, f in options + algorithm_fields():
        m = f.metadata
        if m.get("low") is not None or m.get("high") is not None:
            bounds = (m["low"], m["high"], not m["low_open"], not m["high_open"])
            cases += _range_cases(name, tp, bounds, pick)
        if m.get("choices"):
            cases.append((name, [*pick, f"{name}='nope'"]))
    return cases


def generated_cases() -> list[tuple[str, list[str]]]:
    """Wrong type for every field, out of range for every bounded one, an unknown name for every
    named choice, an unknown field in every section and every section replaced by a scalar."""
    cases = [(name, [f"{name}={bad}"]) for name, tp in scalar_fields() for bad in WRONG_TYPE[tp]]
    cases += [(name, [*pick, f"{name}={bad}"]) for name, tp, pick, _ in algorithm_fields()
              for bad in WRONG_TYPE[tp]]
    cases += out_of_range_cases()
    for section, key in _choices():
        name = f"{section}.{key}" if section else key
        cases.append((name, [f"{name}='nope'"]))
    for section in SECTIONS:
        cases.append((f"{section}.colour", [f"{section}.colour='red'"]))
        cases.append((section, [f"{section}=5"]))
    return cases


# Cross-field and build-time problems, each with the field the message must name.
SPECIAL_CASES = [
    ("learning_rate", ["learning_rate=0.1"]),
    ("algorithm.local_steps", ["algorithm.local_steps=0", "algorithm.local_epochs=0"]),
    ("topology.name", ["algorithm.name='fedavg'"]),  # centralized needs the star
    ("topology", ["topology.name='directed_ring'"]),  # gossip needs an undirected graph
    # SGP on one random 1-out digraph (rounds = 1) that is not strongly connected.
    ("topology", ["algorithm.name='osgp'", "topology.name='random_out'", "topology.k=1",
                  "data.num_nodes=6"]),
    ("topology", ["topology.name='random_out'", "algorithm.name='osgp'"]),  # out_degree 10 > n - 1
    ("topology|data.num_nodes", ["data.num_nodes=1"]),  # a ring needs 3 nodes
    ("data", ["data.num_nodes=200"]),  # more nodes than samples
    ("data", ["data.partition='pathological'", "data.classes_per_node=20"]),
    ("data.name", ["data.name='mnist'", "data.root='/nonexistent/p2pfl-data'"]),
    ("data.name", ["data.name='cifar10'", "data.root='/nonexistent/p2pfl-data'"]),
    ("data.name", ["data.name='cifar100'", "data.root='/nonexistent/p2pfl-data'"]),
    ("compare", ["compare=5"]),
    ("compare", ["compare=[1, 2]"]),
    ("compare[0].algorithm.lr", ["compare=[{'algorithm.lr' = -1}]"]),
    ("compare[1].topology.name", ["compare=[{label = 'a'}, {'topology.name' = 'moebius'}]"]),
    ("compare[0].data", ["compare=[{data = 3}]"]),
    ("data.name.x", ["data.name.x=1"]),
    ("--set", ["novalue"]),
    ("--set", ["=3"]),
]
if not torch.cuda.is_available():
    SPECIAL_CASES.append(("device", ["device='cuda'"]))

CASES = generated_cases() + SPECIAL_CASES


def _expect_clean_error(capsys, argv: list[str], field: str) -> str:
    """Exit 2 and one line naming `field` (or a subfield of it; 'a|b': either a or b)."""
    code = main(argv)
    captured = capsys.readouterr()
    err = captured.err
    assert code == 2, f"exit {code} for {argv}: {err or captured.out}"
    assert err.count("\n") == 1 and err.startswith("p2pfl: error: "), err
    assert "Traceback" not in err
    named = err[len("p2pfl: error: "):].split(": ", 1)[0]
    assert any(named == f or named.startswith(f"{f}.") for f in field.split("|")), (field, err)
    return err


@pytest.fixture(scope="module")
def base_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bad") / "base.toml"
    path.write_text(BASE)
    return path


def test_the_base_config_is_valid(base_file):
    load_config(base_file)


def test_the_table_is_large_and_covers_every_field():
    named = {field for field, _ in CASES}
    assert len(CASES) >= 150
    assert {name for name, _ in scalar_fields()} <= named
    assert {name for name, *_ in algorithm_fields()} <= named


@pytest.mark.parametrize(("field", "sets"), CASES, ids=[f"{f}:{' '.join(s)}" for f, s in CASES])
def test_invalid_config_is_one_clean_line_naming_the_field(tmp_path, capsys, monkeypatch,
                                                           base_file, field, sets):
    monkeypatch.delenv("P2PFL_DATA", raising=False)
    out = tmp_path / "run"
    argv = ["run", str(base_file), "--out", str(out), "--quiet"]
    for item in sets:
        argv += ["--set", item]
    _expect_clean_error(capsys, argv, field)
    assert not out.exists()


@pytest.mark.parametrize(("sets", "line"), [
    (["algoritm.lr=0.1"], "algoritm: did you mean 'algorithm'? unknown field (allowed: "),
    (["algorithm.lrr=0.1"], "algorithm.lrr: did you mean 'algorithm.lr'? unknown field"),
    (["topology.nmae='ring'"], "topology.nmae: did you mean 'topology.name'? unknown field"),
    (["topology.name='rnig'"], "topology.name: did you mean 'ring'? unknown value 'rnig' "
                               "(allowed: ring, "),
    (["algorithm.name='dfedav'"], "algorithm.name: did you mean 'dfedavg'? unknown value"),
    (["compare=[{'topology.name' = 'torsu'}]"], "compare[0].topology.name: did you mean "
                                                "'torus'? unknown value"),
    (["topology.name='zzzz'"], "topology.name: unknown value 'zzzz' (allowed: "),
])
def test_a_misspelt_field_or_name_gets_a_suggestion(tmp_path, capsys, base_file, sets, line):
    argv = ["run", str(base_file), "--out", str(tmp_path / "run")]
    for item in sets:
        argv += ["--set", item]
    assert _expect_clean_error(capsys, argv, line.split(":")[0]).startswith(
        f"p2pfl: error: {line}")


def test_analyze_suggests_a_topology_and_a_parameter(capsys):
    err = _expect_clean_error(capsys, ["analyze", "rnig"], "topology")
    assert "'rnig' is not a topology; did you mean 'ring'? choose one of ring, " in err
    err = _expect_clean_error(capsys, ["analyze", "exponential", "--set", "directd=false"],
                              "topology")
    assert ("directd is not an option of topology 'exponential' (did you mean 'directed'? it "
            "takes: base, directed)") in err


@pytest.mark.parametrize(("field", "text"), [
    ("config", "rounds = = 3\n"),
    ("config", "[data\nname = 'x'\n"),
    ("config", "seed = 0\nseed = 1\n"),
    ("config", "\x00\x01"),
    ("config", b"rounds = 3 # \xff\xfe not UTF-8\n"),
])
def test_invalid_toml_is_a_clean_error(tmp_path, capsys, field, text):
    path = tmp_path / "bad.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    _expect_clean_error(capsys, ["run", str(path), "--out", str(tmp_path / "run")], field)


def test_missing_files_and_directories_are_clean_errors(tmp_path, capsys):
    _expect_clean_error(capsys, ["run", str(tmp_path / "none.toml")], "config")
    _expect_clean_error(capsys, ["resume", str(tmp_path / "nowhere")], "resume")
    _expect_clean_error(capsys, ["plot", str(tmp_path)], "runs")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{not json")
    _expect_clean_error(capsys, ["resume", str(tmp_path / "run")], "resume")
    (tmp_path / "run" / "config.json").write_text('{"rounds": "many"}')
    _expect_clean_error(capsys, ["resume", str(tmp_path / "run")], "rounds")


def test_unreadable_checkpoint_is_a_clean_error(tmp_path, capsys, base_file):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(load_config(base_file).to_dict()))
    (run_dir / "checkpoint.pt").write_bytes(b"not a checkpoint")
    _expect_clean_error(capsys, ["resume", str(run_dir)], "resume")


def _weighted(edges: list[tuple[int, int, float]]) -> nx.DiGraph:
    G = nx.DiGraph()
    G.add_nodes_from(range(4))
    G.add_weighted_edges_from(edges)
    return G


@pytest.mark.parametrize(("graph", "message"), [
    # Node 0 sends 0.7 + 0.6 > 1 of its mass: no column-stochastic matrix has these weights.
    (_weighted([(0, 1, 0.7), (0, 2, 0.6), (1, 2, 0.5), (2, 3, 0.5), (3, 0, 0.5)]),
     "node 0 sends weights summing to 1.3"),
    (_weighted([(0, 1, -0.2), (1, 2, 0.5), (2, 3, 0.5), (3, 0, 0.5)]), "negative weight"),
    (nx.DiGraph([(0, 1), (1, 0), (2, 3), (3, 2)]), "not strongly connected"),
])
def test_user_supplied_pushsum_topology_is_refused(graph, message):
    """There is no config field for a user matrix: a user supplies a weighted networkx graph (its
    weights are the mixing weights) through the Python API, and it is checked the same way."""
    algorithm = ALGORITHMS["osgp"](config_from_dict({}).algorithm)
    with pytest.raises(ConfigError, match=message) as err:
        check_topology(algorithm, T.static(graph), rounds=5)
    assert err.value.field == "topology" and "\n" not in str(err.value)


# --- fuzzing ------------------------------------------------------------------------------------

BASE_RAW = tomllib.loads(BASE)
FIELD_PATHS = [tuple(name.split(".")) for name in [n for n, _ in scalar_fields()]
               + [n for n, *_ in algorithm_fields()]]
NAMES = sorted({v for allowed in _choices().values() for v in allowed})
VALUES = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-3, max_value=70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
    st.sampled_from(NAMES),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
PATHS = st.one_of(
    st.sampled_from(FIELD_PATHS),
    st.sampled_from([(s,) for s in SECTIONS] + [("compare",)]),
    st.lists(st.text(max_size=6), min_size=1, max_size=3).map(tuple),
)
MUTATION = st.tuples(st.sampled_from(["set", "delete"]), PATHS, VALUES)
FUZZ_EXAMPLES = fuzz_budget(1500, 6000)
TEXT_EXAMPLES = fuzz_budget(500, 2000)
tried = {"dict": 0, "dict_valid": 0, "text": 0, "text_valid": 0}


def _mutate(raw: dict[str, Any], op: str, path: tuple[str, ...], value: Any) -> None:
    node = raw
    for part in path[:-1]:
        if not isinstance(node, dict):
            return
        node = node.setdefault(part, {})
    if not isinstance(node, dict):
        return
    if op == "delete":
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


def _pre_training_checks(cfg: Config) -> None:
    """What `build` checks before loading data, for configs small enough to build a graph of (a
    [[compare]] root is never built: config_from_dict validated each of its variants)."""
    if cfg.data.num_nodes > 64 or cfg.compare:
        return
    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    check_topology(algorithm, schedule_for(cfg, algorithm), cfg.rounds)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(MUTATION, min_size=1, max_size=4),
       st.lists(st.dictionaries(st.text(max_size=16), VALUES, max_size=3), max_size=2))
def test_fuzzed_config_dicts_are_accepted_or_refused_cleanly(mutations, compare):
    raw = copy.deepcopy(BASE_RAW)
    for op, path, value in mutations:
        _mutate(raw, op, path, value)
    if compare:
        raw["compare"] = compare
    tried["dict"] += 1
    try:
        cfg = config_from_dict(raw)
        _pre_training_checks(cfg)
        tried["dict_valid"] += 1
    except ConfigError as err:
        assert "\n" not in str(err) and "\r" not in str(err)


@settings(max_examples=TEXT_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.integers(min_value=0, max_value=len(BASE)), st.integers(min_value=0, max_value=12),
       st.text(max_size=12))
def test_fuzzed_toml_text_is_accepted_or_refused_cleanly(tmp_path_factory, start, cut, insert):
    text = BASE[:start] + insert + BASE[start + cut:]
    path = tmp_path_factory.getbasetemp() / "fuzz.toml"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    tried["text"] += 1
    try:
        cfg = load_config(path)
        _pre_training_checks(cfg)
        tried["text_valid"] += 1
    except ConfigError as err:
        assert "\n" not in str(err)


def test_fuzz_budget_was_spent(record_property):
    """Runs after the two fuzz tests (file order): every example was tried."""
    record_property("fuzz_config_dicts", tried["dict"])
    record_property("fuzz_config_texts", tried["text"])
    assert tried["dict"] >= FUZZ_EXAMPLES and tried["text"] >= TEXT_EXAMPLES
    assert 0 < tried["dict_valid"] < tried["dict"] and 0 < tried["text_valid"] < tried["text"]
