"""Property-based tests of the mixing and Push-Sum layer (hypothesis): random strongly connected
digraphs with random column-stochastic weights, mixed by the engine's own LocalComm (dense and
CSR) in float64.

- the mass sum_i x_i and sum_i w_i is conserved to 1e-12 every round, also when messages are lost
  and nodes are offline (the "keep" and "renormalise" rules);
- the de-biased values x_i / w_i converge to the average of the starts (1e-7, after the rounds in
  which the second largest eigenvalue modulus of the matrix reaches 1e-12);
- every matrix is column stochastic with non-negative entries.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topologies as T
from p2pfl.core.mixing import LocalComm
from tests.conftest import fuzz_budget

pytestmark = pytest.mark.usefixtures("one_thread")
EXAMPLES = fuzz_budget(40, 400)
tried = {"push_sum_graphs": 0, "faulty_push_sum_graphs": 0}
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def strongly_connected(draw: st.DrawFn, weighted: bool) -> nx.DiGraph:
    """3-12 nodes: a cycle through a random order (strong connectivity) plus random extra arcs;
    with `weighted`, every arc carries a share in [0.05, 1) of what its sender keeps, so that a
    sender's shares sum below 1 and its self weight stays positive."""
    n = draw(st.integers(3, 12))
    order = draw(st.permutations(range(n)))
    arcs = {(order[i], order[(i + 1) % n]) for i in range(n)}
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    arcs |= {(i, j) for i, j in extra if i != j}
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(sorted(arcs))
    if weighted:
        for i in range(n):
            out = sorted(G.successors(i))
            raw = draw(st.lists(st.floats(0.05, 1.0), min_size=len(out) + 1,
                                max_size=len(out) + 1))
            for j, share in zip(out, raw[1:]):
                G[i][j]["weight"] = share / sum(raw)  # raw[0]: the share i keeps
    return G


def mixed(comm: LocalComm, W: np.ndarray, x: torch.Tensor, w: torch.Tensor
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """One Push-Sum exchange of numerators x [n, d] and weights w [n] with the engine's mixing."""
    params = {"x": x.clone(), "w": w.clone().unsqueeze(1)}
    comm.mix(comm.matrix(W), params)
    return params["x"], params["w"].squeeze(1)


def comm_for(layout: str) -> LocalComm:
    return LocalComm(torch.device("cpu"), torch.float64, mixing=layout)


@SETTINGS
@given(strongly_connected(weighted=True), st.sampled_from(["dense", "sparse"]),
       st.integers(0, 2**31 - 1))
def test_push_sum_conserves_mass_and_de_biases_to_the_average(G, layout, seed):
    tried["push_sum_graphs"] += 1
    n = G.number_of_nodes()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=gen, dtype=torch.float64)
    average = x.mean(0)
    w = torch.ones(n, dtype=torch.float64)
    W = T.column_stochastic(G, sparse=layout == "sparse")
    dense = W.toarray() if layout == "sparse" else W
    assert dense.min() >= 0 and np.abs(dense.sum(0) - 1).max() < 1e-12
    comm = comm_for(layout)
    second = sorted(np.abs(np.linalg.eigvals(dense)))[-2]  # the geometric rate of de-biasing
    rounds = min(5000, int(np.ceil(np.log(1e-12) / np.log(max(second, 1e-3)))))
    for _ in range(rounds):
        x, w = mixed(comm, W, x, w)
        torch.testing.assert_close(x.sum(0), n * average, rtol=0, atol=1e-12 * n)
        assert abs(float(w.sum()) - n) < 1e-12 * n
    assert (x / w.unsqueeze(1) - average).abs().max() < 1e-7


@SETTINGS
@given(strongly_connected(weighted=False), st.floats(0.0, 0.9), st.floats(0.0, 0.5),
       st.sampled_from(["keep", "renormalise"]), st.sampled_from(["dense", "sparse"]),
       st.integers(0, 2**31 - 1))
def test_lost_messages_and_offline_nodes_keep_the_mass_exact(G, link_drop, node_drop, rule,
                                                             layout, seed):
    """Fresh faults every round (seeded draws): every column still sums to 1, an offline node
    keeps its row, and the mass is what it was (1e-12)."""
    tried["faulty_push_sum_graphs"] += 1
    n = G.number_of_nodes()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    w = torch.ones(n, dtype=torch.float64)
    mass = x.sum(0)
    comm = comm_for(layout)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        faults = T.sample_faults(G, link_drop, node_drop, seed=rng)
        W = T.column_stochastic(G, faults, fault_rule=rule, sparse=layout == "sparse")
        dense = W.toarray() if layout == "sparse" else W
        assert dense.min() >= 0 and np.abs(dense.sum(0) - 1).max() < 1e-12
        before = x.clone()
        x, w = mixed(comm, W, x, w)
        offline = np.flatnonzero(np.asarray(faults.nodes))
        torch.testing.assert_close(x[offline], before[offline], rtol=0, atol=0)
        torch.testing.assert_close(x.sum(0), mass, rtol=0, atol=1e-12 * n)
        assert abs(float(w.sum()) - n) < 1e-12 * n


def test_every_example_was_tried(record_property):
    """Runs after the property tests (file order); records their counts for the fuzz summary."""
    for family, count in tried.items():
        record_property(f"fuzz_{family}", count)
