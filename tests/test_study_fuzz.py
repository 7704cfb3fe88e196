"""[study] tables fuzzed with hypothesis: a valid table with 1 to 3 of its fields (or its sweep's)
set to values of every type (negative, zero, huge, NaN, infinite, empty, nested) or left out, or
unknown keys added. Each table is either
planned (its entries, each entry's overrides applied to the experiment) or refused with one
ConfigError line; nothing else escapes."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.study_spec import STUDY_FIELDS, SWEEP_FIELDS, study_entries, study_from_table
from p2pfl.config import ConfigError, with_overrides
from tests.conftest import fuzz_budget, small_config

EXAMPLES = fuzz_budget(600, 4000)
tried = {"study_tables": 0, "study_tables_planned": 0}

SCALARS = st.one_of(
    st.integers(-3, 3), st.sampled_from([0, -1, 2**31, 2**63, 10**12]),
    st.sampled_from([0.0, -0.5, 0.5, 1.0, 1.5, math.nan, math.inf, -math.inf, 1e-320, 1e300]),
    st.booleans(),
    st.sampled_from(["ring", "exponential", "star", "complete", "torus", "random_out", "Ring",
                     "ring:base", "ring:colour=1", "exponential:directed=false:base=3",
                     "grid:rows=2:cols=3", "num_nodes", "degree", "base", "", "x" * 300,
                     "dfedavg", "fedavg", "sgp", "nope", "study.csv", "../up", "é"]),
    st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["name", "label", "base", "directed", "degree", "momentum",
                                     "lr", "k", "rows", "cols", "seed", "colour"]),
                    inner, max_size=3)), max_leaves=8)
BASE = {"seeds": [0, 1], "topologies": ["ring", "exponential:directed=false"],
        "algorithms": ["dfedavg", {"name": "dfedavgm", "momentum": 0.5, "label": "m"}],
        "target": 0.5, "stack": 1,
        "sweep": [{"label": "r", "vary": "num_nodes", "values": [4, 6], "topology": "ring"}]}
KEYS = st.sampled_from([*STUDY_FIELDS, "seed", "topology", "sweeps"])
SWEEP_KEYS = st.sampled_from([*SWEEP_FIELDS, "vary ", "value"])
MUTATION = st.one_of(st.tuples(st.just("set"), KEYS, VALUES), st.tuples(st.just("drop"), KEYS),
                     st.tuples(st.just("set_sweep"), SWEEP_KEYS, VALUES),
                     st.tuples(st.just("drop_sweep"), SWEEP_KEYS))


def mutated(mutations: list[tuple[Any, ...]]) -> dict[str, Any]:
    """BASE (a valid study) with each mutation applied: a field set or dropped, at the top or in
    the first sweep (while there is one)."""
    table = copy.deepcopy(BASE)
    for op, key, *value in mutations:
        where = table
        if op.endswith("sweep"):
            sweeps = table.get("sweep")
            if not (isinstance(sweeps, list) and sweeps and isinstance(sweeps[0], dict)):
                continue
            where = sweeps[0]
        if op.startswith("set"):
            where[key] = value[0]
        else:
            where.pop(key, None)
    return table


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(MUTATION, min_size=1, max_size=3))
def test_fuzzed_study_tables_are_planned_or_refused_in_one_line(mutations: list[Any]) -> None:
    table = mutated(mutations)
    tried["study_tables"] += 1
    cfg = small_config()
    try:
        spec = study_from_table(table)
        for entry in study_entries(spec.topologies, spec.sweeps)[:6]:
            with_overrides(cfg, entry.overrides)
        tried["study_tables_planned"] += 1
    except ConfigError as err:
        assert "\n" not in str(err) and "\r" not in str(err)


def test_the_study_fuzz_budget_was_spent(record_property) -> None:
    """Runs after the fuzz test (file order): every example tried, some of them valid."""
    for family, count in tried.items():
        record_property(f"fuzz_{family}", count)
    assert tried["study_tables"] >= EXAMPLES
    assert 0 < tried["study_tables_planned"] < tried["study_tables"]
