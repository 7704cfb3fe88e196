"""FL algorithms: one module per algorithm, registered here by config name."""

from algorithms.base import Algorithm, RoundReport
from algorithms.decentralized import Gossip, PushSum
from algorithms.dfedavg import DFedAvg
from algorithms.fedavg import FedAvg
from algorithms.server import Server
from algorithms.sgp import SGP

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (FedAvg, DFedAvg, SGP)}

__all__ = ["ALGORITHMS", "Algorithm", "Gossip", "PushSum", "RoundReport", "Server"]
