"""Peak memory of a block of work: CUDA allocator peak, or CPU resident-set growth.

`PeakMemory` reports how far memory rose above its level at entry, in bytes:
- CUDA: `torch.cuda.max_memory_allocated` (exact; the caching allocator's reserve not included);
- CPU: resident set size (RSS). When the process's lifetime peak (`getrusage` ru_maxrss) rose
  inside the block, that exact peak is used; otherwise (an earlier block peaked higher) the peak
  of RSS sampled from /proc/self/statm every 2 ms by a background thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
import sys
import threading
from types import TracebackType

import torch

SAMPLE_S = 0.002
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux


def current_rss() -> int | None:
    """Resident set size of this process.

    Returns
    -------
    int, bytes; None where /proc is missing.
    """
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return None


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _MAXRSS_UNIT


def release_memory(device: torch.device) -> None:
    """Free what earlier work left cached (Python garbage, the CUDA cache, glibc's free lists), so
    that the next block's growth starts from a low base.

    Parameters
    ----------
    device : the device whose cache is freed.
    """
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakMemory:
    """Context manager; `peak_bytes` after exit is the rise of memory above its entry level."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._sampled = 0
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return self
        self._base = current_rss() or _max_rss()
        self._max_rss_at_entry = _max_rss()
        self._sampled = self._base
        if current_rss() is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sampled = max(self._sampled, current_rss() or 0)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - self._base
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sampled = max(self._sampled, current_rss() or 0)
        max_rss = _max_rss()
        peak = max_rss if max_rss > self._max_rss_at_entry else self._sampled
        self.peak_bytes = max(0, peak - self._base)
