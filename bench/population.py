"""Alias kept for old scripts: `python -m bench.population` = `p2pfl bench --only
mlp-100` (100 nodes, mlp, vectorized against the per-node loop; other options pass through)."""

from __future__ import annotations

import sys

from bench.suite import main

if __name__ == "__main__":
    sys.exit(main(["--only", "mlp-100", *sys.argv[1:]]))
