"""Topology analysis: spectra, spectral gap, connectivity, diameter."""

from analysis.spectral import (
    diameter,
    eigenvalues,
    is_strongly_connected,
    slem,
    spectral_gap,
    union_graph,
)

__all__ = [
    "diameter",
    "eigenvalues",
    "is_strongly_connected",
    "slem",
    "spectral_gap",
    "union_graph",
]
