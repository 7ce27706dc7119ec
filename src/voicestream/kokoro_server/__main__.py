"""`python -m voicestream.kokoro_server [--host] [--port] [--backend] [--threads] [--model-dir]
[--decoder-windows off|first,growth,largest]`.

What the container's `serve` entrypoint runs; `voicestream serve --kokoro-only` is the same
thing. Arguments override the VOICESTREAM_* environment (docs/configuration.md).
`--decoder-windows off` decodes each sentence in one run (onnx): the audio is then a function of
the text alone, which tests that compare audio byte for byte rely on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from voicestream.env import BACKENDS, RETIRED, ConfigError, Env, decoder_windows
from voicestream.kokoro_server import run, settings_with


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicestream.kokoro_server", description=__doc__)
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--backend", choices=BACKENDS, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--decoder-windows", default=None, help="onnx: off, or first,growth,largest (frames)")
    args = parser.parse_args(argv)
    for name in Env().retired():  # set, but read no more: say so rather than ignore it silently
        print(f"voicestream server: {name} is retired and ignored; instead: {RETIRED[name]}", file=sys.stderr)
    try:
        windows = None if args.decoder_windows is None else decoder_windows(args.decoder_windows)
        settings = settings_with(
            host=args.host,
            port=args.port,
            backend=args.backend,
            threads=args.threads,
            model_dir=args.model_dir,
            decoder_windows=windows,
        )
        run(settings)
    except ConfigError as error:  # a malformed VOICESTREAM_* setting
        print(f"voicestream server: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
