"""Who talks to whom: static graphs, time-varying schedules and their mixing matrices.

>>> import topologies as T
>>> W = T.column_stochastic(T.exponential(16, directed=True))
"""

from topologies.builders import (
    complete,
    directed_ring,
    exponential,
    random_out_graph,
    ring,
    star,
)
from topologies.mixing import (
    DOUBLY_STOCHASTIC_METHODS,
    check_column_stochastic,
    check_doubly_stochastic,
    column_stochastic,
    doubly_stochastic,
    is_column_stochastic,
    is_doubly_stochastic,
)
from topologies.registry import TOPOLOGIES, build_schedule
from topologies.schedules import (
    OnePeerExponential,
    RandomOut,
    Schedule,
    StaticSchedule,
    as_schedule,
    one_peer_exponential,
    random_out,
    static,
)

__all__ = [
    "DOUBLY_STOCHASTIC_METHODS",
    "TOPOLOGIES",
    "OnePeerExponential",
    "RandomOut",
    "Schedule",
    "StaticSchedule",
    "as_schedule",
    "build_schedule",
    "check_column_stochastic",
    "check_doubly_stochastic",
    "column_stochastic",
    "complete",
    "directed_ring",
    "doubly_stochastic",
    "exponential",
    "is_column_stochastic",
    "is_doubly_stochastic",
    "one_peer_exponential",
    "random_out",
    "random_out_graph",
    "ring",
    "star",
    "static",
]
