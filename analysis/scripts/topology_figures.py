"""The topology figures of docs/analysis.md: Push-Sum consensus error vs round and spectra of
seven n = 16 topologies, and two topology drawings.

`python -m analysis.scripts.topology_figures [--out docs/figures]` (about a second).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import networkx as nx
import numpy as np

import analysis as A
import topologies as T
from analysis import plots
from analysis.matrices import as_matrix

N = 16


def families() -> dict[str, object]:
    """The topologies of the figures, n = 16.

    Returns
    -------
    dict {name: graph or schedule}.
    """
    torus = nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4, periodic=True))
    return {"complete": T.complete(N), "star": T.star(N), "exponential": T.exponential(N),
            "one-peer exponential": T.one_peer_exponential(N), "torus 4x4": torus,
            "ring": T.ring(N), "directed ring": T.directed_ring(N)}


def main() -> None:
    """Draw the Push-Sum consensus error and the spectra of the topologies, and the directed
    exponential graph; print each file and each topology's rounds to 1e-3."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures", help="output directory")
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    out = Path(args.out)
    curves = {}
    for name, topology in families().items():
        # all the mass on node 0 (a leaf of the star), natural matrices
        x0 = np.zeros(N)
        x0[N - 1 if name == "star" else 0] = N
        s = A.summary(topology)
        rounds = topology if isinstance(topology, T.Schedule) and s["kind"] != "static" else (
            as_matrix(topology))
        z = A.pushsum_consensus(rounds, x0, args.rounds)
        label = f"{name} (diam {s['diameter']}, gap {s['spectral_gap']:.3f})"
        curves[label] = A.consensus_error(z)
        print(f"{label}: rounds to 1e-3 = {A.rounds_to_consensus(curves[label], 1e-3)}")
    for p in plots.plot_consensus(curves, out / "consensus_n16",
                                  ylabel="consensus error  max_i |z_i - mean_i z_i(0)|"):
        print(p)
    spectra = {"ring": T.ring(N), "directed ring": T.directed_ring(N),
               "exponential": T.exponential(N), "star": T.star(N)}
    for p in plots.plot_spectrum(spectra, out / "spectra_n16"):
        print(p)
    for p in plots.draw_topology(T.exponential(N), out / "exponential_n16",
                                 "directed exponential graph, n = 16"):
        print(p)


if __name__ == "__main__":
    main()
