"""Running experiments: `run` (one run into its directory, or its continuation) and `run_compare`
(every [[compare]] variant into OUT/<variant>/seed<k>/, then one comparison figure).

The pieces: p2pfl.objects (what was given as Python objects, and its records), build
(everything a run needs, validated before training), loop (the rounds, the divergence
guard, callbacks, Ctrl-C and checkpoints) and rundir (the run directory).
"""

from __future__ import annotations

import copy
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from algorithms.asynchronous import Asynchronous
from algorithms.base import Algorithm
from p2pfl.callbacks import Callback
from p2pfl.config import (
    Config,
    ConfigError,
    folder_name,
    variant_label,
    variant_overrides,
    with_overrides,
)
from p2pfl.engine.builder import build, check_variants, resolve_device
from p2pfl.engine.checkpoint import check_resumable, read_run_config, restore
from p2pfl.engine.event_loop import EventRunner
from p2pfl.engine.loop import Observer, Runner
from p2pfl.engine.rundir import (
    History,
    default_out_dir,
    exclusive,
    refuse_unless_empty,
    resume_point,
    start,
)
from p2pfl.engine.stacked import Stack
from p2pfl.engine.threats import byzantine_record
from p2pfl.errors import DivergenceError, RunInterrupted
from p2pfl.objects import DATA_RECORD, check_partition_record, describe_partition, resolve
from p2pfl.objects.inputs import INPUTS_RECORD, check_inputs, describe_inputs, with_absolute_paths
from p2pfl.objects.underlay import UNDERLAY_RECORD, check_underlay, resolve_underlay
from p2pfl.report.plots import plot_histories
from p2pfl.report.results import METRICS, read_metrics, write_json_atomic
from p2pfl.report.runs import run_facts, title_of
from p2pfl.scale.launch import launched
from p2pfl.scale.processes import agreed, init, rank0_value

_OUTER_SEMICOLON = re.compile(r";(?![^()]*\))")  # a ';' not inside parentheses


def say_baseline(algorithm: Algorithm) -> None:
    """Say once, in the run's log (stderr), that the run's options set its algorithm back to a
    baseline (`Algorithm.baseline`: a SAM radius or a momentum of 0, ...).

    Parameters
    ----------
    algorithm : the run's algorithm, built from its options.
    """
    line = algorithm.baseline()
    if line:
        print(f"p2pfl: {line}", file=sys.stderr)


def run(cfg: Config, out_dir: str | Path | None = None, progress: bool | Observer = False,
        label: str = "", resume: bool = False, topology: object | None = None,
        model: object | None = None, data: object | None = None,
        partition: object | None = None, algorithm: type | None = None,
        callbacks: list[Callback] | None = None, stack: Stack | None = None,
        compressor: object | None = None, figures: bool = True,
        underlay: object | None = None) -> History:
    """Run one experiment; per-round metrics are returned and written to `out_dir`.

    Any part may be a Python object instead of the config's name, recorded in `out_dir`
    (p2pfl.objects), and a resume must get the same one again.

    Parameters
    ----------
    cfg : the config (without [[compare]] variants).
    out_dir : the run directory (default: runs/<algorithm>-<topology>-<time>).
    progress : True draws a progress bar; a function is called with each round's record (a
        study's own bar), and is not part of the run (unlike a callback, it is not recorded).
    label : the run's name in the progress bar.
    resume : continue the run in `out_dir` from its last checkpoint (a directory without one
        starts over); `cfg` may differ from the run's config only in `config.diff.RESUMABLE`.
    topology : a networkx graph, a sequence of graphs, a mixing matrix (or a sequence of them), a
        callable t -> graph or a `topologies.Schedule`.
    model : a torch.nn.Module.
    data : a p2pfl.data.Dataset or (x_train, y_train, x_test, y_test).
    partition : one index list per node (all of one length) into the training set.
    algorithm : a subclass of `algorithms.Gossip`, `PushSum` or `Server` (registered under its
        `name`, which replaces `cfg.algorithm.name`).
    callbacks : `p2pfl.Callback`s run after every round.
    stack : run as one member of a p2pfl.engine.stacked.Stack, in its own thread (see
        `run_stacked`); the numbers are the run's alone, so it is not recorded either.
    compressor : a message compressor (p2pfl.core.compression.Compressor) for choco.
    figures : False leaves out the run's curves.png / .pdf (a study draws its own; `p2pfl plot`
        draws a run's later).
    underlay : the flow network's physical links, a networkx graph (`capacity_gbps` and
        `latency_s` on its edges, nodes 0..m-1; p2pfl.objects.underlay).

    Returns
    -------
    History, the list of per-round metric records.

    Raises
    ------
    ConfigError
        naming the field of what cannot run, before any round runs.
    DivergenceError
        when models go non-finite.
    RunInterrupted
        when a Ctrl-C stops the run before its last round (after a checkpoint).
    """
    if cfg.compare:
        raise ConfigError("compare", "this config lists [[compare]] variants: use run_compare, "
                          "or run the root without them: with_overrides(cfg, {'compare': None})")
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if launched() and stack is not None:
        raise ConfigError("stack", "a distributed run is not stacked with others")
    if launched():  # one of the processes of `torchrun` or `--nproc` (p2pfl.scale.distributed)
        init(resolve_device(cfg.device))
        if out_dir is None:  # named from the clock: rank 0's name for all
            out = rank0_value(out)
    with ExitStack() as exits:
        with agreed():  # a distributed run: any process's error stops all before round 1
            cfg, parts = resolve(with_absolute_paths(cfg), out, resume, topology, model, data,
                                 partition, algorithm, callbacks, compressor, underlay)
            if not resume:
                refuse_unless_empty(out)  # before the build: a taken directory is a quick error
            checkpoint = resume_point(out, cfg, resolve_device(cfg.device)) if resume else None
            ctx, algo = build(cfg, parts=parts, chunks=checkpoint and checkpoint.get("chunks"),
                              stack=stack)
            inputs = describe_inputs(cfg, ctx.data)
            check_inputs(out, resume, inputs)
            data_record = parts.records.get(DATA_RECORD, {}) | describe_partition(cfg, ctx.data)
            check_partition_record(out, resume, data_record)
            records = parts.records | {DATA_RECORD: data_record} | (
                {INPUTS_RECORD: inputs} if inputs else {}) | byzantine_record(
                ctx.byzantine, cfg, ctx.schedule)
            asynchronous = isinstance(algo, Asynchronous)  # event by event (docs/async.md)
            if asynchronous and stack is not None:
                raise ConfigError("stack", f"{algo.name} runs event by event, not stacked")
            runner = (EventRunner if asynchronous else Runner)(
                cfg, out, ctx, algo, checkpoint["metrics"] if checkpoint else [],
                progress if ctx.comm.rank == 0 else False, label, list(parts.callbacks), figures)
            if checkpoint is not None:  # before the directory is touched: a state that does
                restore(checkpoint, ctx.population, algo, runner.callbacks, out)  # not fit
                checkpoint.pop("population")  # restored: not held for the whole run
        with agreed():  # then rank 0 alone writes
            if ctx.comm.rank == 0:
                exits.enter_context(exclusive(out))
                start(out, cfg, records, checkpoint, resume)
                say_baseline(algo)
        return runner.run()


def run_compare(cfg: Config, out_dir: str | Path | None = None, progress: bool = False,
                resume: bool = False, topology: object | None = None,
                model: object | None = None, data: object | None = None,
                partition: object | None = None,
                callbacks: list[Callback] | None = None,
                underlay: object | None = None) -> dict[str, History]:
    """Run every [[compare]] variant (same seed and data) into OUT/<variant folder>/seed<seed>/.

    The layout of `p2pfl compare` (`p2pfl table OUT` groups a variant's seed folders); the
    variants are drawn on one comparison figure (OUT/comparison.png) and summed up in
    OUT/comparison.json. A variant that diverges does not stop the others. Objects given (as for
    `run`) are every variant's (each variant gets its own copy of the callbacks); a variant that
    sets what an object replaces is refused. An algorithm of one's own is named by a variant once
    it is registered (`algorithms.register`).

    Parameters
    ----------
    cfg : a config with [[compare]] variants.
    out_dir : the output folder (default: runs/<algorithm>-<topology>-<time>).
    progress : whether to draw progress bars.
    resume : each variant continues from its checkpoint (a variant not yet started starts).
    topology, model, data, partition, callbacks, underlay : objects, as for `run`.

    Returns
    -------
    dict {variant label: its History}.

    Raises
    ------
    ConfigError
        naming compare for a config without variants or a distributed launch, naming out for a
        resume of a folder written before the seed folders (OUT/<variant>/config.json; the line
        says where to move it), and as `run`.
    DivergenceError
        after every variant ran, when any diverged: the line names each diverged variant (its
        label and the first part of its run's message), and its attribute `histories` is the
        {variant label: History} of every variant, a diverged one's up to its last logged round
        (the comparison figure and comparison.json are written first).
    """
    if not cfg.compare:
        raise ConfigError("compare", "the config lists no [[compare]] variants")
    if launched():
        raise ConfigError("compare", "a config with [[compare]] variants runs in one process "
                          "(docs/distributed.md): start it without torchrun")
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    # an underlay object is the root's: its record at OUT lets a resume rebuild it for every
    # variant, those not started yet included
    cfg, underlay, underlay_record = resolve_underlay(cfg, out, resume, underlay)
    if resume and (out / "config.json").exists():
        check_resumable(read_run_config(out).to_dict(), cfg, 0, out)
    elif not resume:
        refuse_unless_empty(out)
        cfg = with_absolute_paths(cfg)
    with exclusive(out):
        if underlay_record is not None:
            write_json_atomic(out / UNDERLAY_RECORD, underlay_record)
        return _run_variants(cfg, out, progress, resume, callbacks, {
            "topology": topology, "model": model, "data": data, "partition": partition,
            "underlay": underlay})


def _run_variants(cfg: Config, out: Path, progress: bool, resume: bool,
                  callbacks: list[Callback] | None, objects: dict[str, object | None]
                  ) -> dict[str, History]:
    """run_compare's work, under the root's lock; `objects` are `run`'s keyword arguments."""
    variants = {variant_label(v): with_overrides(cfg, {**variant_overrides(v), "compare": None})
                for v in cfg.compare}
    check_variants([(f"compare[{i}] ({label})", c) for i, (label, c) in
                    enumerate(variants.items())], objects["topology"] is None,
                   objects["data"] is None and objects["partition"] is None)
    if objects["underlay"] is not None:  # every variant's, before the first one trains
        for i, (label, c) in enumerate(variants.items()):
            try:
                check_underlay(c, objects["underlay"])
            except ConfigError as err:
                raise ConfigError(f"compare[{i}] ({label}).{err.field}", err.message) from None
    run_dirs = {label: _variant_dir(out, label, c.seed, resume) for label, c in variants.items()}
    write_json_atomic(out / "config.json", cfg.to_dict())
    histories: dict[str, History] = {}
    diverged: dict[str, str] = {}
    for label, variant_cfg in variants.items():
        try:
            histories[label] = run(variant_cfg, run_dirs[label], progress, label, resume,
                                   callbacks=copy.deepcopy(callbacks), **objects)
        except DivergenceError as err:
            diverged[label] = str(err)
            metrics = run_dirs[label] / METRICS
            histories[label] = read_metrics(metrics) if metrics.exists() else []
    _write_comparison(out, histories, run_dirs, diverged)
    if diverged:
        raise _divergence(out, histories, diverged)
    return histories


def _variant_dir(out: Path, label: str, seed: int, resume: bool) -> Path:
    """OUT/<label folder>/seed<seed>; a resume refuses a variant folder in the layout before the
    seed folders (its config.json in the variant folder), rather than start it over."""
    folder = out / folder_name(label)
    run_dir = folder / f"seed{seed}"
    if resume and (folder / "config.json").exists():
        raise ConfigError("out", f"{folder} holds variant {label!r} in the layout before seed "
                          f"folders: move its files into {run_dir} to continue it there")
    return run_dir


def _write_comparison(out: Path, histories: dict[str, History], run_dirs: dict[str, Path],
                      diverged: dict[str, str]) -> None:
    """OUT/comparison.png / .pdf (a curve per variant, each with its facts: the model it
    measures, where it diverged, its folder's colour) and OUT/comparison.json."""
    facts = {label: replace(run_facts(run_dirs[label]), key=label) for label in histories}
    plot_histories(histories, out / "comparison", title=title_of(
        [f.config for f in facts.values()]), facts=facts)
    write_json_atomic(out / "comparison.json", {
        label: {"final_test_acc": h[-1].get("test_acc") if h else None, "rounds": len(h),
                "total_wall_s": sum(r["wall_s"] for r in h), "diverged": label in diverged}
        for label, h in histories.items()})


def _divergence(out: Path, histories: dict[str, History],
                diverged: dict[str, str]) -> DivergenceError:
    """One DivergenceError naming each diverged variant, the part of its message before the
    first ';' outside parentheses (the round, what and where); all `histories` attached."""
    named = "; ".join(f"{label}: {_OUTER_SEMICOLON.split(message, maxsplit=1)[0]}"
                      for label, message in diverged.items())
    err = DivergenceError(f"{len(diverged)} of {len(histories)} variants diverged (every variant "
                          f"ran; results in {out}): {named}")
    err.histories = histories
    return err


def run_stacked(jobs: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Run each job as one member of a Stack, all at once.

    Ctrl-C stops every member (each keeps its last checkpoint).

    Parameters
    ----------
    jobs : dicts of `p2pfl.run` arguments (cfg, out_dir, label, resume, topology, ...).

    Returns
    -------
    list, in order, each job's history, or the exception that ended it.

    Raises
    ------
    RunInterrupted
        on Ctrl-C.
    """
    stack = Stack(len(jobs))
    results: list[Any] = [None] * len(jobs)

    def member(i: int) -> None:
        try:
            with stack.turn():
                results[i] = run(**jobs[i], stack=stack)
        except BaseException as err:  # handed to the caller, as a run alone would raise it
            results[i] = err
        finally:
            stack.leave()

    threads = [threading.Thread(target=member, args=(i,), name=f"p2pfl-stack-{i}", daemon=True)
               for i in range(len(jobs))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        stack.abort()
        for t in threads:
            t.join()
        raise RunInterrupted("the stacked runs were stopped", "each keeps its last checkpoint"
                             ) from None
    return results
