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
from algorithms.fedavg import FedAdam, FedAvg, FedProx, FedSAM
from algorithms.fedcm import FedCM, MoFedSAM
from algorithms.feddyn import FedDyn, FedSMOO, FedSpeed
from algorithms.fedfsa import FedFSA
from algorithms.fedgloss import FedGloSS, NaiveFedGloSS
from algorithms.fedgmt import FedGMT
from algorithms.fedlesam import FedLESAM, FedLESAMD, FedLESAMS
from algorithms.osgp import OSGP
from algorithms.scaffold import FedGamma, Scaffold
from algorithms.server import Server
from algorithms.sgp import SGP

DECENTRALIZED: tuple[type[Algorithm], ...] = (
    DPSGD, DFedAvg, DFedAvgM, DFedSAM, DFedSAMMGS, SGP, OSGP, DFedSGPM, DFedSGPSM, DFedSGPSMS,
)
CENTRALIZED: tuple[type[Server], ...] = (
    FedAvg, FedProx, FedAdam, FedCM, Scaffold, FedDyn, FedSAM, MoFedSAM, FedGamma, FedSMOO,
    FedSpeed, FedLESAM, FedLESAMS, FedLESAMD, FedGMT, FedGloSS, NaiveFedGloSS, FedFSA,
)
ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in DECENTRALIZED + CENTRALIZED}

__all__ = ["ALGORITHMS", "CENTRALIZED", "DECENTRALIZED", "Algorithm", "Gossip", "PushSum",
           "RoundReport", "Server"]
