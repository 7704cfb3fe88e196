"""The run directory: resolved config, per-round metrics (append-only), summary, plots.

Every file but `metrics.jsonl` is written whole to a temporary file in the same directory, flushed
to disk and renamed over its name, so a reader (or a resumed run) sees the old version or the new
one, never a mix. `metrics.jsonl` is appended one flushed line per round; a kill can leave only its
last line torn, and readers drop such a line.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from p2pfl.config import ConfigError

METRICS = "metrics.jsonl"
DIVERGED = "diverged.json"  # written by a run that diverged: {"round": r, "message": ...}
HONEST_OF = {  # a metric over all nodes -> the same over the honest ones (runs with attackers)
    "test_acc_local_mean": "test_acc_honest_mean",
    "test_acc_local_min": "test_acc_honest_min",
    "consensus_dist": "consensus_dist_honest",
}
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A temporary file next to `path` that replaces it on a clean exit.

    On a clean exit the file is flushed to disk and renamed over `path`; on an exception it is
    removed and `path` is left as it was.

    Parameters
    ----------
    path : the file to write.
    mode : the open mode.

    Yields
    ------
    the open temporary file.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (read in 1 MiB blocks).

    Parameters
    ----------
    path : the file.

    Returns
    -------
    str, hex digest.
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def strict(obj: Any) -> Any:
    """`obj` with every NaN or infinite float replaced by None, so that it is strict JSON.

    A round where no node trained has no train_loss: null.

    Parameters
    ----------
    obj : JSON-like data (dicts, lists, tuples, numbers, ...).

    Returns
    -------
    the same structure, tuples made lists.
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """Strict JSON (non-finite floats as null), keys sorted.

    Parameters
    ----------
    obj : JSON-like data.
    **kwargs : json.dumps's (indent, ...).

    Returns
    -------
    str.
    """
    return json.dumps(strict(obj), sort_keys=True, allow_nan=False, **kwargs)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temporary file in the same directory, then rename it over `path`.

    Parameters
    ----------
    path : the file.
    obj : JSON-like data (strict: non-finite floats as null).
    """
    with atomic_file(path) as f:
        f.write(dumps(obj, indent=2) + "\n")


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and flush it to disk.

    Parameters
    ----------
    path : the .jsonl file.
    record : the line's data.
    """
    with open(path, "a") as f:
        f.write(dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl.

    null is read as NaN (a metric with no value that round); a torn last line (a killed writer)
    is dropped.

    Parameters
    ----------
    path : the metrics.jsonl.

    Returns
    -------
    list of dict, one per round.

    Raises
    ------
    ConfigError
        naming the file when it cannot be read, or a line that does not parse anywhere but at the
        end (corruption, not a kill), or is no round's metrics.
    """
    try:
        lines = Path(path).read_text().split("\n")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(str(path), f"cannot be read as metrics: {err}") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # the last line, without its newline: torn by a kill
                break
            record = None
        if not (isinstance(record, dict) and isinstance(record.get("round"), int)):
            raise ConfigError(str(path), f"line {number} is not a round's metrics (a JSON object "
                              "with its round): file corrupted")
        records.append({k: math.nan if v is None else v for k, v in record.items()})
    return records


def rewrite_metrics(path: Path, records: list[dict[str, Any]]) -> None:
    """Replace a metrics.jsonl by `records` atomically (a resume: the checkpoint's rounds).

    Parameters
    ----------
    path : the metrics.jsonl.
    records : the rounds to keep.
    """
    with atomic_file(path) as f:
        for record in records:
            f.write(dumps(record) + "\n")


def read_divergence(run_dir: Path) -> dict[str, Any] | None:
    """The divergence record of a run (diverged.json), or None for a run that did not diverge.

    Parameters
    ----------
    run_dir : the run directory.

    Returns
    -------
    dict with "round" (1-based, the round that diverged) and "message", or None.
    """
    path = Path(run_dir) / DIVERGED
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("round"), int) else None
