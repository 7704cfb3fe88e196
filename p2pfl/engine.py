"""The run loop: config -> (data, topology schedule, algorithm, population) -> rounds -> results.

Each round: the schedule gives the graph of round t, the algorithm runs its local phase and its
communication over it (under the divergence guard), then the engine evaluates, logs one line of
`metrics.jsonl`, checkpoints when due and moves on. docs/reliability.md says what is guaranteed.
"""

from __future__ import annotations

import copy
import math
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

import topologies as T
from algorithms import ALGORITHMS, Algorithm, RoundReport
from p2pfl.checkpoint import (
    CHECKPOINT,
    check_resumable,
    load_checkpoint,
    read_run_config,
    restore,
    save_checkpoint,
)
from p2pfl.comm import LocalComm
from p2pfl.config import OBJECT, Config, ConfigError, variant_overrides, with_overrides
from p2pfl.context import RunContext
from p2pfl.data import Dataset, DatasetNotFoundError, find_dataset_dir, load_dataset, partition
from p2pfl.federated import FederatedData
from p2pfl.guard import Guard, cut_links, finite_rows
from p2pfl.local import VectorizedTrainer
from p2pfl.memory import plan_chunks
from p2pfl.metrics import consensus_distance, evaluate
from p2pfl.models import build_model, stacked_forward
from p2pfl.objects import Parts, as_partition, resolve
from p2pfl.plots import plot_histories
from p2pfl.population import Params, Population
from p2pfl.reference import LoopTrainer
from p2pfl.results import (
    METRICS,
    append_jsonl,
    atomic_file,
    rewrite_metrics,
    write_json_atomic,
)
from p2pfl.seeding import numpy_rng, stream_seed

History = list[dict[str, Any]]
CONNECTIVITY_WINDOW = 20  # rounds of a time-varying schedule checked for joint connectivity
AUTO_CHECKPOINT_RATIO = 20  # checkpoint_every = 0: save when 20x the last save's time has passed


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss or parameters; the message (one line) names the round,
    the nodes and the last finite loss."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "'cuda' requested but torch sees no CUDA device")
    return torch.device(name)


def _load_data(cfg: Config, device: torch.device, dtype: torch.dtype,
               dataset: Dataset | None = None,
               node_indices: torch.Tensor | None = None) -> FederatedData:
    d = cfg.data
    root = d.root or None
    if d.name != "synthetic" and dataset is None:
        try:
            find_dataset_dir(d.name, root)
        except DatasetNotFoundError as err:
            raise ConfigError("data.name", str(err)) from None
    if dataset is None:
        dataset = load_dataset(d.name, root, seed=stream_seed(cfg.seed, "partition"),
                               synthetic_train=d.synthetic_train, synthetic_test=d.synthetic_test)
    if node_indices is not None:
        node_indices = as_partition(node_indices, d.num_nodes, len(dataset.y_train))
        return FederatedData(dataset, node_indices, device, dtype)
    try:
        indices = partition(dataset.y_train.numpy(), d.num_nodes, d.partition, alpha=d.alpha,
                            classes_per_node=d.classes_per_node,
                            seed=stream_seed(cfg.seed, "partition"))
    except ValueError as err:
        raise ConfigError("data", str(err)) from None
    return FederatedData(dataset, torch.as_tensor(indices), device, dtype)


def schedule_for(cfg: Config, algorithm: Algorithm) -> T.Schedule:
    """The topology schedule `cfg` names, for `algorithm` (a centralized one runs on a star of
    num_nodes + 1 whose hub 0 is the server); a bad parameter is a one-line ConfigError."""
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
            T.check_doubly_stochastic(T.doubly_stochastic(graph, sparse=True))
        else:
            T.check_column_stochastic(T.column_stochastic(graph, sparse=True))
    except ValueError as err:
        raise ConfigError("topology", f"{algorithm.name} needs {algorithm.mixing.replace('_', '-')}"
                          f" mixing: {err}") from None
    window = 1 if schedule.period == 1 else min(rounds, schedule.period or CONNECTIVITY_WINDOW)
    if not T.is_strongly_connected(T.union_graph(schedule, 0, window)):
        what = "graph" if window == 1 else f"union of the graphs of rounds 0..{window - 1}"
        raise ConfigError("topology", f"the {what} is not strongly connected: {algorithm.name} "
                          "cannot reach the network average")


def build(cfg: Config, dataset: Dataset | None = None,
          parts: Parts | None = None) -> tuple[RunContext, Algorithm]:
    """Everything a run needs, validated before any training starts.

    `dataset`, when given, is used instead of loading `cfg.data.name` (the benchmark loads a
    dataset once for many builds, or supplies CIFAR-shaped synthetic data); it is partitioned
    as configured. `parts` holds what was given as objects (p2pfl.objects): a topology schedule
    (decentralized algorithms only), a model, a dataset and a partition, each run instead of the
    config's named one."""
    parts = parts or Parts()
    schedule = parts.schedule
    device = resolve_device(cfg.device)
    dtype = getattr(torch, cfg.engine.dtype)
    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    if schedule is None:
        schedule = schedule_for(cfg, algorithm)
    elif algorithm.mixing == "server":
        raise ConfigError("topology", f"{algorithm.name} is centralized and runs on the star "
                          "(hub = server); a topology object is for decentralized algorithms")
    check_topology(algorithm, schedule, cfg.rounds)
    data = _load_data(cfg, device, dtype,
                      parts.dataset if parts.dataset is not None else dataset, parts.partition)
    if parts.model is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(stream_seed(cfg.seed, "init"))
            model = build_model(cfg.model.name, data.input_shape, data.num_classes)
        model = model.to(device=device, dtype=dtype)
    else:
        model = _own_model(parts.model, data, device, dtype)
    population = Population(model, cfg.data.num_nodes, device, dtype)
    try:
        forward = stacked_forward(model)
    except ValueError as err:
        raise ConfigError("model", str(err)) from None
    if cfg.engine.executor == "loop":
        trainer: VectorizedTrainer | LoopTrainer = LoopTrainer(model, data, cfg.data.num_nodes)
    else:
        chunks = plan_chunks(forward, {k: v[:1] for k, v in population.params.items()},
                             data.input_shape, cfg.data.num_nodes, cfg.algorithm.batch_size,
                             cfg.eval.batch_size, algorithm.solver.rho > 0, device)
        if cfg.engine.compile:
            forward = torch.compile(forward)
        trainer = VectorizedTrainer(forward, data, cfg.engine.chunk_size or chunks.train,
                                    cfg.engine.chunk_size or chunks.eval)
    ctx = RunContext(cfg, device, dtype, data, population, forward, trainer,
                     LocalComm(device, dtype, cfg.engine.mixing), schedule)
    algorithm.setup(ctx)
    return ctx, algorithm


def _own_model(model: nn.Module, data: FederatedData, device: torch.device,
               dtype: torch.dtype) -> nn.Module:
    """A copy of a researcher's model on the run's device, checked to map one input to logits
    over the data's classes."""
    model = copy.deepcopy(model).to(device=device, dtype=dtype)
    try:
        stacked_forward(model)  # refuses BatchNorm running statistics first
    except ValueError as err:
        raise ConfigError("model", str(err)) from None
    x = torch.zeros(1, *data.input_shape, device=device, dtype=dtype)
    try:
        with torch.no_grad():
            shape = tuple(model(x).shape)
    except Exception as err:  # any failure of the user's forward is a one-line config error
        raise ConfigError("model", f"{type(model).__name__} failed on one input of shape "
                          f"{list(x.shape)}: {type(err).__name__}: {err}") from None
    if shape != (1, data.num_classes):
        raise ConfigError("model", f"{type(model).__name__} maps an input of shape "
                          f"{list(x.shape)} to {list(shape)}; expected [1, {data.num_classes}] "
                          "logits")
    return model


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
    chunk = ctx.trainer.eval_chunk_size if isinstance(ctx.trainer, VectorizedTrainer) else 1
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


def _clone(tree: Any) -> Any:
    """A copy of a state tree (dicts, lists, tuples) whose tensors are cloned."""
    if isinstance(tree, torch.Tensor):
        return tree.clone()
    if isinstance(tree, dict):
        return {k: _clone(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_clone(v) for v in tree)
    return copy.deepcopy(tree)


def _all_finite(model: Params) -> bool:
    """Whether every entry of one model (name -> [*shape]) is finite."""
    return bool(finite_rows({k: v.unsqueeze(0) for k, v in model.items()}).all())


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run at the end of a round, after writing a checkpoint."""


class Runner:
    """The rounds of one built experiment, from where `history` ends to `cfg.rounds`.

    Each round: the graph of round t, the algorithm's round under the divergence guard, one line
    of `metrics.jsonl` (appended and flushed), then a checkpoint when one is due. Between rounds
    the loop carries only `history`: everything else is in the population and the algorithm's
    state, which is what a checkpoint holds. The first Ctrl-C (SIGINT) stops after the current
    round with a checkpoint; a second one stops at once.
    """

    def __init__(self, cfg: Config, out: Path, ctx: RunContext, algorithm: Algorithm,
                 history: History | None = None, progress: bool = False, label: str = "") -> None:
        self.cfg, self.out, self.ctx, self.algorithm = cfg, Path(out), ctx, algorithm
        self.history: History = list(history or [])
        self.progress, self.label = progress, label
        self.guard = Guard(ctx.num_nodes, ctx.device)
        self.guard.install(ctx.trainer)
        self.local_eval = _eval_subset(ctx)
        self.bytes_per_value = torch.finfo(ctx.dtype).bits // 8
        self.stop_requested = False
        self.checkpoint_round = len(self.history) if self.history else -1
        self._checkpoint_end = time.perf_counter()
        self._checkpoint_cost = 0.0

    def run(self) -> History:
        cfg = self.cfg
        bar = tqdm(total=cfg.rounds, initial=len(self.history), disable=not self.progress,
                   desc=self.label or cfg.algorithm.name, leave=True, dynamic_ncols=True)
        try:
            with self._stop_on_sigint():
                for t in range(len(self.history), cfg.rounds):
                    record = self.round(t)
                    append_jsonl(self.out / METRICS, record)
                    self.history.append(record)
                    bar.update(1)
                    bar.set_postfix(loss=f"{record['train_loss']:.3f}",
                                    acc=f"{record.get('test_acc', math.nan):.3f}")
                    if self.stop_requested or self._checkpoint_due():
                        self.checkpoint()
                    if self.stop_requested and t + 1 < cfg.rounds:
                        raise RunInterrupted(f"stopped after round {t + 1} with a checkpoint; "
                                             f"continue with: p2pfl resume {self.out}")
        finally:
            bar.close()
        if self.checkpoint_round != len(self.history):
            self.checkpoint()
        _finish(self.out, cfg, self.ctx, self.algorithm, self.history)
        return self.history

    def round(self, t: int) -> dict[str, Any]:
        """Run round t (0-based) and return its metrics record."""
        ctx, algorithm = self.ctx, self.algorithm
        start = time.perf_counter()
        report, skipped = self._guarded_round(t)
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        trained = ~self.guard.frozen[report.nodes]
        record: dict[str, Any] = {
            "round": t + 1,
            "lr": algorithm.lr(t),
            "train_loss": report.losses[trained].mean().item(),
            "nodes_trained": int(trained.sum()),
            "messages": report.copies_sent,
            "bytes_sent": (report.copies_sent * ctx.population.num_params
                           + report.scalars_sent) * self.bytes_per_value,
            "wall_s": time.perf_counter() - start,
        }
        if skipped:
            record["nodes_skipped"] = len(skipped)
        record.update(algorithm.metrics(ctx))
        if (t + 1) % self.cfg.eval.every == 0 or t + 1 == self.cfg.rounds:
            eval_start = time.perf_counter()
            record.update(_evaluate(ctx, algorithm, self.local_eval))
            record["eval_s"] = time.perf_counter() - eval_start
        return record

    def _guarded_round(self, t: int) -> tuple[RoundReport, list[int]]:
        """The algorithm's round t; with on_divergence = "skip_node", redone with the diverged
        nodes frozen (no local phase, no links) until no node diverges. Returns the report and
        the frozen nodes."""
        ctx, algorithm = self.ctx, self.algorithm
        graph = (ctx.schedule.at(t, algorithm.selection_losses()) if ctx.schedule.needs_losses
                 else ctx.schedule.at(t))
        offset = 1 if algorithm.mixing == "server" else 0  # graph node 0 is the server
        saved = None
        if self.cfg.engine.on_divergence == "skip_node":
            saved = (ctx.population.state_dict(), _clone(algorithm.state_dict()))  # copies
        frozen: list[int] = []
        while True:
            self.guard.begin_round(frozen)
            report = algorithm.round(ctx, t, cut_links(graph, [i + offset for i in frozen]))
            bad, what = self._diverged(report)
            if not bad and not what:
                return report, frozen
            new = set(bad) - set(frozen)
            # Stop when freezing cannot help: no node to blame, none new, or none left.
            if saved is None or not new or len(frozen) + len(new) >= ctx.num_nodes:
                raise DivergenceError(self._divergence_message(t, bad, what, frozen))
            ctx.population.load_state_dict(saved[0])
            algorithm.load_state_dict(_clone(saved[1]))
            frozen = sorted(set(frozen) | new)

    def _diverged(self, report: RoundReport) -> tuple[list[int], str]:
        """The nodes that went non-finite this round and in what; ([], "") if none did."""
        guard, ctx = self.guard, self.ctx
        bad_loss = guard.bad_loss.clone()
        bad_loss[report.nodes[~torch.isfinite(report.losses) & ~guard.frozen[report.nodes]]] = True
        if bad_loss.any():
            return bad_loss.nonzero().squeeze(1).tolist(), "training loss"
        if guard.bad_params.any():  # caught before mixing: the culprits
            return guard.bad_params.nonzero().squeeze(1).tolist(), "parameters"
        # Trained rows are checked above; anything else non-finite (mixing overflow, a server
        # update) reaches the average model. Only then scan every row, to name the ones it reached.
        if _all_finite(self.algorithm.average_model(ctx)):
            return [], ""
        bad_params = ~finite_rows(ctx.population.params)
        if bad_params.any():
            return bad_params.nonzero().squeeze(1).tolist(), "parameters"
        return [], "average model"

    def _divergence_message(self, t: int, bad: list[int], what: str, frozen: list[int]) -> str:
        where = f" at nodes {bad[:10]}{' ...' if len(bad) > 10 else ''}" if bad else ""
        last = (f"last finite mean loss {self.history[-1]['train_loss']:.4g}" if self.history
                else "no round completed")
        if frozen:
            last += f"; skipping nodes {frozen[:10]} did not stop it"
        ckpt = (f"checkpoint at round {self.checkpoint_round}" if self.checkpoint_round >= 0
                else "no checkpoint")
        hint = self.algorithm.divergence_hint(t, bad)
        return (f"round {t + 1}: non-finite {what}{where} ({last}); {hint + '; ' if hint else ''}"
                f"results so far are in {self.out} ({ckpt})")

    def _checkpoint_due(self) -> bool:
        every = self.cfg.engine.checkpoint_every
        if every > 0:
            return len(self.history) % every == 0
        elapsed = time.perf_counter() - self._checkpoint_end
        return elapsed >= AUTO_CHECKPOINT_RATIO * self._checkpoint_cost

    def checkpoint(self) -> None:
        """Save the state after the rounds in `history` (atomically)."""
        start = time.perf_counter()
        save_checkpoint(self.out, self.cfg, self.ctx.population, self.algorithm, self.history)
        self._checkpoint_end = time.perf_counter()
        self._checkpoint_cost = self._checkpoint_end - start
        self.checkpoint_round = len(self.history)

    @contextmanager
    def _stop_on_sigint(self) -> Iterator[None]:
        """While running: the first SIGINT asks to stop after the round, the second stops now."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self.stop_requested:
                raise KeyboardInterrupt
            self.stop_requested = True
            print("p2pfl: stopping after this round (Ctrl-C again to stop now)", file=sys.stderr)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def _resume_point(out: Path, cfg: Config) -> dict[str, Any] | None:
    """The checkpoint of `out` to continue from, checked against `cfg` (None: start over)."""
    checkpoint = load_checkpoint(out, resolve_device(cfg.device))
    if checkpoint is not None:
        check_resumable(checkpoint["config"], cfg, checkpoint["round"], out)
    elif (out / "config.json").exists():
        old = read_run_config(out)
        check_resumable(old.to_dict(), cfg, 0, out)
    return checkpoint


def run(cfg: Config, out_dir: str | Path | None = None, progress: bool = False,
        label: str = "", resume: bool = False, topology: object | None = None,
        model: object | None = None, data: object | None = None,
        partition: object | None = None) -> History:
    """Run one experiment; per-round metrics are returned and written to `out_dir`.

    With `resume`, continue the run in `out_dir` from its last checkpoint (a directory without
    one starts over); `cfg` may differ from the run's config only in `checkpoint.RESUMABLE`.
    `topology`: a networkx graph, a sequence of graphs, a mixing matrix (or a sequence of them),
    a callable t -> graph or a `topologies.Schedule`, run instead of `cfg.topology`'s and
    recorded in `out_dir`/topology.json. `model`: a torch.nn.Module run instead of
    `cfg.model`'s, recorded in `out_dir`/model.json. `data`: a p2pfl.data.Dataset or
    (x_train, y_train, x_test, y_test); `partition`: one index list per node (all of one length)
    into the training set; both recorded in `out_dir`/data.json (p2pfl.objects).
    """
    if cfg.compare:
        raise ConfigError("compare", "this config lists [[compare]] variants: use run_compare")
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    cfg, parts = resolve(cfg, out, resume, topology, model, data, partition)
    checkpoint = _resume_point(out, cfg) if resume else None
    ctx, algorithm = build(cfg, parts=parts)
    history: History = []
    if resume:
        out.mkdir(parents=True, exist_ok=True)
        for partial in out.glob(".*.tmp"):  # left by a kill during an atomic write
            partial.unlink()
        if checkpoint is None and (out / "summary.json").exists():
            raise ConfigError("out", f"{out} holds a finished run without {CHECKPOINT}: it "
                              "cannot be continued")
        # Finished again only when its rounds are done (an extension may be killed or diverge).
        (out / "summary.json").unlink(missing_ok=True)
        if checkpoint is not None:
            restore(checkpoint, ctx.population, algorithm)
            history = checkpoint["metrics"]
        # Drops a torn last line and the rounds after the checkpoint: they are recomputed.
        rewrite_metrics(out / METRICS, history)
    else:
        _prepare_out_dir(out)
    write_json_atomic(out / "config.json", cfg.to_dict())
    for name, record in parts.records.items():
        write_json_atomic(out / name, record)
    return Runner(cfg, out, ctx, algorithm, history, progress, label).run()


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
    with atomic_file(out / "final.pt", "wb") as f:
        torch.save(state, f)
    plot_histories({cfg.algorithm.name: history}, out / "curves",
                   title=f"{cfg.algorithm.name} on {_topology_title(cfg)}")


def _topology_title(cfg: Config) -> str:
    name = cfg.topology.name
    return "a topology given as a Python object" if name == OBJECT else name


def run_compare(cfg: Config, out_dir: str | Path | None = None, progress: bool = False,
                resume: bool = False, topology: object | None = None,
                model: object | None = None, data: object | None = None,
                partition: object | None = None) -> dict[str, History]:
    """Run every [[compare]] variant (same seed and data) into its own subdirectory of `out_dir`
    and draw them on one comparison figure. With `resume`, each variant continues from its
    checkpoint (a variant not yet started starts). Objects given (as for `run`) are every
    variant's; a variant that sets what an object replaces is refused."""
    if not cfg.compare:
        raise ConfigError("compare", "the config lists no [[compare]] variants")
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if (out / "config.json").exists():
        if not resume:
            raise ConfigError("out", f"{out} already holds a run (config.json); "
                              "choose another directory or resume it")
        check_resumable(read_run_config(out).to_dict(), cfg, 0, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "config.json", cfg.to_dict())
    histories: dict[str, History] = {}
    for variant in cfg.compare:
        overrides = variant_overrides(variant)
        label = str(variant.get("label") or ", ".join(f"{k}={v}" for k, v in overrides.items()))
        histories[label] = run(with_overrides(cfg, overrides), out / _slug(label), progress,
                               label, resume, topology, model, data, partition)
    d = cfg.data
    split = f"Dirichlet({d.alpha})" if d.partition == "dirichlet" else d.partition
    plot_histories(histories, out / "comparison",
                   title=f"{d.name}, {d.num_nodes} nodes, {split}, {cfg.model.name}")
    write_json_atomic(out / "comparison.json", {
        label: {"final_test_acc": h[-1].get("test_acc"), "rounds": len(h),
                "total_wall_s": sum(r["wall_s"] for r in h)}
        for label, h in histories.items()})
    return histories
