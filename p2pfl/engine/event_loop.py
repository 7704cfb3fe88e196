"""The rows of an asynchronous run: `rounds` are marks on the simulated clock.

A nominal round is what one node at nominal speed takes to do its local steps and send (the
star: the download, the local steps and the upload; `Clock.nominal_s`). Row m (m = 1..rounds) is
written when the simulation has done every instant up to m nominal rounds (p2pfl/engine/events.py),
so the run ends when the clock passes `rounds` nominal rounds. Each row has the usual keys
(`round` is the mark, `lr` the algorithm's `Asynchronous.mark_lr`: a node's m-th phase's step
size, FedBuff's that of the updates added since the previous mark; `train_loss` the mean loss of the
local phases that ended since the previous mark, `nodes_trained` the nodes among them,
`messages` and `bytes_sent` what was sent since), the evaluation on `eval.every` marks, and
`sim_time_s` (m nominal rounds), `steps_min` / `steps_mean` / `steps_max` (local steps done per
node so far), `staleness_s_mean` / `staleness_s_max` (the age of what was mixed into models since
the previous mark: the algorithm says what it measures; absent where nothing was), `events`
(phase ends and message arrivals), `instants` (the simulated instants they fell in), `windows`
and `batches` (the exact windows and batched updates they were processed in).
The loop around it, checkpoints and Ctrl-C are the synchronous `Runner`'s. When the run ends,
the algorithm's line on what it left unapplied (`Asynchronous.left_undone`: FedBuff's updates
still in its buffer) goes to stderr.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from algorithms.asynchronous import Asynchronous
from p2pfl.callbacks import Callback, RoundEnd, call_all
from p2pfl.config import Config
from p2pfl.context import RunContext
from p2pfl.engine.events import EventClock, Simulation
from p2pfl.engine.loop import EVALUATED, Observer, Runner
from p2pfl.engine.network_time import NetworkTime
from p2pfl.engine.rundir import History
from p2pfl.errors import ConfigError, DivergenceError


class EventRunner(Runner):
    """The marks of one built asynchronous run, from where `history` ends to `cfg.rounds`
    (module docstring); everything else is `Runner`'s."""

    unit = "mark"

    def __init__(self, cfg: Config, out: Path, ctx: RunContext, algorithm: Asynchronous,
                 history: History | None = None, progress: bool | Observer = False,
                 label: str = "", callbacks: list[Callback] | None = None,
                 figures: bool = True) -> None:
        if cfg.engine.on_divergence != "stop":
            raise ConfigError("engine.on_divergence", f"{algorithm.name} runs event by event: "
                              "a diverged node cannot be re-run alone; use 'stop'")
        super().__init__(cfg, out, ctx, algorithm, history, progress, label, callbacks, figures)
        self.simulation = Simulation(ctx, algorithm)
        self.nominal_s = ctx.clock.nominal_s(algorithm.transfers)
        self.callbacks = [EventClock(self.simulation) if isinstance(c, NetworkTime) else c
                          for c in self.callbacks]  # its state in the checkpoint, in its place

    def run(self) -> History:
        """The marks (`Runner.run`), then the algorithm's line on what the end left unapplied
        (`Asynchronous.left_undone`), on stderr.

        Returns
        -------
        History, the rows.
        """
        history = super().run()
        note = self.algorithm.left_undone(self.ctx)
        if note and self.root:
            print(f"p2pfl: {self.label + ': ' if self.label else ''}{note}", file=sys.stderr)
        return history

    def checkpoint(self) -> None:
        """`Runner.checkpoint`, the rows first brought up to date (`Asynchronous.current`, what a
        later read shows bit for bit), so that the checkpoint and final.pt hold the same rows."""
        self.algorithm.current(self.ctx)
        super().checkpoint()

    def _round(self, t: int, start: float) -> dict[str, Any]:
        ctx, algorithm = self.ctx, self.algorithm
        self.guard.begin_round([])
        self.simulation.advance((t + 1) * self.nominal_s)
        algorithm.mark(ctx, self.simulation)
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        events = self.simulation.record()
        nodes, losses = events.pop("_nodes"), events.pop("_losses")
        copies, scalars = events.pop("_copies"), events.pop("_scalars")
        self._check(t)
        if not len(losses):  # no phase ended since the last mark: every node's latest
            ended = np.isfinite(self.simulation.phases.loss)
            losses = self.simulation.phases.loss[ended]
        record: dict[str, Any] = {
            "round": t + 1,
            "lr": algorithm.mark_lr(t),
            "train_loss": float(np.mean(losses)) if len(losses) else math.nan,
            "nodes_trained": len(np.unique(nodes)),
            "messages": copies,
            "bytes_sent": copies * ctx.population.num_params * self.bytes_per_value + scalars * 8,
            "wall_s": time.perf_counter() - start,
            "sim_time_s": (t + 1) * self.nominal_s,
            **events,
        }
        record.update(algorithm.metrics(ctx))
        end = RoundEnd(t, record, self.history, ctx, algorithm, cfg=self.cfg)
        self.stopped = call_all(self.callbacks, end, record)
        unfit = [k for k in EVALUATED if not math.isfinite(record.get(k, 0.0))]
        if unfit:
            raise DivergenceError(self._divergence_message(
                t, [], f"non-finite {unfit[0]} in evaluation", []))
        return record

    def _check(self, t: int) -> None:
        """Refuse to go on when a local phase went non-finite (or past engine.max_loss)."""
        guard = self.guard
        for record, what in ((guard.bad_loss, "training loss"), (guard.bad_params,
                                                                 "parameters")):
            if record.any():
                bad = record.nonzero().squeeze(1).tolist()
                limit = f" or above engine.max_loss = {guard.max_loss:g}" if guard.max_loss else ""
                raise DivergenceError(self._divergence_message(
                    t, bad, f"non-finite {what}{limit} in a local phase", []))
