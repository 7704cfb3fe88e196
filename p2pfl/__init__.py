"""p2pfl: a vectorized engine for decentralized and federated learning over graphs.

    cfg = p2pfl.load_config("configs/demo.toml")
    history = p2pfl.run(cfg)          # per-round metrics, also written to the run directory
    p2pfl.run(cfg, "runs/mine", topology=my_digraph, model=my_module, callbacks=[MyMetric()])
"""

import importlib
from typing import Any

from p2pfl import _moved

__version__ = "0.1.0"
_moved.install()  # the flat layout's import paths, for one release (p2pfl/_moved.py)

_HOMES = {"Callback": "p2pfl.callbacks", "RoundEnd": "p2pfl.callbacks",
          "StopRun": "p2pfl.callbacks", "CallbackError": "p2pfl.errors",
          "UserCodeError": "p2pfl.errors", "Config": "p2pfl.config",
          "ConfigError": "p2pfl.config",
          "load_config": "p2pfl.config", "with_overrides": "p2pfl.config",
          "DivergenceError": "p2pfl.engine", "run": "p2pfl.engine",
          "run_compare": "p2pfl.engine", "run_stacked": "p2pfl.engine"}

__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    """The public names come from their modules on first use: importing the package (as the
    `p2pfl` command does first) costs nothing, and `import algorithms` before p2pfl is not
    circular (the engine imports `algorithms`, which imports p2pfl's modules)."""
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'p2pfl' has no attribute {name!r}")
