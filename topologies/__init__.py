"""Who talks to whom: static graphs, time-varying schedules, mixing matrices, faults, selection.

>>> import topologies as T
>>> W = T.column_stochastic(T.exponential(16, directed=True))

Static graphs (nodes 0..n-1; nx.Graph if undirected, nx.DiGraph if directed; no self-loops):
    ring(n), directed_ring(n), line(n), grid(rows, cols), torus(rows, cols), hypercube(dim),
    complete(n), star(n), exponential(n, base=2, directed=True), dumbbell(n),
    erdos_renyi(n, p, seed=None, directed=False), random_regular(n, d, seed=None),
    watts_strogatz(n, k, p, seed=None, connected=True), barabasi_albert(n, m, seed=None),
    random_geometric(n, radius=0.0, seed=None, connected=True) (node attribute 'pos'),
    random_out_graph(n, k, seed=None), random_regular_digraph(n, d, seed=None),
    equi_static(n, m=None, directed=True, seed=None) (weighted), from_adjacency(A, directed=None,
    weighted=False),
    from_edges(edges, n, directed=True), from_networkx(G, ordering="sorted")
From the data (a partition's [n, K] label counts or proportions):
    d_cliques(class_counts, clique_size=10, inter="fully", steps=1000, seed=None),
    clique_skews(class_counts, clique_of); stl_fw(proportions, budget, lam=0.1, max_iter=100,
    connected=True) -> W, stl_fw_graph(...), neighborhood_heterogeneity(W, proportions,
    weights=None), stl_fw_objective
Schedules (``at(t)``, ``n``, ``period``, ``directed``, ``needs_losses``):
    static(G), cycle([G0, G1, ...]), one_peer_exponential(n),
    random_out(n, k, seed=None, selection="random", temperature=1.0),
    random_regular_schedule(n, d, seed=None), epidemic_oracle(n, s, seed=None),
    equi_dyn(n, directed=True, eta=0.5, m=None, seed=None), union_window(schedule, B),
    from_function(fn), as_schedule(graph | graphs | matrix | matrices | callable | Schedule)
Finite-time averaging (weighted undirected rounds; one period multiplies to J = 11^T / n):
    base_graph(n, k=1), simple_base_graph(n, k=1), hyper_hypercube(n, k=1)
Mixing (W[j, i] = share of i's mass sent to j; dense, or scipy CSR with sparse=True):
    column_stochastic(G, faults=None, *, fault_rule="keep", sparse=False),
    row_stochastic(G, faults=None, *, fault_rule="keep", sparse=False),
    doubly_stochastic(G, method="metropolis_hastings", faults=None, *, sparse=False),
    is_column_stochastic(W), is_doubly_stochastic(W), check_column_stochastic(W),
    check_doubly_stochastic(W); messages(G) -> (senders, receivers, weights) of one round
Faults: Faults(links, nodes), Faults.none(n), sample_faults(G, link_drop, node_drop, seed)
Adversaries and privacy: placement(G, count, rule="random", seed=None) (PLACEMENTS: random,
    max_degree, cut); gossip_exposure(W or [W, ...], steps=1, online=None,
    accounting="linear"|"reach") (pairwise exposure of private gossip), rdp_to_dp(c, delta),
    gaussian_coefficient(sensitivity, sigma)
Underlays (physical networks, docs/network.md): underlay(name) (UNDERLAYS: gaia, amazon_us,
    geant, exodus, ebone), underlay_routes(U, n)
Overlays for throughput on an underlay (docs/topology-research.md): silo_links(U, n=None,
    latency_s=0.0, capacity_gbps=None) -> Links; mst_overlay(links, model_bits, compute_s),
    mbst_overlay(links, model_bits, compute_s, access_gbps=inf, delta=None),
    ring_overlay(links, model_bits, compute_s, access_gbps=inf), star_overlay(links, center=None);
    cycle_time(overlay, links, model_bits, compute_s, access_gbps=inf, server=None) (seconds a
    synchronous round takes: the max-plus model of Marfoq et al. 2020), mean_round_time(schedule,
    links, ...); matcha(G, budget=0.5, seed=None) (MATCHA's random matchings, a schedule)
Connectivity: is_strongly_connected(G), union_graph(schedule, t0, t1),
    union_is_strongly_connected(n, graphs)
Neighbour selection ``(losses, candidates, k, rng) -> [n, k]``: select_random,
    select_loss_based, loss_softmax(temperature), get_selector(name_or_callable, temperature)
By name (configs): a named topology is its builder, registered with ``@register`` (its
    signature is its options, its docstring its help): REGISTRY, TOPOLOGIES,
    build_schedule(name, n, seed=0, window=1, selection="random", **options); errors:
    ParameterError (and did_you_mean, which suggests a close name in every error of the library)
"""

from topologies._common import ParameterError, did_you_mean, messages
from topologies.builders import (
    complete,
    directed_ring,
    dumbbell,
    exponential,
    grid,
    hypercube,
    line,
    ring,
    star,
    torus,
)
from topologies.by_name import build_schedule, named
from topologies.cliques import INTER_CLIQUE, clique_skews, d_cliques
from topologies.connectivity import (
    is_strongly_connected,
    union_graph,
    union_is_strongly_connected,
)
from topologies.convert import from_adjacency, from_edges, from_networkx
from topologies.equitopo import EquiDyn, equi_dyn, equi_static
from topologies.faults import Faults, sample_faults
from topologies.finite_time import base_graph, hyper_hypercube, simple_base_graph
from topologies.from_objects import FunctionSchedule, as_schedule, from_function
from topologies.heterogeneity import (
    neighborhood_heterogeneity,
    stl_fw,
    stl_fw_graph,
    stl_fw_objective,
)
from topologies.matcha import matcha
from topologies.mixing import (
    DOUBLY_STOCHASTIC_METHODS,
    FAULT_RULES,
    check_column_stochastic,
    check_doubly_stochastic,
    column_stochastic,
    doubly_stochastic,
    is_column_stochastic,
    is_doubly_stochastic,
    row_stochastic,
)
from topologies.placement import PLACEMENTS, placement
from topologies.privacy import (
    PRIVACY_ACCOUNTINGS,
    gaussian_coefficient,
    gossip_exposure,
    rdp_to_dp,
)
from topologies.random_graphs import (
    barabasi_albert,
    erdos_renyi,
    random_geometric,
    random_out_graph,
    random_regular,
    random_regular_digraph,
    watts_strogatz,
)
from topologies.registry import REGISTRY, NamedTopology, register
from topologies.schedules import (
    Cycle,
    EpidemicOracle,
    OnePeerExponential,
    RandomOut,
    RandomRegularSchedule,
    Schedule,
    StaticSchedule,
    cycle,
    epidemic_oracle,
    one_peer_exponential,
    random_out,
    random_regular_schedule,
    static,
)
from topologies.selection import (
    SELECTIONS,
    Selector,
    get_selector,
    loss_softmax,
    select_loss_based,
    select_random,
)
from topologies.throughput import (
    Links,
    cycle_time,
    mbst_overlay,
    mean_round_time,
    mst_overlay,
    ring_overlay,
    silo_links,
    star_overlay,
)
from topologies.underlays import UNDERLAYS, underlay, underlay_routes
from topologies.windows import UnionWindow, union_window

__all__ = [
    # static graphs (builders, random graphs, user graphs)
    "ring", "directed_ring", "line", "grid", "torus", "hypercube", "complete", "star",
    "exponential", "dumbbell", "erdos_renyi", "random_regular", "watts_strogatz", "barabasi_albert",
    "random_geometric", "random_out_graph", "random_regular_digraph", "equi_static",
    "from_adjacency", "from_edges", "from_networkx",
    # from the data
    "d_cliques", "INTER_CLIQUE", "clique_skews", "stl_fw", "stl_fw_graph",
    "neighborhood_heterogeneity", "stl_fw_objective",
    # schedules
    "Schedule", "FunctionSchedule", "from_function", "as_schedule", "static", "cycle",
    "one_peer_exponential", "random_out",
    "random_regular_schedule", "union_window", "StaticSchedule", "Cycle", "OnePeerExponential",
    "RandomOut", "RandomRegularSchedule", "UnionWindow", "epidemic_oracle", "EpidemicOracle",
    "equi_dyn", "EquiDyn",
    # finite-time averaging
    "base_graph", "simple_base_graph", "hyper_hypercube",
    # mixing matrices and their checks
    "column_stochastic", "row_stochastic", "doubly_stochastic", "DOUBLY_STOCHASTIC_METHODS",
    "FAULT_RULES", "is_column_stochastic", "is_doubly_stochastic", "check_column_stochastic",
    "check_doubly_stochastic",
    # connectivity
    "is_strongly_connected", "union_graph", "union_is_strongly_connected",
    # faults and neighbour selection
    "Faults", "sample_faults", "Selector", "SELECTIONS", "select_random", "select_loss_based",
    "loss_softmax", "get_selector",
    # adversaries and privacy
    "placement", "PLACEMENTS", "gossip_exposure", "rdp_to_dp", "gaussian_coefficient",
    "PRIVACY_ACCOUNTINGS",
    # physical networks under an overlay
    "underlay", "UNDERLAYS", "underlay_routes", "Links", "silo_links", "mst_overlay",
    "mbst_overlay", "ring_overlay", "star_overlay", "cycle_time", "mean_round_time", "matcha",
    # by name, for configs
    "TOPOLOGIES", "REGISTRY", "NamedTopology", "register", "named", "build_schedule",
    "ParameterError", "did_you_mean", "messages",
]

TOPOLOGIES: tuple[str, ...] = tuple(REGISTRY)  # the library's; REGISTRY also has one's own
