"""`python -m voicestream.server [--host] [--port] [--backend] [--threads] [--model-dir]`.

What the container's `serve` entrypoint runs; `voicestream serve` is the same thing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from voicestream.server import run
from voicestream.server.config import DEFAULT_HOST, DEFAULT_PORT


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicestream.server", description=__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--backend", choices=("onnx", "torch"), default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        run(args.host, args.port, args.backend, args.threads, args.model_dir)
    except ValueError as error:  # a malformed VOICESTREAM_* setting
        print(f"voicestream server: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
