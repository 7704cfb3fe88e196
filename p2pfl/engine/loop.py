"""The round loop of a built run: the divergence guard, round callbacks, Ctrl-C and checkpoints.

Each round: the graph of round t, the algorithm's round under the divergence guard, the round's
record (the algorithm's metrics, then every round callback: the evaluation first), one line of
`metrics.jsonl` (appended and flushed), then a checkpoint when one is due. docs/reliability.md
says what is guaranteed.
"""

from __future__ import annotations

import copy
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import networkx as nx
import torch
from tqdm import tqdm

import topologies as T
from algorithms import Algorithm, RoundReport
from p2pfl.callbacks import Callback, RoundEnd, call_all
from p2pfl.config import Config
from p2pfl.context import RunContext
from p2pfl.core.guard import cut_links, finite_rows
from p2pfl.core.population import Params
from p2pfl.engine.checkpoint import save_checkpoint, save_shard
from p2pfl.engine.evaluation import Evaluation
from p2pfl.engine.network_time import Horizon, NetworkTime
from p2pfl.engine.rundir import History, finish, record_divergence
from p2pfl.engine.topology import CONNECTIVITY_WINDOW, check_mixing, unchecked_graphs
from p2pfl.errors import ConfigError, DivergenceError, PeerLost, RunInterrupted, UserCodeError
from p2pfl.objects.topology import schedule_name
from p2pfl.report.results import METRICS, append_jsonl

Observer = Callable[[dict[str, Any]], None]  # sees each round's record; changes nothing
AUTO_CHECKPOINT_RATIO = 20  # checkpoint_every = 0: save when 20x the last save's time has passed


def _clone(tree: Any) -> Any:
    """A copy of a state tree (dicts, lists, tuples) whose tensors are cloned."""
    if isinstance(tree, torch.Tensor):
        return tree.clone()
    if isinstance(tree, dict):
        return {k: _clone(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_clone(v) for v in tree)
    return copy.deepcopy(tree)


EVALUATED = ("test_loss", "test_acc", "consensus_dist")  # evaluation metrics that must be finite


def _all_finite(model: Params) -> bool:
    """Whether every entry of one model (name -> [*shape]) is finite."""
    return bool(finite_rows({k: v.unsqueeze(0) for k, v in model.items()}).all())


class Runner:
    """The rounds of one built experiment, from where `history` ends to `cfg.rounds`.

    Between rounds the loop carries only `history`: everything else is in the population, the
    algorithm's state and the callbacks' states, which is what a checkpoint holds. The first
    Ctrl-C (SIGINT) stops after the current round with a checkpoint; a second one stops at once.
    A callback's StopRun ends the run after its round, as if its rounds were done.
    """

    unit = "round"  # what a record is, as messages name it (an asynchronous run's: "mark")

    def __init__(self, cfg: Config, out: Path, ctx: RunContext, algorithm: Algorithm,
                 history: History | None = None, progress: bool | Observer = False,
                 label: str = "", callbacks: list[Callback] | None = None,
                 figures: bool = True) -> None:
        self.cfg, self.out, self.ctx, self.algorithm = cfg, Path(out), ctx, algorithm
        self.figures = figures
        self.history: History = list(history or [])
        self.progress, self.label = progress is True, label
        self.observe = progress if callable(progress) else None
        self.guard = ctx.guard
        self.root = ctx.comm.rank == 0  # the process that writes (all of them compute)
        self.callbacks = Runner.round_callbacks(ctx, algorithm, callbacks or [],
                                                cfg.eval.local_samples)
        self.bytes_per_value = torch.finfo(ctx.dtype).bits // 8
        self.stop_requested = False
        self.stopped: str | None = None  # a callback's StopRun reason
        self.checkpoint_round = len(self.history) if self.history else -1
        self.population_state: dict[str, Any] = {}  # a distributed run's latest shard list
        self._checkpoint_end = time.perf_counter()
        self._checkpoint_cost = 0.0

    @staticmethod
    def round_callbacks(ctx: RunContext, algorithm: Algorithm, callbacks: list[Callback],
                        local_samples: int) -> list[Callback]:
        """The callbacks of a run in the order they run: evaluation, the algorithm's, the user's.

        Their states are checkpointed in this order; with [network] enabled, the network time comes
        after the evaluation.

        Parameters
        ----------
        ctx : the run.
        algorithm : its algorithm.
        callbacks : the user's callbacks.
        local_samples : test samples on which every node's own model is evaluated (0: all).

        Returns
        -------
        list of Callback.
        """
        timing = [] if ctx.clock is None else [NetworkTime(ctx.clock, algorithm.mixing == "server")]
        horizon = [] if ctx.clock is None else [Horizon()]
        # the clock first: whether a round is evaluated may depend on its simulated time
        return [*timing, Evaluation(ctx, local_samples), *algorithm.callbacks(ctx), *callbacks,
                *horizon]

    def run(self) -> History:
        cfg = self.cfg
        bar = tqdm(total=cfg.rounds, initial=len(self.history), disable=not self.progress,
                   desc=self.label or cfg.algorithm.name, leave=True, dynamic_ncols=True)
        try:
            with self._stop_on_sigint(), self._peers_lost():
                for t in range(len(self.history), cfg.rounds):
                    record = self.round(t)
                    if self.root:
                        append_jsonl(self.out / METRICS, record)
                    self.history.append(record)
                    if self.observe is not None:
                        self.observe(record)
                    bar.update(1)
                    bar.set_postfix(loss=f"{record['train_loss']:.3f}",
                                    acc=f"{record.get('test_acc', math.nan):.3f}")
                    if self.stopped:
                        break
                    self.stop_requested, due = self._agree(self.stop_requested,
                                                           self._checkpoint_due())
                    if self.stop_requested or due:
                        self.checkpoint()
                    self.ctx.comm.take_bytes()  # between rounds (flags, checkpoint): not counted
                    if self.stop_requested and t + 1 < cfg.rounds:
                        raise RunInterrupted(f"stopped after round {t + 1} with a checkpoint",
                                             f"continue with: p2pfl resume {self.out}")
                bar.close()
                if self.checkpoint_round != len(self.history) or (
                        self.ctx.comm.world > 1 and not self.population_state):
                    self.checkpoint()
                final = {"population": self._saved_population(),  # the last checkpoint's
                         "average_model": self.algorithm.average_model(self.ctx)}
                if self.root:
                    finish(self.out, cfg, self.ctx, self.algorithm, self.history, final,
                           self.stopped, self.figures)
        except DivergenceError as err:
            if self.root:
                record_divergence(self.out, len(self.history) + 1, str(err))
            raise
        finally:
            bar.close()
        return self.history

    def round(self, t: int) -> dict[str, Any]:
        """Run round t (0-based).

        Parameters
        ----------
        t : round, from 0.

        Returns
        -------
        dict, the round's metrics record.

        Raises
        ------
        UserCodeError
            naming the round when code given as an object fails.
        """
        start = time.perf_counter()
        try:
            return self._round(t, start)
        except UserCodeError as err:  # the model's forward knows no round: name it here
            if err.round is not None:
                raise
            raise err.in_round(t + 1) from err.error

    def _round(self, t: int, start: float) -> dict[str, Any]:
        ctx, algorithm = self.ctx, self.algorithm
        report, skipped, graph, faults = self._guarded_round(t)
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        trained = ~self.guard.frozen[report.nodes]
        record: dict[str, Any] = {
            "round": t + 1,
            "lr": algorithm.lr(t),
            "train_loss": report.losses[trained].mean().item(),
            "nodes_trained": int(trained.sum()),
            "messages": report.copies_sent,
            "bytes_sent": report.bytes_sent if report.bytes_sent is not None else (
                report.copies_sent * ctx.population.num_params * self.bytes_per_value
                + report.scalars_sent * 8),  # a scalar is a float64 push-sum weight
            "wall_s": time.perf_counter() - start,
        }
        if skipped:
            record["nodes_skipped"] = len(skipped)
        record.update(algorithm.metrics(ctx))
        end = RoundEnd(t, record, self.history, ctx, algorithm, graph, faults, report, self.cfg)
        self.stopped = call_all(self.callbacks, end, record)
        if ctx.comm.world > 1:  # what crossed processes: mixing rows, collective payloads
            sent = torch.tensor(ctx.comm.take_bytes(), dtype=torch.float64)
            sent[1] += sent.numel() * sent.element_size()  # this all-reduce's own payload
            mixing, collective = ctx.comm.all_sum(sent).tolist()
            ctx.comm.take_bytes()  # (counted above)
            record["rank_bytes_mixing"], record["rank_bytes_collective"] = (int(mixing),
                                                                            int(collective))
        unfit = [k for k in EVALUATED if not math.isfinite(record.get(k, 0.0))]
        if unfit:  # finite parameters whose outputs overflow: diverged all the same
            top = report.losses.nan_to_num(nan=-math.inf).argsort(descending=True)[:5]
            raise DivergenceError(self._divergence_message(
                t, report.nodes[top].tolist(), f"non-finite {unfit[0]} in evaluation", skipped,
                "; the largest training losses were at nodes"))
        return record

    def _guarded_round(self, t: int) -> tuple[RoundReport, list[int], nx.Graph, T.Faults]:
        """The algorithm's round t; with on_divergence = "skip_node", redone with the diverged
        nodes frozen (no local phase, no links) until no node diverges. Returns the report, the
        frozen nodes, and the graph and faults the accepted run of the round had."""
        ctx, algorithm = self.ctx, self.algorithm
        try:  # a schedule of one's own may fail in any round
            graph = (ctx.schedule.at(t, algorithm.selection_losses())
                     if ctx.schedule.needs_losses else ctx.schedule.at(t))
        except ValueError as err:  # a ParameterError's message names the round already
            raise ConfigError("topology", getattr(err, "message", None)
                              or f"the graph of round {t}: {err}") from None
        except Exception as err:  # a schedule of one's own, failing in its own code
            raise UserCodeError(schedule_name(ctx.schedule), err, t + 1) from err
        if unchecked_graphs(ctx.schedule) and t >= CONNECTIVITY_WINDOW:
            check_mixing(algorithm, ctx.schedule, t, graph)
        offset = 1 if algorithm.mixing == "server" else 0  # graph node 0 is the server
        saved = None
        if self.cfg.engine.on_divergence == "skip_node":
            saved = (ctx.population.state_dict(), _clone(algorithm.state_dict()))  # copies
        frozen: list[int] = []
        while True:
            self.guard.begin_round(frozen)
            cut = cut_links(graph, [i + offset for i in frozen])
            faults = ctx.faults(t, cut)
            report = algorithm.round(ctx, t, cut, faults)
            bad, what = self._diverged(report)
            if not bad and not what:
                return report, frozen, cut, faults
            new = set(bad) - set(frozen)
            # Stop when freezing cannot help: no node to blame, none new, or none left.
            if saved is None or not new or len(frozen) + len(new) >= ctx.num_nodes:
                raise DivergenceError(self._divergence_message(t, bad, what, frozen))
            ctx.population.load_state_dict(saved[0])
            algorithm.load_state_dict(_clone(saved[1]))
            frozen = sorted(set(frozen) | new)

    def _diverged(self, report: RoundReport) -> tuple[list[int], str]:
        """The nodes that diverged this round and how; ([], "") if none did."""
        guard, ctx = self.guard, self.ctx
        for record in (guard.bad_loss, guard.bad_params):  # each process saw its own nodes
            record.copy_(ctx.comm.all_max(record.to(torch.int32)).bool())
        bad_loss = guard.bad_loss.clone()
        bad_loss[report.nodes[guard.diverged(report.losses) & ~guard.frozen[report.nodes]]] = True
        if bad_loss.any():
            finite = bool(torch.isfinite(report.losses).all()) and not guard.bad_params.any()
            what = (f"training loss above engine.max_loss = {guard.max_loss:g}" if finite
                    else "non-finite training loss")
            return bad_loss.nonzero().squeeze(1).tolist(), what
        if guard.bad_params.any():  # caught before mixing: the culprits
            return guard.bad_params.nonzero().squeeze(1).tolist(), "non-finite parameters"
        # Trained rows are checked above; anything else non-finite (mixing overflow, a server
        # update) reaches the average model. Only then scan every row, to name the ones it reached.
        if _all_finite(self.algorithm.average_model(ctx)):
            return [], ""
        bad_params = torch.zeros(ctx.num_nodes, dtype=torch.int32, device=ctx.device)
        bad_params[ctx.all_nodes()] = (~finite_rows(ctx.population.params)).to(torch.int32)
        bad_params = ctx.comm.all_max(bad_params).bool()
        if bad_params.any():
            return bad_params.nonzero().squeeze(1).tolist(), "non-finite parameters"
        return [], "non-finite average model"

    def _divergence_message(self, t: int, bad: list[int], what: str, frozen: list[int],
                            at: str = " at nodes") -> str:
        where = f"{at} {bad[:10]}{' ...' if len(bad) > 10 else ''}" if bad else ""
        last = (f"last finite mean loss {self.history[-1]['train_loss']:.4g}" if self.history
                else "no round completed")
        if frozen:
            last += f"; skipping nodes {frozen[:10]} did not stop it"
        ckpt = (f"checkpoint at round {self.checkpoint_round}" if self.checkpoint_round >= 0
                else "no checkpoint")
        hint = self.algorithm.divergence_hint(t, bad)
        return (f"{self.unit} {t + 1}: {what}{where} ({last}); {hint + '; ' if hint else ''}"
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
        ctx = self.ctx
        if ctx.comm.world > 1:  # every process writes its rows; the checkpoint lists the files
            shards = ctx.comm.gather_objects(save_shard(self.out, len(self.history),
                                                        ctx.population))
            self.population_state = {"shards": shards}
        if self.root:
            save_checkpoint(self.out, self.cfg, self._saved_population(), self.algorithm,
                            self.history, self.callbacks, ctx.chunks)
        self._checkpoint_end = time.perf_counter()
        self._checkpoint_cost = self._checkpoint_end - start
        self.checkpoint_round = len(self.history)

    def _saved_population(self) -> dict[str, Any]:
        """The population as the latest checkpoint holds it: one process's rows themselves,
        saved without a copy (nothing changes them between the checkpoint and the next round, or
        final.pt), or the shard files of a distributed run."""
        if self.ctx.comm.world > 1:
            return self.population_state
        return {"flat": self.ctx.population.flat}

    def _agree(self, stop: bool, due: bool) -> tuple[bool, bool]:
        """(stop, checkpoint due) as every process sees them: a Ctrl-C, or a checkpoint due by
        one process's clock, counts for all, so that all stop and save after the same round."""
        if self.ctx.comm.world == 1:
            return stop, due
        flags = self.ctx.comm.all_max(torch.tensor([int(stop), int(due)], dtype=torch.int32))
        return bool(flags[0]), bool(flags[1])

    @contextmanager
    def _peers_lost(self) -> Iterator[None]:
        """A lost process is one line that says what is kept."""
        try:
            yield
        except PeerLost as err:
            ckpt = (f"its checkpoint at round {self.checkpoint_round} is intact"
                    if self.checkpoint_round >= 0 else "no checkpoint was written yet")
            raise PeerLost(f"{err}; {self.out}: {ckpt}; continue with: p2pfl resume "
                           f"{self.out} --nproc R") from None

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
            if self.root:
                print("p2pfl: stopping after this round (Ctrl-C again to stop now)",
                      file=sys.stderr)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

