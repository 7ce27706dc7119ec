"""`voicestream deploy | validate | benchmark | destroy`: arguments in, the commands called.

`register(commands)` adds the subcommands to the main parser (voicestream.cli). Expected
failures (no credentials, a failed step) print one line and exit 2, never a stack trace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.pins import MODEL_REVISION


def _settings(args: argparse.Namespace) -> Any:
    from voicestream.aws.deploy.commands import Settings

    return Settings(
        stack_name=args.stack_name,
        root=args.root,
        region=args.region,
        profile=args.profile,
        builder=getattr(args, "builder", "auto"),
        model_cache=getattr(args, "model_cache", None),
        revision=getattr(args, "revision", MODEL_REVISION),
        validate=not getattr(args, "skip_validate", False),
        update_stack=not getattr(args, "skip_stack", False),
        speech_model=getattr(args, "speech_model", None),
    )


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except DeployError as error:
            print(f"voicestream: {error}", file=sys.stderr)
            return 2

    return handler


def _deploy(args: argparse.Namespace) -> int:
    from voicestream.aws.deploy.commands import deploy

    return deploy(_settings(args))


def _validate(args: argparse.Namespace) -> int:
    from voicestream.aws.deploy.commands import validate

    return validate(_settings(args))


def _benchmark(args: argparse.Namespace) -> int:
    from voicestream.aws.deploy.commands import benchmark

    payload: dict[str, Any] = {"trials": args.trials}
    if args.text is not None:
        payload["text"] = args.text
    if args.prompt is not None:
        payload["prompt"] = args.prompt
    return benchmark(_settings(args), payload)


def _destroy(args: argparse.Namespace) -> int:
    from voicestream.aws.deploy.commands import destroy

    return destroy(_settings(args), assume_yes=args.yes)


def register(commands: Any) -> None:
    """Add the AWS subcommands to `commands` (the main parser's subparsers)."""

    def aws_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--stack-name", default="voicestream", help="CloudFormation stack (default: voicestream)")
        sub.add_argument("--region", default=None, help="AWS region (default: your AWS configuration's)")
        sub.add_argument("--profile", default=None, help="AWS profile (default: your AWS configuration's)")
        sub.add_argument("--root", type=Path, default=Path.cwd(), help="the voicestream checkout (default: .)")

    deploy = commands.add_parser("deploy", help="deploy to AWS: stack, model data, image, endpoint, validation")
    aws_options(deploy)
    deploy.add_argument(
        "--builder", choices=("auto", "docker", "codebuild"), default="auto",
        help="where the server image is built (auto: local Docker if it runs, else CodeBuild)",
    )  # fmt: skip
    deploy.add_argument("--model-cache", type=Path, default=None, help="local copy of the model files")
    deploy.add_argument("--revision", default=MODEL_REVISION, help="hexgrad/Kokoro-82M revision (pinned default)")
    deploy.add_argument(
        "--speech-model", choices=("kokoro", "qwen3-tts"), default=None,
        help="the endpoint's model (template parameter SpeechModel; default: the stack's, kokoro for a new one); "
        "qwen3-tts runs AWS's vLLM-Omni image: no image build, no model upload",
    )  # fmt: skip
    deploy.add_argument("--skip-validate", action="store_true", help="do not run the deploy-validate state machine")
    deploy.add_argument(
        "--skip-stack",
        action="store_true",
        help="use the stack as deployed: no sam build/deploy (model, image, endpoint only)",
    )
    deploy.set_defaults(handler=_guarded(_deploy))

    validate = commands.add_parser("validate", help="run the deploy-validate state machine, print its report")
    aws_options(validate)
    validate.set_defaults(handler=_guarded(_validate))

    bench = commands.add_parser("benchmark", help="run the benchmark state machine (report also in S3)")
    aws_options(bench)
    bench.add_argument("--trials", type=int, default=5)
    bench.add_argument("--text", default=None, help="paragraph for the isolated experiment")
    bench.add_argument("--prompt", default=None, help="prompt for the agent experiment")
    bench.set_defaults(handler=_guarded(_benchmark))

    destroy = commands.add_parser("destroy", help="teardown state machine, then sam delete")
    aws_options(destroy)
    destroy.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    destroy.set_defaults(handler=_guarded(_destroy))
