"""The simulated clock as a round callback: each round's record gets its simulated time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from p2pfl.callbacks import Callback, RoundEnd, StopRun, horizon_reached
from p2pfl.scale.network import Clock


class NetworkTime(Callback):
    """Advances the run's `Clock` by the round as it ran and adds `sim_time_s` (when the last
    node finished the round, seconds since the start), `sim_spread_s` (last minus first node),
    `sim_wait_s` (mean time a node waited for messages) and, with overlap, `messages_late`. The
    clock is part of the checkpoint through this callback's state."""

    def __init__(self, clock: Clock, server: bool) -> None:
        self.clock, self.server = clock, server

    def after_round(self, end: RoundEnd) -> Mapping[str, float]:
        if self.server:  # graph node 0 is the server, client c is graph node c + 1
            timing = self.clock.plan_server(end.t, end.report.nodes.cpu().numpy() + 1)
        else:
            timing = self.clock.plan_round(end.t, end.graph, end.faults)
        return self.clock.commit(timing)

    def state_dict(self) -> dict[str, Any]:
        return self.clock.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.clock.load_state_dict(state)


class Horizon(Callback):
    """Ends a run with a clock at the first round (mark) whose `sim_time_s` reaches [network]
    horizon_s; that round is evaluated (`RoundEnd.evaluating`)."""

    def after_round(self, end: RoundEnd) -> None:
        if horizon_reached(end.cfg, end.record):
            raise StopRun(f"simulated time {end.record['sim_time_s']:.4g} s reached "
                          f"network.horizon_s = {end.cfg.network.horizon_s:g}")
