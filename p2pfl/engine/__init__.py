"""Running experiments: a config (and objects) built into a run (`build`), its rounds with the
divergence guard, callbacks and checkpoints (`loop`), the run directory (`rundir`, `checkpoint`),
and the entry points `run` and `run_compare` (`experiment`) and `run_stacked` (`stacked`: runs
side by side, their local phases trained as one population)."""

from p2pfl.engine.builder import build, check_topology, resolve_device, schedule_for
from p2pfl.engine.checkpoint import read_run_config
from p2pfl.engine.experiment import run, run_compare, run_stacked
from p2pfl.engine.loop import DivergenceError, RunInterrupted, Runner

__all__ = ["DivergenceError", "RunInterrupted", "Runner", "build", "check_topology",
           "read_run_config", "resolve_device", "run", "run_compare", "run_stacked",
           "schedule_for"]
