"""Experiment trackers: round callbacks that send every round's numeric metrics to TensorBoard or
to Weights & Biases, at step = the round (1-based).

    from p2pfl.trackers import TensorBoard, WandB
    p2pfl.run(cfg, "runs/ring", callbacks=[TensorBoard("runs/tb/ring")])
    p2pfl.run(cfg, "runs/ring", callbacks=[WandB(project="topologies", mode="offline")])

Both are optional extras (`pip install 'p2pfl[tensorboard]'` or `'p2pfl[wandb]'`); nothing in
the engine imports this module or those libraries, and a tracker whose library is missing is
refused when it is made, before any round runs. A tracker sees the record as built when it is
called: put it after the callbacks whose metrics it should send. In a distributed run only the
process of rank 0 sends. A tracker adds no metric to the record, so it changes no number of the
run.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from p2pfl.callbacks import Callback, RoundEnd


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a round's record (not `round` itself, which is the step).

    Parameters
    ----------
    record : a round's metrics.

    Returns
    -------
    dict {name: float}.
    """
    return {k: float(v) for k, v in record.items()
            if k != "round" and isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(v)}


def _library(*names: str, extra: str) -> Any:
    """The first of `names` that imports; ImportError naming the extra to install if none."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"this tracker needs {' or '.join(names)}: pip install 'p2pfl[{extra}]'")


class TensorBoard(Callback):
    """Scalars `prefix + metric` into TensorBoard event files under `log_dir` (with
    torch.utils.tensorboard when the tensorboard package is installed, else tensorboardX)."""

    def __init__(self, log_dir: str | Path, prefix: str = "") -> None:
        self.log_dir, self.prefix = str(log_dir), prefix
        self._module = _library("torch.utils.tensorboard", "tensorboardX", extra="tensorboard")
        self._writer: Any = None

    def after_round(self, end: RoundEnd) -> None:
        if end.ctx.comm.rank != 0:
            return None
        if self._writer is None:
            self._writer = self._module.SummaryWriter(log_dir=self.log_dir)
        for key, value in scalars(end.record).items():
            self._writer.add_scalar(self.prefix + key, value, end.t + 1)
        self._writer.flush()
        if end.t + 1 == end.cfg.rounds:
            self._writer.close()
            self._writer = None
        return None

    def __deepcopy__(self, memo: dict) -> TensorBoard:
        return TensorBoard(self.log_dir, self.prefix)  # an open writer is not copied


class WandB(Callback):
    """Metrics into a Weights & Biases run, started at the first round with the run's config
    (`wandb.init(project=..., mode=..., config=cfg, **init)`) and finished after the last.
    `mode`: "offline" (default: files under `dir`, synced later with `wandb sync`), "online" or
    "disabled"."""

    def __init__(self, project: str = "p2pfl", mode: str = "offline", dir: str | None = None,
                 **init: Any) -> None:
        if mode not in ("offline", "online", "disabled"):
            raise ValueError(f"mode must be 'offline', 'online' or 'disabled', got {mode!r}")
        self.project, self.mode, self.dir, self.init = project, mode, dir, init
        self._wandb = _library("wandb", extra="wandb")
        self._run: Any = None

    def after_round(self, end: RoundEnd) -> None:
        if end.ctx.comm.rank != 0:
            return None
        if self._run is None:
            self._run = self._wandb.init(project=self.project, mode=self.mode, dir=self.dir,
                                         config=end.cfg.to_dict(), **self.init)
        self._run.log(scalars(end.record), step=end.t + 1)
        if end.t + 1 == end.cfg.rounds:
            self._run.finish()
            self._run = None
        return None

    def __deepcopy__(self, memo: dict) -> WandB:
        return WandB(self.project, self.mode, self.dir, **self.init)
