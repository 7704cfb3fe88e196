"""p2pfl: a vectorized engine for decentralized and federated learning over graphs.

    cfg = p2pfl.load_config("configs/demo.toml")
    history = p2pfl.run(cfg)          # per-round metrics, also written to the run directory
"""

from p2pfl.config import Config, ConfigError, load_config, with_overrides
from p2pfl.engine import DivergenceError, run, run_compare

__version__ = "0.1.0"

__all__ = ["Config", "ConfigError", "DivergenceError", "load_config", "run", "run_compare",
           "with_overrides"]
