"""What an algorithm sees of a run: data, population, trainer, communication, schedule, and the
divergence guard (an algorithm that trains through a trainer of its own installs the guard on it:
`ctx.guard.install(trainer)`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from p2pfl.comm import LocalComm
from p2pfl.config import Config
from p2pfl.federated import FederatedData
from p2pfl.guard import Guard
from p2pfl.local import VectorizedTrainer
from p2pfl.models import StackedForward
from p2pfl.population import Population
from p2pfl.reference import LoopTrainer
from topologies import Schedule


@dataclass
class RunContext:
    cfg: Config
    device: torch.device
    dtype: torch.dtype
    data: FederatedData
    population: Population
    forward: StackedForward
    trainer: VectorizedTrainer | LoopTrainer
    comm: LocalComm
    schedule: Schedule
    guard: Guard

    @property
    def num_nodes(self) -> int:
        return self.population.num_nodes

    def all_nodes(self) -> torch.Tensor:
        return torch.arange(self.num_nodes, device=self.device)
