"""The run loop: config -> (data, topology schedule, algorithm, population) -> rounds -> results.

Each round: the schedule gives the graph of round t, the algorithm runs its local phase and its
communication over it, then the engine evaluates, logs one line of `metrics.jsonl` and moves on.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

import analysis as A
import topologies as T
from algorithms import ALGORITHMS, Algorithm
from p2pfl.comm import LocalComm
from p2pfl.config import Config, ConfigError, variant_overrides, with_overrides
from p2pfl.context import RunContext
from p2pfl.data import DatasetNotFoundError, find_dataset_dir, load_dataset, partition
from p2pfl.federated import FederatedData
from p2pfl.local import VectorizedTrainer
from p2pfl.metrics import consensus_distance, evaluate
from p2pfl.models import build_model, stacked_forward
from p2pfl.plots import plot_histories
from p2pfl.population import Population
from p2pfl.reference import LoopTrainer
from p2pfl.results import append_jsonl, write_json_atomic
from p2pfl.seeding import numpy_rng, stream_seed

History = list[dict[str, Any]]
CPU_CHUNK = 10  # nodes per chunk on CPU: all K steps of a chunk stay in cache (perf-notes.md)
CONNECTIVITY_WINDOW = 20  # rounds of a time-varying schedule checked for joint connectivity


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss; the message names the round and the nodes."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "'cuda' requested but torch sees no CUDA device")
    return torch.device(name)


def _load_data(cfg: Config, device: torch.device, dtype: torch.dtype) -> FederatedData:
    d = cfg.data
    root = d.root or None
    if d.name != "synthetic":
        try:
            find_dataset_dir(d.name, root)
        except DatasetNotFoundError as err:
            raise ConfigError("data.name", str(err)) from None
    dataset = load_dataset(d.name, root, seed=stream_seed(cfg.seed, "partition"),
                           synthetic_train=d.synthetic_train, synthetic_test=d.synthetic_test)
    try:
        indices = partition(dataset.y_train.numpy(), d.num_nodes, d.partition, alpha=d.alpha,
                            classes_per_node=d.classes_per_node,
                            seed=stream_seed(cfg.seed, "partition"))
    except ValueError as err:
        raise ConfigError("data", str(err)) from None
    return FederatedData(dataset, torch.as_tensor(indices), device, dtype)


def _build_schedule(cfg: Config, algorithm: Algorithm) -> T.Schedule:
    topo, n = cfg.topology, cfg.data.num_nodes
    if algorithm.mixing == "server":
        if topo.name != "star":
            raise ConfigError("topology.name", f"{algorithm.name} is centralized and runs on "
                              f"'star' (hub = server), got {topo.name!r}")
        n += 1
    params = {k: v for k, v in vars(topo).items() if k not in ("name", "link_drop", "node_drop")}
    try:
        return T.build_schedule(topo.name, n, **params, seed=stream_seed(cfg.seed, "topology"))
    except T.ParameterError as err:
        name = "data.num_nodes" if err.name == "n" else f"topology.{err.name}"
        raise ConfigError(name, err.message) from None
    except ValueError as err:
        raise ConfigError("topology", str(err)) from None


def check_topology(algorithm: Algorithm, schedule: T.Schedule, rounds: int) -> None:
    """Refuse a topology whose mixing matrix or connectivity the algorithm cannot work with."""
    if algorithm.mixing == "server":
        return
    graph = schedule.at(0)
    try:
        if algorithm.mixing == "doubly_stochastic":
            T.check_doubly_stochastic(T.doubly_stochastic(graph))
        else:
            T.check_column_stochastic(T.column_stochastic(graph))
    except ValueError as err:
        raise ConfigError("topology", f"{algorithm.name} needs {algorithm.mixing.replace('_', '-')}"
                          f" mixing: {err}") from None
    window = 1 if schedule.period == 1 else min(rounds, schedule.period or CONNECTIVITY_WINDOW)
    if not A.is_strongly_connected(A.union_graph(schedule, 0, window)):
        what = "graph" if window == 1 else f"union of the graphs of rounds 0..{window - 1}"
        raise ConfigError("topology", f"the {what} is not strongly connected: {algorithm.name} "
                          "cannot reach the network average")


def build(cfg: Config) -> tuple[RunContext, Algorithm]:
    """Everything a run needs, validated before any training starts."""
    device = resolve_device(cfg.device)
    dtype = getattr(torch, cfg.engine.dtype)
    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    schedule = _build_schedule(cfg, algorithm)
    check_topology(algorithm, schedule, cfg.rounds)
    data = _load_data(cfg, device, dtype)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(cfg.seed, "init"))
        model = build_model(cfg.model.name, data.input_shape, data.num_classes)
    model = model.to(device=device, dtype=dtype)
    population = Population(model, cfg.data.num_nodes, device, dtype)
    forward = stacked_forward(model)
    if cfg.engine.executor == "loop":
        trainer: VectorizedTrainer | LoopTrainer = LoopTrainer(model, data, cfg.data.num_nodes)
    else:
        chunk = cfg.engine.chunk_size or (CPU_CHUNK if device.type == "cpu" else cfg.data.num_nodes)
        trainer = VectorizedTrainer(forward, data, chunk)
    ctx = RunContext(cfg, device, dtype, data, population, forward, trainer,
                     LocalComm(device, dtype), schedule)
    algorithm.setup(ctx)
    return ctx, algorithm


def _eval_subset(ctx: RunContext) -> tuple[torch.Tensor, torch.Tensor]:
    """The seeded test subset on which every node's own model is evaluated."""
    n_test = len(ctx.data.y_test)
    size = ctx.cfg.eval.local_samples or n_test
    if size >= n_test:
        return ctx.data.x_test, ctx.data.y_test
    idx = numpy_rng(ctx.cfg.seed, "eval").choice(n_test, size=size, replace=False)
    idx = torch.as_tensor(np.sort(idx), device=ctx.device)
    return ctx.data.x_test[idx], ctx.data.y_test[idx]


def _evaluate(ctx: RunContext, algorithm: Algorithm,
              local_eval: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    ev = ctx.cfg.eval
    chunk = ctx.trainer.chunk_size if isinstance(ctx.trainer, VectorizedTrainer) else 1
    average = algorithm.average_model(ctx)
    acc, loss = evaluate(ctx.forward, {k: v.unsqueeze(0) for k, v in average.items()},
                         ctx.data.x_test, ctx.data.y_test, ev.batch_size, 1)
    local = algorithm.local_models(ctx)
    local_acc, _ = evaluate(ctx.forward, local, *local_eval, ev.batch_size, chunk)
    return {"test_acc": acc.item(), "test_loss": loss.item(),
            "test_acc_local_mean": local_acc.mean().item(),
            "test_acc_local_min": local_acc.min().item(),
            "consensus_dist": consensus_distance(local, average)}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-").lower() or "run"


def default_out_dir(cfg: Config) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{cfg.algorithm.name}-{cfg.topology.name}-{stamp}"


def _prepare_out_dir(out_dir: Path) -> None:
    if (out_dir / "metrics.jsonl").exists():
        raise ConfigError("out", f"{out_dir} already holds a run (metrics.jsonl); "
                          "choose another directory")
    out_dir.mkdir(parents=True, exist_ok=True)


def run(cfg: Config, out_dir: str | Path | None = None, progress: bool = False,
        label: str = "") -> History:
    """Run one experiment; per-round metrics are returned and written to `out_dir`."""
    if cfg.compare:
        raise ConfigError("compare", "this config lists [[compare]] variants: use run_compare")
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    ctx, algorithm = build(cfg)
    _prepare_out_dir(out)
    write_json_atomic(out / "config.json", cfg.to_dict())
    local_eval = _eval_subset(ctx)
    bytes_per_value = torch.finfo(ctx.dtype).bits // 8
    history: History = []
    bar = tqdm(total=cfg.rounds, desc=label or cfg.algorithm.name, disable=not progress,
               leave=True, dynamic_ncols=True)
    for t in range(cfg.rounds):
        start = time.perf_counter()
        graph = (ctx.schedule.at(t, algorithm.selection_losses()) if ctx.schedule.needs_losses
                 else ctx.schedule.at(t))
        report = algorithm.round(ctx, t, graph)
        if not torch.isfinite(report.losses).all():
            bad = report.nodes[~torch.isfinite(report.losses)].tolist()
            last = (f"last finite mean loss {history[-1]['train_loss']:.4g}" if history
                    else "no round completed")
            raise DivergenceError(f"round {t + 1}: non-finite training loss at nodes {bad[:10]}"
                                  f"{' ...' if len(bad) > 10 else ''} ({last}); results so far "
                                  f"are in {out}")
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        record: dict[str, Any] = {
            "round": t + 1,
            "lr": algorithm.lr(t),
            "train_loss": report.losses.mean().item(),
            "nodes_trained": len(report.nodes),
            "messages": report.copies_sent,
            "bytes_sent": (report.copies_sent * ctx.population.num_params
                           + report.scalars_sent) * bytes_per_value,
            "wall_s": time.perf_counter() - start,
        }
        record.update(algorithm.metrics(ctx))
        if (t + 1) % cfg.eval.every == 0 or t + 1 == cfg.rounds:
            eval_start = time.perf_counter()
            record.update(_evaluate(ctx, algorithm, local_eval))
            record["eval_s"] = time.perf_counter() - eval_start
        append_jsonl(out / "metrics.jsonl", record)
        history.append(record)
        bar.update(1)
        bar.set_postfix(loss=f"{record['train_loss']:.3f}",
                        acc=f"{record.get('test_acc', math.nan):.3f}")
    bar.close()
    _finish(out, cfg, ctx, algorithm, history)
    return history


def _finish(out: Path, cfg: Config, ctx: RunContext, algorithm: Algorithm,
            history: History) -> None:
    accs = [r["test_acc"] for r in history if "test_acc" in r]
    summary = {
        "algorithm": cfg.algorithm.name,
        "topology": cfg.topology.name,
        "rounds": len(history),
        "device": str(ctx.device),
        "num_params": ctx.population.num_params,
        "final": history[-1],
        "best_test_acc": max(accs),
        "mean_test_acc_last10": float(np.mean(accs[-10:])),
        "total_wall_s": sum(r["wall_s"] for r in history),
        "total_bytes_sent": sum(r["bytes_sent"] for r in history),
    }
    write_json_atomic(out / "summary.json", summary)
    state = {"round": len(history), "population": ctx.population.state_dict(),
             "algorithm": algorithm.state_dict(), "average_model": algorithm.average_model(ctx)}
    tmp = out / ".final.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(out / "final.pt")
    plot_histories({cfg.algorithm.name: history}, out / "curves",
                   title=f"{cfg.algorithm.name} on {cfg.topology.name}")


def run_compare(cfg: Config, out_dir: str | Path | None = None,
                progress: bool = False) -> dict[str, History]:
    """Run every [[compare]] variant (same seed and data) into its own subdirectory of `out_dir`
    and draw them on one comparison figure."""
    if not cfg.compare:
        raise ConfigError("compare", "the config lists no [[compare]] variants")
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    histories: dict[str, History] = {}
    for variant in cfg.compare:
        overrides = variant_overrides(variant)
        label = str(variant.get("label") or ", ".join(f"{k}={v}" for k, v in overrides.items()))
        histories[label] = run(with_overrides(cfg, overrides), out / _slug(label), progress,
                               label)
    d = cfg.data
    split = f"Dirichlet({d.alpha})" if d.partition == "dirichlet" else d.partition
    plot_histories(histories, out / "comparison",
                   title=f"{d.name}, {d.num_nodes} nodes, {split}, {cfg.model.name}")
    write_json_atomic(out / "comparison.json", {
        label: {"final_test_acc": h[-1].get("test_acc"), "rounds": len(h),
                "total_wall_s": sum(r["wall_s"] for r in h)}
        for label, h in histories.items()})
    return histories
