"""The heap policy of a process that synthesizes: freed memory goes back to the OS.

glibc's malloc serves blocks above `M_MMAP_THRESHOLD` (128 KiB at start) with their own mmap,
returned on free. But the threshold is dynamic: each time such a block is freed, the threshold
rises to its size (up to 32 MiB), so from then on the decoder's per-window tensors and the
audio arrays (hundreds of KiB to tens of MiB, allocated and freed by every synthesis, in
several threads) come from the heaps instead, where freed memory stays in the process unless
it happens to lie at a heap's top. Measured on a 300-session soak of the real server
(benchmarks/soak.py, docs/engine-evidence.md): idle RSS 386 → 472 MiB (+22%) with glibc's default,
234 → 243 MiB (+4%) with the thresholds fixed as below: lower and flat.

Fixing both thresholds (which turns the dynamic adjustment off, as mallopt(3) documents) makes
every block of at least `MMAP_THRESHOLD_BYTES` an mmap of its own again, and lets a heap give
back a free top above `TRIM_THRESHOLD_BYTES`. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
from functools import cache
from typing import Final

logger = logging.getLogger(__name__)

# mallopt(3) parameter numbers, from glibc's <malloc.h>.
M_TRIM_THRESHOLD: Final = -1
M_MMAP_THRESHOLD: Final = -3

MMAP_THRESHOLD_BYTES: Final = 1 << 20  # below every decoder window's large tensors, above small objects
TRIM_THRESHOLD_BYTES: Final = 4 << 20


@cache
def return_freed_memory_to_the_os() -> bool:
    """Set the process's malloc thresholds (once; later calls return the first result).
    True when they were set; False where the C library has no mallopt (not glibc)."""
    libc = _glibc()
    if libc is None:
        logger.info("not glibc: the process keeps its C library's malloc policy")
        return False
    # mallopt returns 1 on success, 0 on error.
    ok = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1)
    ok = bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1) and ok
    if not ok:
        logger.warning("mallopt refused the thresholds: freed memory may stay in the process")
    return ok


def release_freed_memory() -> None:
    """Give the heaps' free pages back to the OS (glibc's malloc_trim; a no-op elsewhere).

    The thresholds above return large blocks on free; what they cannot return is the free
    space between live small blocks that many syntheses leave in the heaps (one heap per
    thread): over a 1,000-session soak, idle RSS still crept up by ~7% from that alone, and
    a trim when idle brought it back every time (benchmarks/soak.py, docs/engine-evidence.md). A trim
    costs ~35 ms after 275 MiB of scattered frees, well under 1 ms when there is little to
    return: call it when the process is idle, never on a latency path."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@cache
def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (mallopt and malloc_trim are its own), else None."""
    if platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
