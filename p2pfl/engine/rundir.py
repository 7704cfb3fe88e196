"""A run directory: where a run starts or continues, and what a finished run leaves there.

    config.json     the resolved config (written before the first round)
    metrics.jsonl   one record per round (p2pfl.report.results)
    checkpoint.pt   the state to continue from (p2pfl.engine.checkpoint)
    summary.json    written when the run's rounds are done, with final.pt and the curves
    diverged.json   written when the run diverged: the round and the message (removed on resume)
    privacy.json    with [privacy]: the pairwise privacy loss (the algorithm's `files`)
    byzantine.json  with [byzantine]: the Byzantine nodes, their attack and where the aggregator's
                    assumption fails (rewritten by the algorithm's `files` when the run finishes)
    *.json          records of what was given as Python objects (p2pfl.objects)
    .lock           held (flock) by the process writing the directory, for the whole run
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from p2pfl.config import Config, ConfigError
from p2pfl.context import RunContext
from p2pfl.engine.checkpoint import (
    CHECKPOINT,
    check_resumable,
    load_checkpoint,
    read_run_config,
    save_tensors,
)
from p2pfl.report.plots import plot_histories
from p2pfl.report.results import DIVERGED, METRICS, atomic_file, rewrite_metrics, write_json_atomic
from p2pfl.report.runs import run_facts, title_of

History = list[dict[str, Any]]


def default_out_dir(cfg: Config) -> Path:
    """The run directory of a run given none: runs/<algorithm>-<topology>-<local time>.

    Parameters
    ----------
    cfg : the config.

    Returns
    -------
    Path, relative to the working directory.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{cfg.algorithm.name}-{cfg.topology.name}-{stamp}"


LOCK = ".lock"


@contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold `out`'s lock for the block (creating `out`).

    The operating system releases the lock when the process ends, however it ends, so a killed
    run never leaves a stale lock.

    Parameters
    ----------
    out : the run directory.

    Yields
    ------
    None, while the lock is held.

    Raises
    ------
    ConfigError
        naming out when it is a file, or another process holds the lock.
    """
    if out.exists() and not out.is_dir():
        raise ConfigError("out", f"{out} is a file, not a directory")
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "a process"
        os.close(fd)
        raise ConfigError("out", f"{out} is being written by another p2pfl run ({holder}); "
                          "wait for it to end or choose another directory") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
        yield
    finally:
        os.close(fd)


def refuse_unless_empty(out: Path) -> None:
    """Refuse anything in `out`, a run or a user's files, rather than overwrite it.

    A new run goes into a new or empty directory (its own lock aside).

    Parameters
    ----------
    out : the run directory.

    Raises
    ------
    ConfigError
        naming out when it is a file or holds anything.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError("out", f"{out} is a file, not a directory")
    found = sorted(p.name for p in out.iterdir() if p.name != LOCK)
    if found:
        what = "already holds a run" if "config.json" in found else "is not empty"
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        raise ConfigError("out", f"{out} {what} ({shown}): choose a new or empty directory, "
                          "or resume the run there")


def resume_point(out: Path, cfg: Config, device: torch.device) -> dict[str, Any] | None:
    """The checkpoint of `out` to continue from, checked against `cfg`.

    Parameters
    ----------
    out : the run directory.
    cfg : the config to continue with.
    device : where the checkpoint's tensors go.

    Returns
    -------
    dict, or None to start over.

    Raises
    ------
    ConfigError
        as `load_checkpoint` and `check_resumable`.
    """
    checkpoint = load_checkpoint(out, device)
    if checkpoint is not None:
        check_resumable(checkpoint["config"], cfg, checkpoint["round"], out)
    elif (out / "config.json").exists():
        check_resumable(read_run_config(out).to_dict(), cfg, 0, out)
    return checkpoint


def start(out: Path, cfg: Config, records: dict[str, dict[str, Any]],
          checkpoint: dict[str, Any] | None, resume: bool) -> None:
    """Make `out` ready for the first round to run.

    A new run's directory (refusing one that holds a run), or a resumed one cut back to its
    checkpoint. Writes config.json and the object records.

    Parameters
    ----------
    out : the run directory.
    cfg : the run's config.
    records : {file name: record} of the parts given as objects.
    checkpoint : the checkpoint resumed from, or None.
    resume : whether the run resumes.

    Raises
    ------
    ConfigError
        naming out or resume for a directory that cannot take the run.
    """
    if resume:
        out.mkdir(parents=True, exist_ok=True)
        if (out / METRICS).exists() and not (out / METRICS).is_file():
            raise ConfigError("resume", f"{out / METRICS} is not a file")
        for partial in [*out.glob(".*.tmp"), *out.glob("shards/.*.tmp")]:  # left by a kill
            partial.unlink()  # during an atomic write
        if checkpoint is None and (out / "summary.json").exists():
            raise ConfigError("out", f"{out} holds a finished run without {CHECKPOINT}: it "
                              "cannot be continued")
        # Finished again only when its rounds are done (an extension may be killed or diverge).
        (out / "summary.json").unlink(missing_ok=True)
        (out / DIVERGED).unlink(missing_ok=True)
        # Drops a torn last line and the rounds after the checkpoint: they are recomputed.
        rewrite_metrics(out / METRICS, checkpoint["metrics"] if checkpoint else [])
    else:
        refuse_unless_empty(out)
        out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "config.json", cfg.to_dict())
    for name, record in records.items():
        write_json_atomic(out / name, record)


def record_divergence(out: Path, round_: int, message: str) -> None:
    """Write diverged.json: the round in which the run diverged and why.

    Reports (`p2pfl table`, `p2pfl plot`) read it to show the run as diverged.

    Parameters
    ----------
    out : the run directory.
    round_ : the round (1-based, as metrics.jsonl counts) that diverged.
    message : the DivergenceError's message.
    """
    write_json_atomic(out / DIVERGED, {"round": round_, "message": message})


def finish(out: Path, cfg: Config, ctx: RunContext, algorithm: Any, history: History,
           final: dict[str, Any], stopped: str | None = None, figures: bool = True) -> None:
    """Write summary.json, final.pt and the curves of a finished run.

    Parameters
    ----------
    out : the run directory.
    cfg : the run's config.
    ctx : the run.
    algorithm : the algorithm (its state goes into final.pt).
    history : the run's metric records.
    final : the "population" as the last checkpoint holds it, and the "average_model".
    stopped : why a callback stopped the run (recorded in summary.json), or None.
    figures : whether to draw the curves.
    """
    accs = [r["test_acc"] for r in history if "test_acc" in r]
    summary = {
        "algorithm": cfg.algorithm.name,
        "topology": cfg.topology.name,
        "rounds": len(history),
        "device": str(ctx.device),
        "num_params": ctx.population.num_params,
        "final": history[-1],
        "best_test_acc": max(accs, default=None),
        "mean_test_acc_last10": float(np.mean(accs[-10:])) if accs else None,
        "total_wall_s": sum(r["wall_s"] for r in history),
        "total_bytes_sent": sum(r["bytes_sent"] for r in history),
    }
    if stopped:
        summary["stopped"] = stopped
    write_json_atomic(out / "summary.json", summary)
    for name, record in algorithm.files(ctx).items():
        write_json_atomic(out / name, record)
    state = {"round": len(history), "population": final["population"],
             "algorithm": algorithm.state_dict(), "average_model": final["average_model"]}
    with atomic_file(out / "final.pt", "wb") as f:
        save_tensors(state, f, out / "final.pt")
    if figures:
        plot_histories({cfg.algorithm.name: history}, out / "curves", title=run_title(cfg),
                       facts={cfg.algorithm.name: run_facts(out)})


def run_title(cfg: Config) -> str:
    """The title of a run's curves: what was run (data, algorithm, aggregator, attackers,
    topology, network) and its seed.

    Parameters
    ----------
    cfg : the config.

    Returns
    -------
    str.
    """
    return f"{title_of([cfg.to_dict()])}; seed {cfg.seed}"
