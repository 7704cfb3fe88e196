"""Which graph for my network and my data: the design command (`p2pfl design CONFIG`).

    import analysis.design as D
    result = D.design_topology(cfg, "runs/design", budget=4, seeds=[0, 1, 2])
    result.pick, result.ranked

1. **Candidates**: the catalogue (analysis.design_candidates: named topologies, the two built
   from the partition, the throughput overlays of an underlay), or `candidates` as
   `analysis.study.run` takes them ({label: spec, table, object or factory}).
2. **Prediction** (analysis.design_predict): each candidate's degree, its simulated round time
   on the config's network and its rounds factor from its metrics; their product is its
   predicted time to the target, in units of a complete graph's rounds. A candidate over the
   degree budget, or one the algorithm cannot use, is left out with a line saying why; the
   `keep` fastest predicted go on.
3. **Short runs** (analysis.halving): successive halving at equal simulated time up to the
   horizon H (`horizon_s`, default: the config's rounds times the median predicted round), in
   OUT/runs (cells of `analysis.study.run`), until one candidate is clearly best or the rungs
   are spent. No rung is shorter than `FIRST_ROUNDS` rounds of the slowest candidate: over the
   first rounds the average model moves alike on every graph (a doubly-stochastic mixing
   keeps the average), so a shorter rung would rank by round time alone.
4. **The target**: `target`, else 0.9 x the best mean accuracy at H over the last rung, floored
   to 0.01 %; without a given target each rung before the last ranks by the seconds to its own
   (0.9 x the best mean accuracy at its horizon).

It writes OUT/design.json and OUT/design.md (analysis.design_report) and the pick as
OUT/topology.toml (+ OUT/topology.edges for a graph given as an object), a [topology] table a
config takes.
Compute is counted in rounds trained (a round of any candidate trains the same local steps);
`exhaustive_rounds` is what a study of every candidate left in (over the budget and the
algorithm's needs, not the prediction) on every seed to H would train.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.design_predict import Prediction
from analysis.halving import Evidence

History = list[dict[str, Any]]
FIRST_ROUNDS = 5  # the shortest rung holds this many rounds of the slowest candidate


@dataclass
class DesignResult:
    """The design's outcome (module docstring): the pick, every candidate that ran best first,
    the evidence and predictions behind the ranking, the pick against the runner-up
    (`analysis.halving.pick_against_runner_up`), and what it cost (rounds trained, against the
    exhaustive study's)."""

    pick: str
    ranked: list[str]
    target: float
    target_note: str
    predictions: dict[str, Prediction]
    evidence: dict[str, Evidence]
    rungs: list[dict[str, Any]]
    skipped: dict[str, str]
    versus: dict[str, Any]  # the pick against the runner-up (analysis.halving)
    rounds_run: int
    exhaustive_rounds: int
    horizon_s: float
    wall_s: float = 0.0
    files: list[Path] = field(default_factory=list)
    entries: dict[str, Any] = field(default_factory=dict)  # label -> its study Entry


@dataclass
class Seeded:
    """What one seed's run needs besides its topology: its config, the partition's class
    counts [n, K] and the nodes' training samples [n]."""

    cfg: Any
    counts: np.ndarray
    sizes: np.ndarray


def _data(cfg: Any, seeds: Sequence[int]) -> tuple[dict[int, Seeded], int, int]:
    """Each seed's config and data, the model's parameters and the data's classes."""
    import torch

    from p2pfl.config import with_overrides
    from p2pfl.core.models import build_model
    from p2pfl.engine.builder import federated_data

    out, shape, classes = {}, None, 0
    for seed in seeds:
        seeded = with_overrides(cfg, {"seed": seed})
        data = federated_data(seeded)
        out[seed] = Seeded(seeded, data.label_counts(), np.asarray(data.sizes))
        shape, classes = data.input_shape, data.num_classes
    with torch.random.fork_rng(devices=[]):
        model = build_model(cfg.model.name, shape, classes)
    return out, sum(p.numel() for p in model.parameters()), classes


def _predict(entry: Any, seeded: dict[int, Seeded], algorithm: Any, num_params: int,
             budget: int | None, gamma: float) -> tuple[Prediction | None, str, Any]:
    """One candidate's prediction (None and why where it is left out) and its first seed's
    schedule."""
    import torch

    from analysis.design_predict import (
        connected_rounds,
        effective_neighbors,
        max_degree,
        round_seconds,
    )
    from analysis.study_measure import cell_schedule, from_factory, measure
    from p2pfl.config import with_overrides
    from p2pfl.engine.builder import network_clock

    rounds, schedules, first, degree = [], [], None, 0
    for s in seeded.values():
        cfg = with_overrides(s.cfg, dict(entry.overrides))  # the cell's config, as the study's
        obj = from_factory(entry.factory, cfg, s.counts) if entry.factory else entry.obj
        if first is None:
            first = measure(cfg, obj, s.counts, gamma)
            if isinstance(first, str):
                return None, first, None
        schedule = cell_schedule(cfg, algorithm, obj, s.counts)[0]
        degree = max(max_degree(schedule), degree)  # over every seed's (a partition's graph)
        if budget is not None and degree > budget:
            return None, f"degree {degree} is over the budget of {budget}", None
        schedules.append(schedule)
        clock = network_clock(cfg, algorithm, schedule.n, s.sizes, num_params,
                              getattr(torch, cfg.engine.dtype))
        rounds.append(round_seconds(clock, schedule))
    neff, note = effective_neighbors(first, schedules[0], algorithm.mixing, gamma)
    return (Prediction(degree, float(np.mean(rounds)), min(rounds), neff, note,
                       first.get("heterogeneity"), connected_rounds(schedules[0])), "",
            schedules[0])


def common_fields(cfg: Any) -> dict[str, Any]:
    """The config's [topology] fields that every topology has (the union window and the
    faults) where they differ from their defaults, as dotted overrides: the pick's file keeps
    them. (`selection` is random_out's, resolved from the algorithm when a config loads.)

    Parameters
    ----------
    cfg : the experiment's config.

    Returns
    -------
    dict {"topology.<field>": value}.
    """
    from p2pfl.config.sections import COMMON, TopologyConfig

    default = TopologyConfig()
    return {f"topology.{k}": getattr(cfg.topology, k) for k in COMMON
            if k not in ("name", "selection")
            and getattr(cfg.topology, k) != getattr(default, k)}


def fewest_rounds(cfg: Any, prediction: Prediction) -> int:
    """The fewest rounds a candidate's run has: two evaluations, and the rounds its union graph
    takes to be strongly connected (a shorter run is refused).

    Parameters
    ----------
    cfg : the experiment's config.
    prediction : the candidate's.

    Returns
    -------
    int.
    """
    return max(2 * cfg.eval.every, prediction.connected_rounds)


def _catalogue(cfg: Any, algorithm: Any, budget: int | None, num_params: int,
               sizes: np.ndarray) -> dict[str, Any]:
    """The catalogue's candidates for `cfg`: the overlays weigh a message's bits and a round's
    mean local phase."""
    import torch

    from analysis.design_candidates import catalogue
    from p2pfl.core.federated import steps_per_node

    a = cfg.algorithm
    steps = steps_per_node(sizes, a.batch_size, a.local_epochs, a.local_steps, a.last_batch)
    bits = 8 * algorithm.message_bytes(num_params, getattr(torch, cfg.engine.dtype))
    return catalogue(cfg, algorithm.mixing, budget, bits,
                     float(np.mean(steps)) * cfg.network.step_s)


def _study(cfg: Any, out: Path, progress: bool, echo: Callable[[str], None]
           ) -> Callable[[dict[str, Any], list[int]], dict[tuple[str, int], History]]:
    """The halving's runner: a study of the given cells in OUT/runs."""
    from analysis.study import run as run_study

    def runner(cells: dict[str, Any], seeds: list[int]) -> dict[tuple[str, int], History]:
        result = run_study(cfg, cells, out / "runs", seeds=seeds, progress=progress, echo=echo,
                           figures=False)
        out_runs = {(label, seed): history
                    for (_, label, seed), history in result.histories.items()}
        for row in result.rows:  # a diverged run has no accuracy from its last record on
            if row["status"].startswith("diverged") and out_runs.get(key := (row["label"],
                                                                             row["seed"])):
                last = out_runs[key][-1]
                out_runs[key] = [*out_runs[key], {"round": last["round"], "test_acc": math.nan,
                                                  "sim_time_s": last.get("sim_time_s", 0.0)}]
        return out_runs

    return runner


def design_topology(cfg: Any, out_dir: str | Path, *, budget: int | None = None,
                    target: float | None = None, seeds: Sequence[int] | None = None,
                    candidates: Mapping[str, Any] | None = None, keep: int = 6, eta: int = 3,
                    rungs: int = 3, horizon_s: float | None = None, gamma: float = 0.9,
                    progress: bool = False, echo: Callable[[str], None] = print
                    ) -> DesignResult:
    """Design the topology for `cfg`'s network and data (module docstring).

    Parameters
    ----------
    cfg : the experiment's config, [network] enabled, a decentralized algorithm.
    out_dir : the design's folder (OUT/runs holds its runs; a rerun continues them).
    budget : the most neighbours a node may send to or receive from in a round; None: no limit.
    target : the test accuracy to reach, in (0, 1]; None: module docstring.
    seeds : the seeds (default: cfg.seed and the next two).
    candidates : {label: topology} instead of the catalogue.
    keep : the most candidates that run, the fastest predicted.
    eta : a rung keeps 1 / eta of its candidates and the next runs eta times longer.
    rungs : rungs of the halving.
    horizon_s : H, simulated seconds of the last rung; None: the config's rounds times the
        median predicted round.
    gamma : the decay of the effective number of neighbours.
    progress : progress bars.
    echo : prints the design's lines.

    Returns
    -------
    DesignResult.

    Raises
    ------
    ConfigError
        naming what is refused: [network] off, a centralized algorithm, a bad argument, no
        candidate left.
    """
    from algorithms import ALGORITHMS, Asynchronous
    from analysis.design_candidates import write_topology
    from analysis.design_predict import rank_predictions
    from analysis.design_report import write_design
    from analysis.halving import (
        final_ranking,
        final_target,
        pick_against_runner_up,
        rescore,
        rounds_to,
        run_rungs,
        rung_plan,
    )
    from analysis.study_measure import check_gamma
    from analysis.study_spec import check_seeds, check_target, study_entries
    from p2pfl.config import ConfigError

    began = time.perf_counter()
    if not cfg.network.enabled:
        raise ConfigError("network.enabled", "the design compares simulated time to the target:"
                          " set [network] enabled = true")
    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    if algorithm.mixing == "server" or isinstance(algorithm, Asynchronous):
        kind = "centralized (the star)" if algorithm.mixing == "server" else "asynchronous"
        raise ConfigError("algorithm.name", f"{algorithm.name} is {kind}; the design picks a "
                          "graph for a synchronous decentralized algorithm")
    if cfg.network.horizon_s > 0:
        raise ConfigError("network.horizon_s", "the design sets each run's length itself "
                          "(--horizon); remove network.horizon_s")
    if horizon_s is not None and not (math.isfinite(horizon_s) and horizon_s > 0):
        raise ConfigError("horizon_s", f"must be a finite number of simulated seconds > 0, got "
                          f"{horizon_s!r}")
    target, gamma = check_target(target, "target"), check_gamma(gamma, "gamma")
    for name, value, low in (("budget", budget, 1), ("keep", keep, 2), ("eta", eta, 2),
                             ("rungs", rungs, 1)):
        if value is not None and (not isinstance(value, int) or value < low):
            raise ConfigError(name, f"must be an integer >= {low}, got {value!r}")
    seeds = check_seeds(list(seeds) if seeds is not None else [cfg.seed + i for i in range(3)],
                        "seeds")
    out = Path(out_dir)
    seeded, num_params, classes = _data(cfg, seeds)
    if candidates is None:
        candidates = _catalogue(cfg, algorithm, budget, num_params, seeded[seeds[0]].sizes)
    entries = {e.label: e for e in study_entries(candidates)}
    predictions, skipped, schedules = {}, {}, {}
    for label, entry in entries.items():
        prediction, why, schedule = _predict(entry, seeded, algorithm, num_params, budget, gamma)
        if prediction is None:
            skipped[label] = why
            echo(f"design: leaving out {label}: {why}")
        else:
            predictions[label], schedules[label] = prediction, schedule
    if len(predictions) < 2:
        raise ConfigError("design", f"{len(predictions)} candidate(s) left, at least 2 needed"
                          + (f" (budget {budget})" if budget is not None else ""))
    best_first = rank_predictions(predictions, cfg.data.num_nodes, classes)
    running = best_first[:keep]
    for label in best_first[keep:]:
        skipped[label] = f"predicted slower than the {keep} kept"
    horizon = horizon_s or cfg.rounds * float(np.median([predictions[k].round_s
                                                          for k in running]))
    least = FIRST_ROUNDS * max(predictions[k].round_s for k in running)
    if horizon < least:
        echo(f"design: horizon {horizon:.4g} s raised to {least:.4g} s, {FIRST_ROUNDS} rounds "
             "of the slowest candidate")
        horizon = least
    plan = rung_plan(horizon, rungs, eta, seeds, least)
    fewest = {k: fewest_rounds(cfg, p) for k, p in predictions.items()}
    found, histories, rung_log, clear = run_rungs(
        plan, {k: entries[k] for k in running},
        {k: predictions[k].fastest_round_s for k in running}, eta, fewest,
        _study(cfg, out, progress, echo), target, echo)
    last = rung_log[-1]["ranked"]
    value, note = final_target(found, last, target)
    rescore(found, histories, value)
    reached = math.isfinite(value)
    ranked = final_ranking(rung_log, found, reached)
    versus = pick_against_runner_up(rung_log, ranked, histories, clear)
    result = DesignResult(
        ranked[0], ranked, value, note, predictions, found, rung_log, skipped, versus,
        rounds_run=sum(max((r["round"] for r in h), default=0) for h in histories.values()),
        exhaustive_rounds=len(seeds) * sum(max(fewest[k], rounds_to(horizon, p.fastest_round_s))
                                           for k, p in predictions.items()),
        horizon_s=horizon, entries={k: entries[k] for k in predictions})
    pick = ranked[0]
    result.wall_s = time.perf_counter() - began
    result.files += write_design(out, result)
    for stale in ("topology.toml", "topology.edges"):  # an earlier design's pick
        (out / stale).unlink(missing_ok=True)
    try:
        result.files += write_topology(out, pick, schedules[pick],
                                       {**common_fields(cfg), **entries[pick].overrides})
    except ValueError as err:
        echo(f"design: no topology file: {err}")
    return result

