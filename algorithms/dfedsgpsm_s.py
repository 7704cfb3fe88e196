"""DFedSGPSM-S (Li et al. 2023, Appendix A.1): DFedSGPSM whose nodes choose their
out-neighbours by loss, preferring nodes whose loss differs from their own; f = each node's
latest training loss. The paper's Eq. 2 is lost from its text. Default (`topology.selection`
unset): "loss_softmax", Pr(i picks j) proportional to exp(|f_i - f_j| / temperature), under which
the paper's setting trains. "loss_based", Pr proportional to |f_i - f_j|, starves the nodes whose
loss is near the others' (few senders pick them, their Push-Sum weight shrinks up to 11-fold a
round) and collapsed there (docs/algorithms.md, "Settings that decide stability").

The selection itself is the topology's (`topologies.selection`); the engine passes this
algorithm's `selection_losses()` to the schedule every round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import topologies as T
from algorithms.baselines import Baseline
from algorithms.dfedsgpsm import DFedSGPSM
from p2pfl.context import RunContext
from p2pfl.errors import ConfigError

if TYPE_CHECKING:
    from p2pfl.config import Config


class DFedSGPSMS(DFedSGPSM):
    name = "dfedsgpsm_s"
    source = "DFedSGPSM-S: Li et al. 2023, arXiv 2310.05093, Appendix A.1"
    baselines = (Baseline({"rho": 0.0, "momentum": 0.0}, "OSGP on its loss-selected "
                          "out-neighbours (no SAM ascent, no local momentum)"),
                 Baseline({"rho": 0.0}, "DFedSGPM on its loss-selected out-neighbours (no SAM "
                          "ascent)"),
                 Baseline({"momentum": 0.0}, "local SGP with SAM steps on its loss-selected "
                          "out-neighbours (no local momentum)"))

    @classmethod
    def implied(cls, cfg: Config) -> dict[str, Any]:
        """The algorithm is DFedSGPSM with loss-based selection: on 'random_out' an unset
        `topology.selection` is "loss_softmax"."""
        return {"topology.selection": "loss_softmax"} if cfg.topology.name == "random_out" else {}

    def setup(self, ctx: RunContext) -> None:
        schedule = ctx.schedule
        inner = schedule.schedule if isinstance(schedule, T.UnionWindow) else schedule
        if not isinstance(inner, T.RandomOut):
            raise ConfigError("topology.name", f"{self.name} selects its out-neighbours by loss "
                              f"on 'random_out' (topology.k of them), got a "
                              f"{type(inner).__name__} schedule")
        if not schedule.needs_losses:
            raise ConfigError("topology.selection", f"{self.name} selects its out-neighbours by "
                              "loss: leave topology.selection unset (loss_softmax) or use "
                              "'loss_based'; random selection is plain 'dfedsgpsm'")
        super().setup(ctx)
