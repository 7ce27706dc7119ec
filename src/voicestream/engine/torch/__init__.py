"""The PyTorch runtime (kokoro's KModel): the GPU engine of the production container."""

from voicestream import env

# PyTorch runs its CPU ops on OpenMP threads (libgomp) that spin after every parallel region. On
# a host where another process takes a core, a spinning thread holds the core its partner needs,
# and each of a window's many ops waits out a scheduler time slice: the engine ran several times
# slower (docs/engine.md, "Idle threads sleep"); the ONNX engine's threads do not spin either.
# libgomp reads this once, as torch loads: it is set here, before this package imports torch,
# and a value the user set wins.
env.export_default("OMP_WAIT_POLICY", "PASSIVE")
