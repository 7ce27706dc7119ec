"""`python -m voicestream.kokoro_server [--host] [--port] [--backend] [--threads] [--model-dir]`.

What the container's `serve` entrypoint runs; `voicestream serve --kokoro-only` is the same
thing. Arguments override the VOICESTREAM_* environment (docs/configuration.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from voicestream.env import BACKENDS, ConfigError
from voicestream.kokoro_server import run, settings_with


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicestream.kokoro_server", description=__doc__)
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--backend", choices=BACKENDS, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        settings = settings_with(
            host=args.host, port=args.port, backend=args.backend, threads=args.threads, model_dir=args.model_dir
        )
        run(settings)
    except ConfigError as error:  # a malformed VOICESTREAM_* setting
        print(f"voicestream server: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
