"""How the ONNX engine sets up onnxruntime's memory: the arena, and when it gives memory back.

onnxruntime's CPU arena keeps every block it ever allocated: one long input (a ~500-phoneme
piece needs most of a gigabyte of intermediate tensors in the decoder) raised the process's RSS
for good. Measured on the real model (benchmarks/memory.py; the numbers: docs/engine-evidence.md,
"Why these sizes", and benchmarks/REPORT.md):

- default arena: most of that kept for good;
- no arena (`enable_cpu_mem_arena = False`): RSS returns, but every run pays malloc for
  each tensor: noticeably slower;
- arena with shrinkage after each run (the run option below): next to nothing kept and the speed
  unchanged: the arena's blocks are reused within a run, and released when it ends.

So: keep the arena, shrink it after every run. The option is documented in onnxruntime's
`onnxruntime_run_options_config_keys.h` (kOrtRunOptionsConfigEnableMemoryArenaShrinkage).
"""

from __future__ import annotations

from typing import Any, Final

ARENA_SHRINKAGE_KEY: Final = "memory.enable_memory_arena_shrinkage"
ARENA_SHRINKAGE_CPU: Final = "cpu:0"


def session_options(onnxruntime: Any, threads: int) -> Any:
    """SessionOptions for one inference session: `threads` intra-op threads, the CPU arena on
    (shrinkage needs it: the run option below is refused without an arena)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = True
    return options


def run_options(onnxruntime: Any) -> Any:
    """RunOptions for every `session.run`: return the arena's free blocks after the run."""
    options = onnxruntime.RunOptions()
    options.add_run_config_entry(ARENA_SHRINKAGE_KEY, ARENA_SHRINKAGE_CPU)
    return options
