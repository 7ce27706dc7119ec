"""The synthesizing process's heap policy (kokoro_server/process_memory.py), on this machine's glibc.

Each case runs in a fresh interpreter: malloc's thresholds are process-wide and, once glibc has
adjusted them, cannot be observed fresh. The pattern is a synthesis's: one large block freed
(which raises glibc's dynamic mmap threshold above it), then many mid-sized blocks allocated
and freed while smaller blocks allocated between them stay alive (so no free block lies at the
heap's top, where glibc would trim it).
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

PATTERN = """
import ctypes, sys
from voicestream.kokoro_server.process_memory import return_freed_memory_to_the_os
if sys.argv[1] == "policy":
    assert return_freed_memory_to_the_os()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

def touched(size):
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    return block

libc.free(touched(16 << 20))  # a large block, freed: glibc's threshold follows it up
before = rss_mib()
blocks, pins = [], []
for _ in range(100):
    blocks.append(touched(2 << 20))
    pins.append(touched(200 << 10))
for block in blocks:
    libc.free(block)
print(round(rss_mib() - before - 100 * 200 / 1024, 1))  # the live 200 KiB blocks do not count
"""


def kept_mib(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def test_freed_blocks_go_back_to_the_os_under_the_policy_and_stay_without_it() -> None:
    with_policy, without = kept_mib("policy"), kept_mib("default")
    print(f"RSS kept of 200 MiB freed: {with_policy} MiB with the policy, {without} MiB with glibc's default")
    assert with_policy < 10
    assert without > 150  # what the policy prevents: the pattern does hold memory by default
