"""FL algorithms: one module per algorithm, registered here by config name."""

from algorithms.base import Algorithm, RoundReport
from algorithms.decentralized import Gossip, PushSum
from algorithms.dfedavg import DFedAvg
from algorithms.fedavg import FedAdam, FedAvg, FedProx, FedSAM
from algorithms.fedcm import FedCM, MoFedSAM
from algorithms.feddyn import FedDyn, FedSMOO, FedSpeed
from algorithms.fedfsa import FedFSA
from algorithms.fedgloss import FedGloSS, NaiveFedGloSS
from algorithms.fedgmt import FedGMT
from algorithms.fedlesam import FedLESAM, FedLESAMD, FedLESAMS
from algorithms.scaffold import FedGamma, Scaffold
from algorithms.server import Server
from algorithms.sgp import SGP

CENTRALIZED: tuple[type[Server], ...] = (
    FedAvg, FedProx, FedAdam, FedCM, Scaffold, FedDyn, FedSAM, MoFedSAM, FedGamma, FedSMOO,
    FedSpeed, FedLESAM, FedLESAMS, FedLESAMD, FedGMT, FedGloSS, NaiveFedGloSS, FedFSA,
)
ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (FedAvg, DFedAvg, SGP)}
ALGORITHMS.update({cls.name: cls for cls in CENTRALIZED})

__all__ = ["ALGORITHMS", "CENTRALIZED", "Algorithm", "Gossip", "PushSum", "RoundReport", "Server"]
