"""`--nproc R`: start R local processes of one distributed run, as `torchrun --standalone
--nproc-per-node R` would, on 127.0.0.1; and whether this process is one of them (`launched`).
No torch here: the command reads it before it imports the engine.

Rank 0's output is the command's; the other ranks' standard output is dropped (it repeats rank
0's) and their errors are shown. When a rank ends with an error, the others are given
`GRACE_S` to end on their own (they notice the lost rank at their next exchange), then
stopped. A Ctrl-C is passed on to every rank, which stop together after the round
(p2pfl.engine.loop); a second one stops them at once. A SIGTERM or SIGHUP stops every rank at once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

GRACE_S = 30.0  # seconds the other ranks get to end after one failed
POLL_S = 0.05


def launched() -> bool:
    """Whether this process is one of several started by torchrun (or `--nproc`).

    Returns
    -------
    bool, WORLD_SIZE > 1.
    """
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def prints() -> bool:
    """Whether this process prints what every process of a distributed run has alike.

    Returns
    -------
    bool, True in a single process, or rank 0 of a distributed run.
    """
    return not launched() or os.environ.get("RANK", "0") == "0"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now.

    Returns
    -------
    int.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    """The environment torchrun gives rank `rank` of `world` on one machine.

    Parameters
    ----------
    rank : this rank.
    world : ranks.
    port : the rendezvous port on 127.0.0.1.

    Returns
    -------
    dict, os.environ with MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
    LOCAL_WORLD_SIZE and OMP_NUM_THREADS.
    """
    return {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world), "OMP_NUM_THREADS": os.environ.get(
                "OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world)))}


def spawn(argv: list[str], nproc: int) -> int:
    """Run `python -m p2pfl *argv` as `nproc` ranks.

    Parameters
    ----------
    argv : the command's arguments.
    nproc : ranks.

    Returns
    -------
    int, the exit status of the run: rank 0's, or the first failed rank's when rank 0 succeeded;
    128 + N for a rank killed by signal N, as a shell reports it.
    """
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "p2pfl", *argv],
                              env=rank_env(r, nproc, port), start_new_session=True,
                              stdout=None if r == 0 else subprocess.DEVNULL)
             for r in range(nproc)]

    def forward(signum: int, frame: Any) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # the ranks are stopped below

    # the ranks run in their own sessions: a SIGTERM or SIGHUP to this process must reach them
    previous = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, forward),
                                                    (signal.SIGTERM, stop), (signal.SIGHUP, stop))}
    try:
        failed_at = None
        while any(p.poll() is None for p in procs):
            if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > GRACE_S:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            time.sleep(POLL_S)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = [c if c >= 0 else 128 - c for c in (p.returncode for p in procs)]  # 137: SIGKILL
    return codes[0] if codes[0] != 0 else next((c for c in codes if c != 0), 0)
