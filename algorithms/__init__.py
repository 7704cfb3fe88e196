"""FL algorithms: one module per algorithm, registered here by config name."""

from algorithms.base import Algorithm, RoundReport
from algorithms.decentralized import Gossip, PushSum
from algorithms.dfedavg import DFedAvg
from algorithms.dfedavgm import DFedAvgM
from algorithms.dfedsam import DFedSAM, DFedSAMMGS
from algorithms.dfedsgpm import DFedSGPM
from algorithms.dfedsgpsm import DFedSGPSM
from algorithms.dfedsgpsm_s import DFedSGPSMS
from algorithms.dpsgd import DPSGD
from algorithms.fedavg import FedAvg
from algorithms.osgp import OSGP
from algorithms.server import Server
from algorithms.sgp import SGP

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (FedAvg, DFedAvg, SGP)}
DECENTRALIZED: tuple[type[Algorithm], ...] = (DPSGD, DFedAvgM, DFedSAM, DFedSAMMGS, OSGP,
                                              DFedSGPM, DFedSGPSM, DFedSGPSMS)
ALGORITHMS.update({cls.name: cls for cls in DECENTRALIZED})

__all__ = ["ALGORITHMS", "Algorithm", "Gossip", "PushSum", "RoundReport", "Server"]
