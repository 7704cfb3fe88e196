"""Running experiments: a config (and objects) built into a run (`build`), its rounds with the
divergence guard, callbacks and checkpoints (`loop`), the run directory (`rundir`, `checkpoint`),
and the entry points `run`, `run_compare` and `run_stacked` (`experiment`; `stacked`: runs side
by side, their local phases trained as one population)."""

from p2pfl.engine.builder import build, class_counts, resolve_device
from p2pfl.engine.checkpoint import read_run_config
from p2pfl.engine.experiment import run, run_compare, run_stacked
from p2pfl.engine.loop import DivergenceError, RunInterrupted, Runner
from p2pfl.engine.topology import check_topology, needs_class_counts, schedule_for

__all__ = ["DivergenceError", "RunInterrupted", "Runner", "build", "check_topology",
           "class_counts", "needs_class_counts", "read_run_config", "resolve_device", "run",
           "run_compare", "run_stacked", "schedule_for"]
