"""Shared fixtures: small synthetic configs that run in well under a second per round."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from p2pfl.config import Config, config_from_dict, declared_options
from p2pfl.options import common_default

TIME_KEYS = ("wall_s", "eval_s")  # metrics that measure the machine, not the run
LONG_FUZZ = os.environ.get("P2PFL_FUZZ") == "1"  # `make fuzz`: the fuzz suites' long budgets


def fuzz_budget(normal: int, long: int) -> int:
    """How many cases a fuzz test tries: `normal` in the test run, `long` under `make fuzz`."""
    return long if LONG_FUZZ else normal


def strip_times(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric records without their wall-clock keys (what equal runs agree on); a NaN becomes
    the string "nan", so that two records with NaN in the same place compare equal."""
    return [{k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()
             if k not in TIME_KEYS} for r in records]


def small_config(**overrides: Any) -> Config:
    """A synthetic-data config; keyword names use '__' for '.', e.g. algorithm__lr=0.1."""
    raw: dict[str, Any] = {
        "seed": 3,
        "rounds": 2,
        "device": "cpu",
        "data": {"name": "synthetic", "num_nodes": 6, "partition": "dirichlet", "alpha": 0.5,
                 "synthetic_train": 600, "synthetic_test": 200},
        "model": {"name": "mlp"},
        "topology": {"name": "ring"},
        "algorithm": {"name": "dfedavg", "lr": 0.1, "local_steps": 3, "local_epochs": 0,
                      "batch_size": 16},
        "eval": {"local_samples": 100},
        "engine": {"dtype": "float64"},
    }
    for key, value in overrides.items():
        *parents, leaf = key.split("__")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return config_from_dict(raw)


def tiny_toml(variants: str, topology: str = "ring", rounds: int = 2, every: int = 1,
              extra: str = "") -> str:
    """A TOML experiment on 4 synthetic nodes (2 local steps of batch 8) whose [[compare]]
    tables are `variants`; `extra` adds sections (e.g. "[engine]\ncheckpoint_every = 1")."""
    return f"""seed = 0
rounds = {rounds}
device = "cpu"
[data]
name = "synthetic"
num_nodes = 4
synthetic_train = 200
synthetic_test = 50
[topology]
name = "{topology}"
[algorithm]
local_epochs = 0
local_steps = 2
batch_size = 8
[eval]
every = {every}
local_samples = 20
{extra}
{variants}"""


@pytest.fixture
def make_config():
    return small_config


@pytest.fixture(scope="module")
def one_thread():
    """Tiny float64 problems: intra-op threads only add contention on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def assert_resume_needs_the_same(tmp_path: Any, cfg: Config, key: str, same: Any, other: Any,
                                 missing: str, differs: str) -> None:
    """A run given `same` as the object `key` (2 of cfg's rounds) refuses a resume without it
    (message matching `missing`) and with `other` (`differs`), and resumed with `same` equals
    the uninterrupted run."""
    from p2pfl import engine
    from p2pfl.config import ConfigError, with_overrides
    from p2pfl.report.results import METRICS, read_metrics

    out, whole = tmp_path / "run", tmp_path / "whole"
    engine.run(with_overrides(cfg, {"rounds": 2}), out, **{key: same})
    resumed = engine.read_run_config(out, {"rounds": cfg.rounds})
    with pytest.raises(ConfigError, match=missing):
        engine.run(resumed, out, resume=True)
    with pytest.raises(ConfigError, match=differs):
        engine.run(resumed, out, resume=True, **{key: other})
    engine.run(resumed, out, resume=True, **{key: same})
    engine.run(cfg, whole, **{key: same})
    assert strip_times(read_metrics(out / METRICS)) == strip_times(read_metrics(whole / METRICS))


def option_names(cls: type) -> set[str]:
    """The [algorithm] fields an algorithm class reads (its Options dataclass)."""
    return {f.name for f in dataclasses.fields(cls.Options)}


def every_option(options: Any) -> SimpleNamespace:
    """Every [algorithm] field any algorithm declares, at the value in `options` (a run's
    Options) or else its common default (the shared 0 of rho and momentum, not an algorithm's
    paper's): what a hand-written reference that reads them all needs."""
    return SimpleNamespace(**{k: common_default(f) for k, (f, _) in declared_options().items()}
                           | dataclasses.asdict(options))


def skip_plots(monkeypatch: Any) -> None:
    """Runs without their figures (a run's curves and a comparison's figure): faster tests."""
    from p2pfl.engine import experiment, rundir

    for module in (experiment, rundir):
        monkeypatch.setattr(module, "plot_histories", lambda *args, **kwargs: [])


def wait_mid_round(proc: subprocess.Popen, lines: Callable[[], int], rounds: int) -> int:
    """Wait until `lines()` (metrics lines written) reaches `rounds`, then half a round more (the
    duration of the last round): the process is then inside the next round. Returns the lines
    seen; fails the test if the process ends first."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        count = lines()
        seen.setdefault(count, time.monotonic())
        if count >= rounds:
            previous = seen.get(count - 1, seen[count])
            time.sleep(max(seen[count] - previous, 0.01) / 2)
            return count
        if proc.poll() is not None:
            pytest.fail(f"the run ended before round {rounds}: {proc.stderr.read()}")
        time.sleep(0.002)
    proc.kill()
    pytest.fail(f"the run did not reach round {rounds} in 300 s")


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """The algorithm registry as built in, before and after the test (tests register classes)."""
    from algorithms import ALGORITHMS

    saved = dict(ALGORITHMS)
    yield
    ALGORITHMS.clear()
    ALGORITHMS.update(saved)


def play(algorithm: Any, ctx: Any, t: int, graph: Any) -> Any:
    """Round t of `algorithm` on `graph` with the faults the engine would draw for it."""
    return algorithm.round(ctx, t, graph, ctx.faults(t, graph))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """'fuzz: 267 cli cases, 2 study kills, ...' when fuzz tests ran: each records how many cases
    it tried as a user property named fuzz_<family>."""
    tried: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name.startswith("fuzz_"):
                    tried[name[5:]] = tried.get(name[5:], 0) + int(value)
    if tried:
        terminalreporter.write_line("fuzz: " + ", ".join(
            f"{count} {family.replace('_', ' ')}" for family, count in sorted(tried.items())))
