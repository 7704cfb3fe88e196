"""Cycle times of the overlays of Marfoq et al. (NeurIPS 2020) on their five underlays
(docs/topology-research.md, "Overlays for throughput").

Their setting: the iNaturalist model (44,961,717 bits) and computation (25.4 ms a round), every
underlay link 1 Gbit/s (their code's default capacity), 4 ms a message besides its path's
latency, silos' access links of 1 or 10 Gbit/s. For each underlay and access capacity, the cycle
time (ms) of the star (centralized: an upload, then a download), the MST, the delta-MBST (delta
chosen by cycle time) and the Christofides ring, and MATCHA's mean round time (budget 0.5 on the
underlay's own links, 1000 rounds, the authors' rule: a round lasts its slowest message).

`python -m analysis.scripts.cycle_times [--underlays gaia,amazon_us,...]` (about 40 s) prints
the Markdown table.
"""

from __future__ import annotations

import argparse
import time

import networkx as nx

import topologies as T

MODEL_BITS = 44961717  # iNaturalist's model, as the authors' code sizes it
COMPUTE_S = 0.0254  # its computation of one local step, seconds
MESSAGE_LATENCY_S = 0.004  # the authors' fixed latency of a message
LINK_GBPS = 1.0  # the authors' capacity of every underlay link
ACCESS_GBPS = (1.0, 10.0)
MATCHA_BUDGET = 0.5  # the authors' communication_budget
MATCHA_ROUNDS = 1000


def row(name: str, access_gbps: float) -> dict[str, float | int | str]:
    """The cycle times (ms) of the four overlays on one underlay.

    Parameters
    ----------
    name : a shipped underlay.
    access_gbps : each silo's uplink and downlink, Gbit/s.

    Returns
    -------
    dict: underlay, silos, access, star, mst, mbst, delta (the MBST's largest degree), ring,
    matcha.
    """
    underlay = T.underlay(name)
    links = T.silo_links(underlay, latency_s=MESSAGE_LATENCY_S, capacity_gbps=LINK_GBPS)
    star = T.star_overlay(links)
    mbst = T.mbst_overlay(links, MODEL_BITS, COMPUTE_S, access_gbps)

    def ms(overlay: object, server: int | None = None) -> float:
        return 1e3 * T.cycle_time(overlay, links, MODEL_BITS, COMPUTE_S, access_gbps, server)

    return {"underlay": name, "silos": links.n, "access": access_gbps,
            "star": ms(star, star.graph["center"]),
            "mst": ms(T.mst_overlay(links, MODEL_BITS, COMPUTE_S)), "mbst": ms(mbst),
            "delta": max(d for _, d in mbst.degree),
            "ring": ms(T.ring_overlay(links, MODEL_BITS, COMPUTE_S, access_gbps)),
            "matcha": 1e3 * T.mean_round_time(T.matcha(nx.Graph(underlay.edges), MATCHA_BUDGET,
                                                       seed=0), links, MODEL_BITS, COMPUTE_S,
                                              access_gbps, MATCHA_ROUNDS)}


def table(rows: list[dict[str, float | int | str]]) -> str:
    """Markdown, one line per underlay and access capacity.

    Parameters
    ----------
    rows : `row`'s dicts.

    Returns
    -------
    str.
    """
    lines = ["| underlay | silos | access Gbit/s | star | MST | delta-MBST (delta) | ring | "
             "MATCHA | star / best |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = min(r["mst"], r["mbst"], r["ring"], r["matcha"])
        lines.append(f"| {r['underlay']} | {r['silos']} | {r['access']:g} | {r['star']:.1f} | "
                     f"{r['mst']:.1f} | {r['mbst']:.1f} ({r['delta']}) | {r['ring']:.1f} | "
                     f"{r['matcha']:.1f} | {r['star'] / best:.1f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the table of the chosen underlays at both access capacities, and the time taken."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--underlays", default=",".join(T.UNDERLAYS))
    args = parser.parse_args()
    start = time.perf_counter()
    rows = [row(name, access) for access in ACCESS_GBPS for name in args.underlays.split(",")]
    print(table(rows), end="")
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
