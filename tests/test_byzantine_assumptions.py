"""The robust rules' assumptions checked per honest node (algorithms/assumptions.py), the z that
ALIE uses and records, and the attack "none" (the same nodes marked, behaving honestly)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy.stats import norm

import topologies as T
from algorithms.assumptions import AssumptionLedger, AssumptionWarning, check
from p2pfl.engine import run
from p2pfl.engine.threats import byzantine_of
from tests.conftest import small_config, strip_times


def broken(G, byzantine: list[int], rule: str, trim: int = 1,
           clip_radius: float = 0.0) -> list[int]:
    """The honest nodes of G whose `rule` assumption fails with `byzantine` attackers."""
    mask = np.zeros(G.number_of_nodes(), dtype=bool)
    mask[byzantine] = True
    found = check(T.doubly_stochastic(G, sparse=True), mask, rule, trim, clip_radius)
    return np.flatnonzero(found.broken).tolist()


def test_each_rule_fails_where_its_assumption_does() -> None:
    K6, ring = T.complete(6), T.ring(6)  # K6: W_ij = 1/6, 5 neighbours; ring: 2 neighbours
    # one attacker of 6 on K6: b = 1 <= trim, d = 5 >= 3, 2 < 6, delta = 1/6 < 1/2: all hold
    for rule in ("trimmed_mean", "median", "clipped_gossip", "self_centered_clipping"):
        assert broken(K6, [0], rule) == [], rule
    assert broken(K6, [0], "mean") == [1, 2, 3, 4, 5]  # plain gossip: any Byzantine neighbour
    # two attackers: b = 2 > trim 1, and the second-farthest radius is an attacker's; the
    # weight 2/6 and the median's majority (4 < 6) still hold
    assert broken(K6, [0, 1], "trimmed_mean") == [2, 3, 4, 5]
    assert broken(K6, [0, 1], "trimmed_mean", trim=2) == []
    assert broken(K6, [0, 1], "self_centered_clipping") == [2, 3, 4, 5]
    assert broken(K6, [0, 1], "self_centered_clipping", clip_radius=1.0) == []
    assert broken(K6, [0, 1], "clipped_gossip") == broken(K6, [0, 1], "median") == []
    # three of six: the median's 6 values hold 3 Byzantine (2 * 3 < 6 fails), delta = 1/2
    assert broken(K6, [0, 1, 2], "median") == broken(K6, [0, 1, 2], "clipped_gossip") == [3, 4, 5]
    # the ring with trim 1: 2 neighbours, none survives the trim, attacker or not
    assert broken(ring, [0], "trimmed_mean") == [1, 2, 3, 4, 5]
    assert broken(ring, [], "trimmed_mean") == [0, 1, 2, 3, 4, 5]
    assert broken(ring, [0], "median") == []  # {own, 2 neighbours}, at most 1 Byzantine of 3
    # a node without neighbours in the round (offline) hears no one under any rule: not counted
    alone = check(np.eye(3), np.zeros(3, dtype=bool), "trimmed_mean", 1, 0.0)
    assert alone.neighbours.tolist() == [0, 0, 0] and not alone.broken.any()


def test_a_broken_assumption_is_recorded_and_warned_once(tmp_path) -> None:
    # the case: 4 sign-flippers of 6 on the complete graph under trimmed_mean (trim 1)
    cfg = small_config(rounds=2, topology__name="complete", algorithm__aggregator="trimmed_mean",
                       byzantine__nodes=[0, 1, 3, 4])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = run(cfg, tmp_path / "r", figures=False)
    said = [w for w in caught if issubclass(w.category, AssumptionWarning)]
    assert len(said) == 1 and "round 1" in str(said[0].message)
    assert "node 2: 4 of 5 neighbours Byzantine" in str(said[0].message)
    assert [r["assumption_broken"] for r in history] == [2, 2]
    record = json.loads((tmp_path / "r" / "byzantine.json").read_text())["assumption"]
    assert record["aggregator"] == "trimmed_mean" and record["checked"].endswith("2 rounds")
    assert [(b["node"], b["rounds"], b["first_round"], b["byzantine_neighbours"],
             b["neighbours"]) for b in record["broken"]] == [(2, 2, 1, 4, 5), (5, 2, 1, 4, 5)]
    assert record["delta_max"] == pytest.approx(4 / 6)


def test_the_ledger_survives_a_checkpoint() -> None:
    ledger = AssumptionLedger(6, (0, 1), "trimmed_mean", 1, 0.0)
    with pytest.warns(AssumptionWarning):
        ledger.add(4, T.doubly_stochastic(T.complete(6), sparse=True))
    again = AssumptionLedger(6, (0, 1), "trimmed_mean", 1, 0.0)
    again.load_state_dict(ledger.state_dict())
    assert again.record("x") == ledger.record("x") and again.warned
    assert again.record("x")["broken"][0] == {"node": 2, "rounds": 1, "first_round": 5,
                                              "byzantine_neighbours": 2, "neighbours": 5,
                                              "byzantine_weight": pytest.approx(2 / 6)}


def test_alie_records_the_z_it_uses(tmp_path) -> None:
    # N = 6, f = 1: s = floor(6 / 2 + 1) - 1 = 3, z = Phi^-1((6 - 1 - 3) / (6 - 1)) = Phi^-1(0.4)
    cfg = small_config(rounds=1, byzantine__nodes=1, byzantine__attack="alie")
    assert byzantine_of(cfg, T.static(T.ring(6))).params["z"] == pytest.approx(norm.ppf(0.4))
    with pytest.warns(AssumptionWarning, match="'mean' assumes"):  # plain gossip, attacked
        run(cfg, tmp_path / "r", figures=False)
    record = json.loads((tmp_path / "r" / "byzantine.json").read_text())
    assert record["params"]["z"] == pytest.approx(-0.253347, abs=1e-6)
    chosen = small_config(rounds=1, byzantine__nodes=1, byzantine__attack="alie",
                          byzantine__z=1.5)
    assert byzantine_of(chosen, T.static(T.ring(6))).params == {"z": 1.5}


@pytest.mark.parametrize("aggregator", ["mean", "trimmed_mean"])
def test_the_attack_none_is_the_run_without_attack_with_honest_metrics(tmp_path,
                                                                       aggregator: str) -> None:
    base = {"rounds": 1, "topology__name": "complete", "algorithm__aggregator": aggregator}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AssumptionWarning)
        plain = run(small_config(**base), tmp_path / "plain", figures=False)
        marked = run(small_config(**base, byzantine__nodes=[0, 3], byzantine__attack="none"),
                     tmp_path / "none", figures=False)
    honest = {"test_acc_honest_mean", "test_acc_honest_min", "consensus_dist_honest",
              "assumption_broken"}
    assert all(honest <= set(r) for r in marked)
    assert all(r["assumption_broken"] == 0 for r in marked)  # the marked nodes send honestly
    assert strip_times(plain) == [{k: v for k, v in r.items() if k not in honest}
                                  for r in strip_times(marked)]
    record = json.loads((tmp_path / "none" / "byzantine.json").read_text())
    assert record["attack"] == "none" and record["params"] == {} and record["nodes"] == [0, 3]


def test_a_default_alie_z_near_zero_is_said() -> None:
    """Two attackers of 16: the decentralized z_max is 0, the honest mean; the run says so."""
    cfg = small_config(data__num_nodes=16, byzantine__nodes=2, byzantine__attack="alie")
    with pytest.warns(UserWarning, match="ALIE's default z is 0 for 16 nodes and 2 Byzantine"):
        byzantine = byzantine_of(cfg, T.as_schedule(T.ring(16)))
    assert byzantine.params["z"] == 0.0
