"""Topology analysis: spectra, connectivity, consensus, sharpness, plots and the topology study.

>>> import analysis as A, topologies as T
>>> A.slem(T.ring(16)), A.diameter(T.exponential(16)), A.summary(T.one_peer_exponential(16))

Matrices follow the column convention of topologies (W[j, i]: share of i's mass sent to j); a
graph stands for its natural matrix (Metropolis-Hastings if undirected, push rule if directed).
"""

from analysis.connectivity import (
    BConnectivity,
    b_connectivity,
    diameter,
    is_b_connected,
    is_strongly_connected,
    largest_component_diameter,
    min_b,
    number_of_components,
    union_graph,
    why_not_strongly_connected,
)
from analysis.consensus import (
    consensus_distance,
    consensus_error,
    contraction_rate,
    gossip_consensus,
    pushsum_consensus,
    rounds_to_consensus,
)
from analysis.matrices import sparse_mixing
from analysis.spectral import (
    algebraic_connectivity,
    eigenvalues,
    ergodicity_coefficient,
    mixing_time,
    perron_vector,
    slem,
    spectral_gap,
)
from analysis.summary import summary
from analysis.timevarying import per_round_rate, product, schedule_mixing_time

__all__ = [
    "BConnectivity", "algebraic_connectivity", "b_connectivity", "consensus_distance",
    "consensus_error", "contraction_rate", "diameter", "eigenvalues", "ergodicity_coefficient",
    "gossip_consensus", "is_b_connected", "is_strongly_connected", "largest_component_diameter",
    "min_b", "mixing_time", "number_of_components", "per_round_rate", "perron_vector", "product",
    "pushsum_consensus", "rounds_to_consensus", "schedule_mixing_time", "slem", "sparse_mixing",
    "spectral_gap", "summary", "union_graph", "why_not_strongly_connected",
]
