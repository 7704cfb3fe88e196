"""p2pfl: a vectorized engine for decentralized and federated learning over graphs.

    cfg = p2pfl.load_config("configs/demo.toml")
    history = p2pfl.run(cfg)          # per-round metrics, also written to the run directory
    p2pfl.run(cfg, "runs/mine", topology=my_digraph, model=my_module, callbacks=[MyMetric()])
"""

from typing import Any

from p2pfl.callbacks import Callback, RoundEnd, StopRun
from p2pfl.config import Config, ConfigError, load_config, with_overrides

__version__ = "0.1.0"

_ENGINE_NAMES = ("DivergenceError", "run", "run_compare")

__all__ = ["Callback", "Config", "ConfigError", "RoundEnd", "StopRun", "load_config",
           "with_overrides", *_ENGINE_NAMES]


def __getattr__(name: str) -> Any:
    """`run`, `run_compare` and `DivergenceError` come from `p2pfl.engine` on first use: the engine
    imports `algorithms`, which imports p2pfl's modules, so an eager import here would make
    `import algorithms` (before p2pfl) circular."""
    if name in _ENGINE_NAMES:
        from p2pfl import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'p2pfl' has no attribute {name!r}")
