"""Topology analysis: spectra, connectivity, consensus, sharpness, plots and the topology study.

>>> import analysis as A, topologies as T
>>> round(A.slem(T.ring(16)), 4), A.diameter(T.exponential(16))
(0.9493, 4)
>>> A.summary(T.one_peer_exponential(16))["exact_averaging_rounds"]
4

Matrices follow the column convention of topologies (W[j, i]: share of i's mass sent to j); a
graph stands for its natural matrix (Metropolis-Hastings if undirected, push rule if directed).
"""

import importlib
import sys
import types
from typing import Any

_HOMES = {
    "analysis.connectivity": (
        "BConnectivity", "b_connectivity", "diameter", "is_b_connected", "is_strongly_connected",
        "largest_component_diameter", "min_b", "number_of_components", "union_graph",
        "why_not_strongly_connected"),
    "analysis.consensus": (
        "consensus_distance", "consensus_error", "contraction_rate", "gossip_consensus",
        "pushsum_consensus", "rounds_to_consensus"),
    "analysis.matrices": ("sparse_mixing",),
    "analysis.neighbors": ("NoConsensusWarning", "effective_neighbors",
                           "neighborhood_heterogeneity"),
    "analysis.pairwise": (
        "averaging_time_bounds", "expected_gossip_matrix", "neighbour_probabilities",
        "pairwise_gossip"),
    "analysis.privacy": ("pairwise_privacy",),
    "analysis.runs": ("load_runs", "run_records"),
    "analysis.spectral": (
        "algebraic_connectivity", "eigenvalues", "ergodicity_coefficient", "mixing_time",
        "perron_vector", "slem", "spectral_gap"),
    "analysis.summary": ("summary",),
    "topologies.throughput": ("cycle_time", "delay_graph", "max_cycle_mean", "silo_links"),
    "analysis.timevarying": (
        "exact_averaging_rounds", "per_round_rate", "product", "schedule_mixing_time"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    """The public names come from their modules on first use: `import analysis` (as the
    `p2pfl` command's analysis commands do) loads neither networkx nor scipy."""
    if name in _HOME_OF:
        return getattr(importlib.import_module(_HOME_OF[name]), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Importing a submodule binds it as an attribute of its package; for `analysis.summary`
    that would hide the function `summary` (an eager `from analysis.summary import summary` here
    used to rebind it), so a submodule named like a public function is not bound."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name in _HOME_OF and isinstance(value, types.ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
