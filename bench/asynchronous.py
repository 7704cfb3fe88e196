"""Benchmark: the cost of the event engine against the synchronous rounds, per local step.

Real Fashion-MNIST, mnist_2NN (P = 199,210, float32; `--model logreg`, P = 7,850, for 10,000
nodes), one local step of batch 32 a phase (a round), N nodes, the simulated network with a
lognormal jitter of sigma `--jitter` on every compute and transfer time (1 % by default: no
two events of the asynchronous run coincide).
Pairs timed on the same machine in one process:

- `dpsgd` (synchronous D-PSGD) against `adpsgd`, on a random 4-regular graph;
- `sgp` (synchronous SGP) against `async_sgp`, on the directed exponential graph.

For each run: the wall seconds of its rows (the evaluation, done once at the end, not counted;
a synchronous run's network clock is a round callback outside its rows' time, so it is timed
apart, replayed on the same config: "clock s", and "x sync + clock" compares against both),
the local steps done, the wall time per local step, and for the event runs the events (phase
ends and message arrivals), the instants they fell in, the exact windows and the batched
updates (levels) they were processed in (p2pfl/engine/windows.py), events per window and
events per wall second. The first row
is a warm-up and is not counted. Each pair runs on each network model (`--models`: "flow",
messages sharing the nodes' links, and "ideal", each alone on its link), so the table shows what
the flow-level network adds per event. Run on an otherwise idle machine:
`python -m bench.asynchronous [--nodes 100,1000] [--rounds 4] [--models flow,ideal]
[--model mlp]`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import topologies as T
from p2pfl.config import config_from_dict
from p2pfl.engine import run
from p2pfl.engine.builder import build

PAIRS = (("dpsgd", "adpsgd", {"name": "random_regular", "d": 4}),
         ("sgp", "async_sgp", {"name": "exponential", "directed": True}))


def async_config(algorithm: str, topology: dict[str, Any], nodes: int, rounds: int,
                 jitter: float, device: str, model: str = "flow", net: str = "mlp") -> Any:
    """The config of one timed run.

    Parameters
    ----------
    algorithm : its name.
    topology : the [topology] table.
    nodes : N.
    rounds : rounds (marks of the event runs).
    jitter : sigma of the network's lognormal jitter.
    device : "cpu" or "cuda".
    model : the network model, "flow" or "ideal".
    net : the model trained ("mlp", "logreg").

    Returns
    -------
    Config.
    """
    return config_from_dict({
        "seed": 0, "rounds": rounds, "device": device,
        "data": {"name": "fashion_mnist", "num_nodes": nodes, "partition": "iid"},
        "model": {"name": net}, "topology": topology,
        "algorithm": {"name": algorithm, "lr": 0.05, "local_steps": 1, "local_epochs": 0,
                      "batch_size": 32},
        "eval": {"every": rounds, "local_samples": 100},
        "network": {"enabled": True, "jitter": jitter, "model": model}})


def clock_seconds(cfg: Any) -> float:
    """Wall seconds of a synchronous run's network clock over its rounds after the first (what
    its `NetworkTime` callback does each round: `Clock.plan_round`, then `commit`), replayed on
    a fresh build of the config (no faults, as the benchmark's runs have none).

    Parameters
    ----------
    cfg : the run's config.

    Returns
    -------
    float, seconds.
    """
    ctx, _ = build(cfg)
    total = 0.0
    for t in range(cfg.rounds):
        graph = ctx.schedule.at(t)
        begin = time.perf_counter()
        ctx.clock.commit(ctx.clock.plan_round(t, graph, T.Faults.none(ctx.clock.n)))
        total += (time.perf_counter() - begin) if t else 0.0
    return total


def timed(algorithm: str, topology: dict[str, Any], nodes: int, rounds: int, jitter: float,
          device: str, model: str = "flow", net: str = "mlp") -> dict[str, Any]:
    """Run one config and measure it (the first row is not counted).

    Parameters
    ----------
    algorithm, topology, nodes, rounds, jitter, device, model, net : as `async_config`.

    Returns
    -------
    dict: algorithm, model, net, nodes, rows, steps, wall_s, clock_s (a synchronous run's
    clock, else None), ms_per_step, events, instants, windows, batches, events_per_s.
    """
    cfg = async_config(algorithm, topology, nodes, rounds, jitter, device, model, net)
    with tempfile.TemporaryDirectory() as out:
        history = run(cfg, Path(out) / "run", figures=False)
    rows = history[1:]
    wall = sum(r["wall_s"] for r in rows)
    if "steps_mean" in history[-1]:
        steps = nodes * (history[-1]["steps_mean"] - history[0]["steps_mean"])
    else:
        steps = nodes * len(rows)
    clock = clock_seconds(cfg) if "events" not in history[-1] else None
    events = sum(r.get("events", 0) for r in rows)
    instants = sum(r.get("instants", 0) for r in rows)
    windows = sum(r.get("windows", 0) for r in rows)
    batches = sum(r.get("batches", 0) for r in rows)
    return {"algorithm": algorithm, "model": model, "net": net, "nodes": nodes,
            "rows": len(rows), "steps": steps,
            "wall_s": wall, "clock_s": clock, "ms_per_step": 1e3 * wall / steps,
            "events": events,
            "instants": instants, "windows": windows, "batches": batches,
            "events_per_s": events / wall if events else None}


def table(results: list[dict[str, Any]]) -> str:
    """A markdown table of `timed` results, each event run against the synchronous run before it.

    Parameters
    ----------
    results : `timed` dicts, each synchronous run followed by its asynchronous one.

    Returns
    -------
    str.
    """
    lines = ["| algorithm | network | model | N | local steps | wall s | clock s | "
             "ms / local step | x sync | x sync + clock | events | windows | batches | "
             "events / window | events / s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    sync = None
    for r in results:
        clock = f"{r['clock_s']:.2f}" if r["clock_s"] is not None else ""
        if r["events_per_s"] is None:
            sync, ratio, whole = r, "1", "1"
        elif sync:
            ratio = f"{r['ms_per_step'] / sync['ms_per_step']:.2f}"
            with_clock = (sync["wall_s"] + sync["clock_s"]) / sync["steps"]
            whole = f"{r['wall_s'] / r['steps'] / with_clock:.2f}"
        else:
            ratio = whole = ""
        events = (f"{r['events']:,} | {r['windows']:,} | {r['batches']:,} | "
                  f"{r['events'] / max(r['windows'], 1):,.0f}") if r["events"] else " | | | "
        rate = f"{r['events_per_s']:,.0f}" if r["events_per_s"] else ""
        lines.append(f"| {r['algorithm']} | {r['model']} | {r['net']} | {r['nodes']:,} | "
                     f"{r['steps']:,.0f} | {r['wall_s']:.2f} | {clock} | "
                     f"{r['ms_per_step']:.3f} | {ratio} | {whole} | {events} | {rate} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Time the pairs at each size; print the table and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,1000", help="comma-separated N")
    parser.add_argument("--rounds", type=int, default=4, help="rounds (marks), the first a "
                        "warm-up")
    parser.add_argument("--jitter", type=float, default=0.01)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default="", help="comma-separated algorithms of PAIRS")
    parser.add_argument("--models", default="flow,ideal", help="comma-separated network models "
                        "(each pair on each)")
    parser.add_argument("--model", default="mlp", choices=("mlp", "logreg"),
                        help="the model trained")
    args = parser.parse_args()
    only = {a for a in args.only.split(",") if a}
    results = []
    for nodes in (int(n) for n in args.nodes.split(",")):
        for sync, event, topology in PAIRS:
            for model in args.models.split(","):
                for name in (sync, event):
                    if not only or name in only:
                        results.append(timed(name, topology, nodes, args.rounds, args.jitter,
                                             args.device, model, args.model))
                        print(json.dumps(results[-1]), flush=True)
    print(table(results), end="")


if __name__ == "__main__":
    main()
