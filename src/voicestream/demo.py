"""`make demo`: speak the benchmark paragraph on the local default and report its timings."""

from __future__ import annotations

from pathlib import Path

from voicestream.engine import load_engine
from voicestream.synthesis import synthesize_timed, write_wav
from voicestream.texts import paragraph


def run_demo(
    out_dir: Path, backend: str | None = None, model_dir: Path | None = None, threads: int | None = None
) -> int:
    engine = load_engine(backend, model_dir, threads)
    text = paragraph()
    result = synthesize_timed(engine, [text])
    path = write_wav(out_dir / "demo.wav", result.audio)
    print(f"text:                {text[:60]}... ({len(text)} chars)")
    print(f"wav:                 {path.resolve()}")
    print(f"audio length:        {result.audio_s:.2f} s")
    print(f"time to first audio: {result.first_chunk_s * 1000:.0f} ms")
    print(f"real-time factor:    {result.real_time_factor:.2f} (compute s per audio s; below 1 is faster)")
    return 0
