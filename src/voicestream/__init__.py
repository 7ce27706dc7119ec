"""voicestream: low-latency streaming speech for voice agents (Kokoro-82M, bidirectional sessions)."""

__version__ = "0.1.0"
