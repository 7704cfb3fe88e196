"""FL algorithms: one module per algorithm, registered here by config name.

An algorithm of one's own is a subclass of a round kind (`Gossip`, `PushSum`, `Server`) with a
`name`; `@register` makes that name usable in configs (docs/extending.md).
"""

import dataclasses
import inspect

from algorithms.adpsgd import ADPSGD
from algorithms.async_sgp import AsyncSGP
from algorithms.asynchronous import Asynchronous
from algorithms.base import Algorithm, RoundReport
from algorithms.choco import Choco
from algorithms.decentralized import Gossip, PushSum
from algorithms.dfedavg import DFedAvg
from algorithms.dfedavgm import DFedAvgM
from algorithms.dfedsam import DFedSAM, DFedSAMMGS
from algorithms.dfedsgpm import DFedSGPM
from algorithms.dfedsgpsm import DFedSGPSM
from algorithms.dfedsgpsm_s import DFedSGPSMS
from algorithms.dpsgd import DPSGD
from algorithms.dsgt import DSGT
from algorithms.fedavg import FedAdam, FedAvg, FedProx, FedSAM
from algorithms.fedbuff import FedBuff
from algorithms.fedcm import FedCM, MoFedSAM
from algorithms.feddyn import FedDyn, FedSMOO, FedSpeed
from algorithms.fedfsa import FedFSA
from algorithms.fedgloss import FedGloSS, NaiveFedGloSS
from algorithms.fedgmt import FedGMT
from algorithms.fedlesam import FedLESAM, FedLESAMD, FedLESAMS
from algorithms.push_diging import PushDIGing
from algorithms.push_pull import PushPull
from algorithms.scaffold import FedGamma, Scaffold
from algorithms.server import Server
from algorithms.sgp import OSGP, SGP
from p2pfl.options import AlgorithmOptions, common_default

DECENTRALIZED: tuple[type[Algorithm], ...] = (
    DPSGD, DFedAvg, DFedAvgM, DFedSAM, DFedSAMMGS, SGP, OSGP, DFedSGPM, DFedSGPSM, DFedSGPSMS,
    DSGT, PushDIGing, PushPull, Choco,
)
CENTRALIZED: tuple[type[Server], ...] = (
    FedAvg, FedProx, FedAdam, FedCM, Scaffold, FedDyn, FedSAM, MoFedSAM, FedGamma, FedSMOO,
    FedSpeed, FedLESAM, FedLESAMS, FedLESAMD, FedGMT, FedGloSS, NaiveFedGloSS, FedFSA,
)
ASYNCHRONOUS: tuple[type[Asynchronous], ...] = (ADPSGD, AsyncSGP, FedBuff)  # event by event
ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in
                                          DECENTRALIZED + CENTRALIZED + ASYNCHRONOUS}
MIXINGS = ("doubly_stochastic", "column_stochastic", "push_pull", "server")


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Make `cls` runnable as ``[algorithm] name = cls.name`` (a class decorator).

    A field at its default is dropped for the algorithms that do not declare it, so every
    declaration of an option field must agree on its common default and limits (the default
    itself may be an algorithm's paper's, p2pfl.options.paper_default).

    Parameters
    ----------
    cls : a concrete subclass of Gossip, PushSum or Server with a class attribute ``name`` (an
        identifier) and a dataclass ``Options``.

    Returns
    -------
    type, `cls` itself, now in ALGORITHMS.

    Raises
    ------
    TypeError
        for a class that is not a complete Algorithm (no Algorithm subclass, no identifier
        ``name``, an unknown ``mixing``, an abstract method left, ``Options`` not a dataclass
        subclass of AlgorithmOptions).
    ValueError
        for a name another class holds, and an option field declared with another default or
        limits than elsewhere.
    """
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"expected a subclass of algorithms.Gossip, PushSum or Server, got {cls!r}")
    path = f"{cls.__module__}.{cls.__qualname__}"
    name, mixing = getattr(cls, "name", None), getattr(cls, "mixing", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"{path} needs a class attribute `name` (an identifier), got {name!r}")
    if mixing not in MIXINGS:
        raise TypeError(f"{path}.mixing must be one of {', '.join(MIXINGS)} (subclass Gossip, "
                        f"PushSum or Server), got {mixing!r}")
    if inspect.isabstract(cls):
        raise TypeError(f"{path} leaves {', '.join(sorted(cls.__abstractmethods__))} abstract")
    if not (dataclasses.is_dataclass(cls.Options) and issubclass(cls.Options, AlgorithmOptions)):
        raise TypeError(f"{path}.Options must be a @dataclass subclass of its parent's Options")
    held = ALGORITHMS.get(name)
    if held is not None and held is not cls and (
            f"{held.__module__}.{held.__qualname__}" != path
            or held.__module__.split(".")[0] == "algorithms"):
        raise ValueError(f"the algorithm name {name!r} is taken by {held.__module__}."
                         f"{held.__qualname__}: give {path} its own name")
    for f in dataclasses.fields(cls.Options):
        for other in ALGORITHMS.values():
            same = {g.name: g for g in dataclasses.fields(other.Options)}.get(f.name)
            if same is not None and _declared(same) != _declared(f):
                raise ValueError(f"{path}.Options declares {f.name} unlike {other.name} "
                                 f"(default {common_default(f)!r} vs {common_default(same)!r}, "
                                 "or other limits): inherit it, give it a paper's default with "
                                 "p2pfl.options.paper_default, or give the new field its own "
                                 "name")
    ALGORITHMS[name] = cls
    return cls


def _declared(f: dataclasses.Field) -> tuple[object, dict[str, object]]:
    """What every declaration of an option field shares: its common default and limits."""
    limits = {k: v for k, v in f.metadata.items() if k not in ("source", "common")}
    return common_default(f), limits


__all__ = ["ALGORITHMS", "ASYNCHRONOUS", "CENTRALIZED", "DECENTRALIZED", "Algorithm",
           "Asynchronous", "Gossip", "PushSum", "RoundReport", "Server", "register"]
