"""Checkpoints: all the state a run needs to continue exactly, saved atomically in its directory.

`checkpoint.pt` (tensors and plain values only: it is loaded with `weights_only=True`, so a
crafted file cannot run code) holds

    version     the format version, VERSION
    round       rounds completed; the resumed run continues with round `round` + 1
    config      the resolved config the state was produced with (`Config.to_dict()`)
    population  `Population.state_dict()`: the flat parameter buffer of all N nodes; in a run
                sharded over processes, {"shards": [[first, last, file, sha256], ...]}: each
                process's rows in its own file under `shards/` (`save_shard`)
    algorithm   `Algorithm.state_dict()`: every piece of state the algorithm keeps across rounds
    callbacks   each round callback's `state_dict()`, in the order the run calls them
    streams     `seeding.STREAMS`: every random draw is derived from (seed, stream, round), so there
                is no generator state to save; a resume checks that these streams are derived
                as they were
    metrics     the metrics records of rounds 1..round (what `metrics.jsonl` then held)

The run loop carries nothing else from one round to the next. `checkpoint.json` (the manifest)
holds the SHA-256 of checkpoint.pt, written before the checkpoint is renamed into place; it also
keeps the previous checkpoint's digest, so a kill between the two renames leaves a pair that
still matches. A resume refuses a checkpoint whose digest the manifest does not list. Shard
files are written before the checkpoint that lists them, checked against their digests when
read, and removed once neither the checkpoint nor the previous one lists them. A resume on any
number of processes reads the shards that hold its rows (`load_population`).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from p2pfl.callbacks import check_state
from p2pfl.config import Config, ConfigError, config_with_overrides
from p2pfl.config.diff import RESUMABLE, config_diff
from p2pfl.core.seeding import STREAMS
from p2pfl.report.results import atomic_file, file_sha256, write_json_atomic

CHECKPOINT = "checkpoint.pt"
MANIFEST = "checkpoint.json"
SHARDS = "shards"  # a distributed run's population: one file per process and checkpoint
VERSION = 1

_SECTIONS = {"round": int, "config": dict, "population": dict, "algorithm": dict,
             "metrics": list, "streams": dict}  # what a checkpoint must hold, and as what


def save_checkpoint(run_dir: Path, cfg: Config, population: dict[str, torch.Tensor],
                    algorithm: Any, metrics: list[dict[str, Any]], callbacks: Sequence[Any] = (),
                    chunks: tuple[int, int] | None = None) -> None:
    """Write `run_dir/checkpoint.pt` for the state after the rounds of `metrics` (temp + rename).

    Parameters
    ----------
    run_dir : the run directory.
    cfg : the run's config.
    population : the state_dict of the whole population (or its shard list).
    algorithm : the algorithm (its state_dict is saved).
    metrics : the rounds done.
    callbacks : the round callbacks (their state_dicts are saved, checked).
    chunks : the (train, eval) chunk sizes the run batches nodes in, or None.
    """
    state = {"version": VERSION, "round": len(metrics), "config": cfg.to_dict(),
             "chunks": None if chunks is None else list(chunks),
             "population": population, "algorithm": algorithm.state_dict(),
             "callbacks": [check_state(c) for c in callbacks],
             "streams": dict(STREAMS), "metrics": list(metrics)}
    run_dir = Path(run_dir)
    previous = _listed_digests(run_dir)[:1]
    shards = [entry[2] for entry in population.get("shards", [])]
    kept = shards + [name for name in _manifest(run_dir).get("shards", [])
                     if isinstance(name, str)]  # the previous checkpoint's
    with atomic_file(run_dir / CHECKPOINT, "wb") as f:
        hashing = _HashingWriter(f)
        save_tensors(state, hashing, run_dir / CHECKPOINT)
        write_json_atomic(run_dir / MANIFEST, {"version": VERSION, "round": len(metrics),
                                               "sha256": [hashing.sha.hexdigest(), *previous],
                                               **({"shards": shards} if shards else {})})
    if (run_dir / SHARDS).is_dir():  # the files of older checkpoints than these two
        for path in (run_dir / SHARDS).glob("round*.pt"):
            if path.name not in kept:
                path.unlink(missing_ok=True)


def save_shard(run_dir: Path, round_done: int, population: Any) -> list[Any]:
    """Write the rows this process holds after `round_done` rounds to `run_dir/shards/`.

    The file is written atomically.

    Parameters
    ----------
    run_dir : the run directory.
    round_done : rounds done.
    population : this process's population.

    Returns
    -------
    list, the shard's entry in a checkpoint: [first node, last node + 1, file name, SHA-256].
    """
    first, last = population.first, population.first + population.num_nodes
    path = Path(run_dir) / SHARDS / f"round{round_done}-nodes{first}-{last}.pt"
    path.parent.mkdir(exist_ok=True)
    with atomic_file(path, "wb") as f:
        hashing = _HashingWriter(f)
        save_tensors({"first": first, "last": last, "flat": population.flat}, hashing, path)
    return [first, last, path.name, hashing.sha.hexdigest()]


def _shard_rows(run_dir: Path, entry: Any, device: torch.device) -> tuple[int, int, torch.Tensor]:
    """(first, last, flat) of one listed shard file, checked against its digest."""
    try:
        first, last, name, digest = entry
        path = Path(run_dir) / SHARDS / Path(str(name)).name
    except (TypeError, ValueError):
        raise ConfigError("resume", f"a checkpoint shard entry {entry!r} is not "
                          "[first, last, name, sha256]") from None
    if not path.is_file() or file_sha256(path) != digest:
        raise ConfigError("resume", f"{path} is missing or does not match its SHA-256 in "
                          f"{CHECKPOINT}: the checkpoint cannot be resumed")
    try:
        shard = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # any unreadable file is one clean message
        raise ConfigError("resume", f"cannot read {path}: {err}") from None
    return int(first), int(last), shard["flat"]


def load_population(run_dir: Path, state: dict[str, Any], population: Any) -> None:
    """Put a checkpoint's population into `population`, reading only the shards that hold its rows.

    Parameters
    ----------
    run_dir : the run directory.
    state : a single process's state_dict, or the shard list of a distributed run.
    population : the population to fill.
    """
    if "shards" not in state:
        population.load_state_dict(state)
        return
    lo, hi = population.first, population.first + population.num_nodes
    for entry in state["shards"]:
        if entry[0] < hi and entry[1] > lo:
            population.load_rows(*_shard_rows(run_dir, entry, population.flat.device))


def read_population(run_dir: Path, state: dict[str, Any],
                    widths: Sequence[int]) -> dict[str, torch.Tensor]:
    """The whole population of a checkpoint or final.pt, however many processes wrote it.

    Parameters
    ----------
    run_dir : the run directory (holding the shards).
    state : its "population".
    widths : the parameter tensors' sizes, in order.

    Returns
    -------
    dict in a single process's layout: {"flat": parameter-major [N * P]}.
    """
    if "shards" not in state:
        return state
    shards = sorted((_shard_rows(run_dir, e, torch.device("cpu")) for e in state["shards"]),
                    key=lambda shard: shard[0])
    blocks, offsets = [], [0] * len(shards)
    for width in widths:
        for i, (first, last, flat) in enumerate(shards):
            size = (last - first) * width
            blocks.append(flat[offsets[i]:offsets[i] + size])
            offsets[i] += size
    return {"flat": torch.cat(blocks)}


def save_tensors(state: Any, f: Any, path: Path) -> None:
    """torch.save `state` into the open file `f`.

    Parameters
    ----------
    state : what to save.
    f : the open file.
    path : its path, for the error.

    Raises
    ------
    OSError
        naming `path` for a failed write, such as a full disk (not torch's RuntimeError).
    """
    try:
        torch.save(state, f)
    except RuntimeError as err:
        failed = err.__context__
        if isinstance(failed, OSError):
            raise OSError(failed.errno, failed.strerror, str(path)) from None
        raise


class _HashingWriter(io.RawIOBase):
    """A write-only stream that passes bytes to `f` and hashes them (SHA-256) on the way."""

    def __init__(self, f: Any) -> None:
        self.f, self.sha = f, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.sha.update(data)
        return self.f.write(data)


def _manifest(run_dir: Path) -> dict[str, Any]:
    """`run_dir`'s manifest ({} without a readable one)."""
    try:
        manifest = json.loads((Path(run_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _listed_digests(run_dir: Path) -> list[str]:
    """The checkpoint digests `run_dir`'s manifest lists ([] without a readable manifest)."""
    digests = _manifest(run_dir).get("sha256")
    return [d for d in digests if isinstance(d, str)] if isinstance(digests, list) else []


def load_checkpoint(run_dir: Path, device: torch.device) -> dict[str, Any] | None:
    """The checkpoint of `run_dir` with its tensors on `device`.

    Parameters
    ----------
    run_dir : the run directory.
    device : where the tensors go.

    Returns
    -------
    dict, or None if there is none. On the CPU its tensors are mapped from the file
    (copy-on-write), so reading a large population costs no memory until it is restored.

    Raises
    ------
    ConfigError
        naming resume for a file that does not match its manifest's SHA-256, cannot be read, is
        of another version, lacks a section, or was written with other random streams.
    """
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        return None
    if (Path(run_dir) / MANIFEST).exists() and file_sha256(path) not in _listed_digests(
            Path(run_dir)):
        raise ConfigError("resume", f"{path} does not match its SHA-256 in {MANIFEST}: the file "
                          "is corrupt or was changed, and cannot be resumed")
    try:  # on the CPU the tensors stay in the file's pages until restored (no second copy)
        state = torch.load(path, map_location=device, weights_only=True,
                           mmap=device.type == "cpu")
    except Exception as err:  # any unreadable file is one clean message
        raise ConfigError("resume", f"cannot read {path}: {err}") from None
    if not isinstance(state, dict) or state.get("version") != VERSION:
        raise ConfigError("resume", f"{path} is not a version-{VERSION} p2pfl checkpoint")
    for key, kind in _SECTIONS.items():
        if not isinstance(state.get(key), kind):
            raise ConfigError("resume", f"{path} has no {key!r} section of type {kind.__name__}")
    if len(state["metrics"]) != state["round"]:
        raise ConfigError("resume", f"{path} is at round {state['round']} but holds "
                          f"{len(state['metrics'])} rounds of metrics")
    changed = sorted(k for k, v in state["streams"].items() if STREAMS.get(k) != v)
    if changed:  # streams added since are fine: the old run never drew from them
        raise ConfigError("resume", f"{path} was written when the random streams {changed} were "
                          "derived differently; it cannot be resumed exactly")
    return state


def restore(state: dict[str, Any], population: Any, algorithm: Any, callbacks: Sequence[Any],
            run_dir: Path) -> None:
    """Put the checkpointed states back into a freshly built run.

    The population (its shards are read from `run_dir`), the algorithm, and the callbacks in the
    order they were saved.

    Parameters
    ----------
    state : the checkpoint.
    population : the run's population.
    algorithm : the run's algorithm.
    callbacks : the run's round callbacks.
    run_dir : the run directory.

    Raises
    ------
    ConfigError
        naming resume (or callbacks) for a state that does not fit.
    """
    try:
        load_population(run_dir, state["population"], population)
        algorithm.load_state_dict(state["algorithm"])
    except (KeyError, IndexError, TypeError, RuntimeError, AttributeError) as err:
        raise ConfigError("resume", "the checkpoint's state does not fit this run "
                          f"({type(err).__name__}: {err})") from None
    saved = state.get("callbacks", [{}] * len(callbacks))  # written before callbacks had state
    if len(saved) != len(callbacks):
        raise ConfigError("callbacks", f"the checkpoint holds the state of {len(saved)} round "
                          f"callbacks, this run has {len(callbacks)}")
    for callback, callback_state in zip(callbacks, saved, strict=True):
        callback.load_state_dict(callback_state)


# Fields added after runs were first written whose default changes what a run does, each with
# the value a config written before it meant and when it applies: a run's saved config gets it,
# so that a resume never silently takes the new behaviour.
ADDED_FIELDS: tuple[tuple[str, str, Any, Callable[[dict[str, Any]], bool]], ...] = (
    ("network", "model", "ideal", lambda raw: bool(raw.get("network", {}).get("enabled"))),
    ("algorithm", "one_push_in_flight", False,
     lambda raw: raw.get("algorithm", {}).get("name") == "async_sgp"),
)


def as_written(raw: dict[str, Any]) -> dict[str, Any]:
    """A run's saved config with the fields it predates set to what their absence meant
    (ADDED_FIELDS).

    Parameters
    ----------
    raw : a config as a dict (a run's config.json or its checkpoint's).

    Returns
    -------
    dict, a copy where anything was added.
    """
    out = raw
    for section, key, meant, applies in ADDED_FIELDS:
        table = raw.get(section)
        if isinstance(table, dict) and key not in table and applies(raw):
            out = {**out, section: {**out[section], key: meant}}
    return out


def check_resumable(old: dict[str, Any], cfg: Config, rounds_done: int, run_dir: Path) -> None:
    """Refuse to continue a run of config `old` with `cfg`.

    Parameters
    ----------
    old : the run's config, as a dict.
    cfg : the config to continue with.
    rounds_done : rounds of the checkpoint.
    run_dir : the run directory, for the messages.

    Raises
    ------
    ConfigError
        naming resume if they differ in any field outside RESUMABLE, compare if their
        [[compare]] variants differ, rounds if `cfg` has fewer rounds than the checkpoint.
    """
    old = as_written(old)
    old_variants, new_variants = (json.loads(json.dumps(side.get("compare") or []))
                                  for side in (old, cfg.to_dict()))
    _check_same_variants(old_variants, new_variants, run_dir)
    # Both sides rebuilt without [[compare]]: a config written by an older p2pfl lacks newer
    # fields (they take their defaults), and a compare root's unset fields are resolved alike.
    old, new = (config_with_overrides({k: v for k, v in side.items() if k != "compare"},
                                      {}).to_dict() for side in (old, cfg.to_dict()))
    new.pop("compare")
    old.pop("compare")
    differ = [d for d in config_diff(old, new) if d.split(" ", 1)[0] not in RESUMABLE]
    if differ:
        raise ConfigError("resume", f"{run_dir} was run with another config; differing fields: "
                          f"{', '.join(differ)} (only {', '.join(RESUMABLE)} may change)")
    if cfg.rounds < rounds_done:
        raise ConfigError("rounds", f"{run_dir} is checkpointed at round {rounds_done}; "
                          f"rounds must be at least that, got {cfg.rounds}")


def _check_same_variants(old: list[Any], new: list[Any], run_dir: Path) -> None:
    """Refuse to turn a single run into a [[compare]] root or back, or to change its variants."""
    if old == new:
        return
    if not old:
        raise ConfigError("compare", f"{run_dir} holds a single run: it cannot be resumed with "
                          "[[compare]] variants (run them into a new directory)")
    if not new:
        raise ConfigError("compare", f"{run_dir} holds {len(old)} [[compare]] variants: resume "
                          "it with its own config (p2pfl resume DIR)")
    raise ConfigError("compare", f"{run_dir} was run with other [[compare]] variants; they "
                      "cannot change on resume (run new ones into a new directory)")


def read_run_config(run_dir: Path, overrides: dict[str, Any] | None = None) -> Config:
    """The config a run directory was run with (its config.json), with dotted-key overrides.

    Parameters
    ----------
    run_dir : the run directory.
    overrides : {dotted key: value}, or None.

    Returns
    -------
    Config.

    Raises
    ------
    ConfigError
        naming resume for a missing, unreadable or invalid config.json, algorithm for an
        algorithm class this process has not registered.
    """
    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise ConfigError("resume", f"{run_dir} holds no config.json: not a p2pfl run directory")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError("resume", f"{path} is not valid JSON: {err}") from None
    except OSError as err:
        raise ConfigError("resume", f"cannot read {path}: {err.strerror or err}") from None
    if not isinstance(raw, dict):
        raise ConfigError("resume", f"{path} holds a JSON {type(raw).__name__}, not a config")
    try:
        return config_with_overrides(as_written(raw), overrides or {})
    except ConfigError as err:
        record = Path(run_dir) / "algorithm.json"
        if err.field == "algorithm.name" and record.exists():
            raise ConfigError("algorithm", f"{run_dir} was run with the algorithm class "
                              f"{_recorded_class(record)}, which this process has not "
                              "registered: resume it from Python, p2pfl.run(cfg, out, "
                              "resume=True, algorithm=...), or import the module that "
                              "registers it") from None
        raise


def _recorded_class(record: Path) -> str:
    try:
        return str(json.loads(record.read_text())["class"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return "recorded in algorithm.json"
