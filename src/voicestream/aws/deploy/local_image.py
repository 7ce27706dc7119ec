"""The CPU image on this machine: built from container/Dockerfile with no registry, run as SageMaker runs it.

    python -m voicestream.aws.deploy.local_image build [--tag T] [--debian-image IMAGE]   (make image)
    python -m voicestream.aws.deploy.local_image run [--tag T] [--model-dir D] [--port P]  (make run-image)

The build has three steps, each cached:
1. a Debian bookworm image: `--debian-image` (e.g. debian:bookworm-slim where Docker Hub is
   reachable), else container/local/debian-image builds one with debootstrap (root, Debian);
2. the base, container/local/cpu-base.Dockerfile on it (Python in a venv), tagged with a hash
   of that Dockerfile and the Debian image's id and built only when that tag is missing;
3. container/Dockerfile on the base with the ONNX engine (EXTRAS=engine, BACKEND=onnx).
The build context is sent as a tar of exactly the files the deploy's context has
(image.build_context), so any Docker builder, legacy or BuildKit, sees the same files.
Builds use the host's network: no bridge network is needed.

`run` starts it as SageMaker does, locked down for a developer's machine (run_command): the
image's unprivileged user, the model read-only, only a cache volume and /tmp writable, and the
server on 127.0.0.1 of the host's network, not on every interface.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.image import DOCKERFILE, BuildContext, build_context
from voicestream.env import server_settings

LOCAL_TAG = "voicestream-kokoro:local"
BASE_REPOSITORY = "voicestream-cpu-base"
BASE_DOCKERFILE = "container/local/cpu-base.Dockerfile"
DEBIAN_SCRIPT = "container/local/debian-image"
MODEL_MOUNT = "/opt/ml/model"  # where SageMaker unpacks the model artifact
CACHE_MOUNT = "/var/cache/voicestream"  # the image's XDG_CACHE_HOME, its user's only writable directory
CACHE_VOLUME = "voicestream-cache"
LOCAL_HOST = "127.0.0.1"  # the image listens on 0.0.0.0 (its own network on SageMaker); here, on loopback
# The ONNX engine only, installed from its lock (requirements/environments.toml: image-engine).
CPU_BUILD_ARGS = {"EXTRAS": "engine", "BACKEND": "onnx", "LOCK": "requirements/image-engine.txt"}
TITLE_LABEL = "org.opencontainers.image.title=voicestream-kokoro"  # container/Dockerfile's
BUILD_TIMEOUT_S = 1800.0


# What makes a directory the voicestream checkout: the build needs these, wherever the module sits.
CHECKOUT_MARKERS = ("pyproject.toml", DOCKERFILE, DEBIAN_SCRIPT)


def is_checkout(path: Path) -> bool:
    return all((path / marker).is_file() for marker in CHECKOUT_MARKERS)


def repository_root(start: Path | None = None) -> Path:
    """The voicestream checkout to build from: the nearest directory at or above `start` (default:
    the working directory) that holds the build's files, else the checkout this module was
    installed from (an editable install). Found by its files, not by this module's depth in it,
    so that moving the module cannot send the build to the wrong directory."""
    here = (start or Path.cwd()).resolve()
    module = Path(__file__).resolve()
    for candidate in (here, *here.parents, *module.parents):
        if is_checkout(candidate):
            return candidate
    raise DeployError(f"no voicestream checkout at or above {here} (nor around {module}): run from the checkout")


def docker(*args: str, stdin: bytes | None = None, timeout: float = BUILD_TIMEOUT_S) -> None:
    """Run the docker CLI, its output shown as it comes."""
    try:
        result = subprocess.run(["docker", *args], input=stdin, timeout=timeout, check=False)
    except FileNotFoundError:
        raise DeployError("docker is not installed") from None
    if result.returncode != 0:
        raise DeployError(f"`docker {args[0]}` failed (exit {result.returncode}); see its output above")


def image_id(image: str) -> str | None:
    result = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else None


def debian_image(root: Path) -> str:
    """A local Debian bookworm image (debootstrap), built when missing; its name."""
    script = root / DEBIAN_SCRIPT
    result = subprocess.run([str(script)], stdout=subprocess.PIPE, timeout=BUILD_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise DeployError(f"{DEBIAN_SCRIPT} failed (exit {result.returncode}); see its output above")
    return result.stdout.decode().strip().splitlines()[-1]


def base_image(root: Path, debian: str) -> str:
    """Debian + Python (cpu-base.Dockerfile), tagged by what it is made of; built when missing."""
    debian_id = image_id(debian)
    if debian_id is None:
        raise DeployError(f"Debian image {debian} not found: docker pull it, or leave --debian-image out")
    dockerfile = (root / BASE_DOCKERFILE).read_bytes()
    tag = hashlib.sha256(dockerfile + debian_id.encode()).hexdigest()[:12]
    image = f"{BASE_REPOSITORY}:{tag}"
    if image_id(image) is None:
        print(f"local_image: building {image} on {debian}", file=sys.stderr)
        # No context: the Dockerfile copies nothing.
        docker("build", "--network", "host", "--build-arg", f"DEBIAN_IMAGE={debian}", "--tag", image, "-",
               stdin=dockerfile)  # fmt: skip
        remove_other_tags(image)
    return image


def remove_other_tags(image: str) -> None:
    """Earlier builds of this image's repository: superseded, they would only take disk."""
    repository = image.rsplit(":", 1)[0]
    listed = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repository],
        capture_output=True, text=True, timeout=60, check=False,
    ).stdout.split()  # fmt: skip
    stale = [name for name in listed if name != image]
    if stale:
        subprocess.run(["docker", "rmi", *stale], capture_output=True, timeout=120, check=False)


def context_tar(context: BuildContext) -> bytes:
    """The build context as the tar `docker build -` reads: names, bytes and modes, fixed times."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in context.files:
            path = context.root / name
            info = tarfile.TarInfo(name)
            info.size = path.stat().st_size
            info.mode = path.stat().st_mode & 0o777
            info.mtime = 1577836800  # 2020-01-01: the same files give the same archive
            with path.open("rb") as handle:
                archive.addfile(info, handle)
    return buffer.getvalue()


def require_engine() -> None:
    try:
        probe = subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False)
    except FileNotFoundError:
        raise DeployError("docker is not installed (Debian: apt-get install docker.io)") from None
    if probe.returncode != 0:
        raise DeployError("no Docker engine answers: start it (dockerd, or your Docker service) and try again")


def build(root: Path, tag: str = LOCAL_TAG, debian: str | None = None) -> str:
    """Build the CPU image (all three steps); its name."""
    require_engine()
    base = base_image(root, debian or debian_image(root))
    print(f"local_image: building {tag} on {base}", file=sys.stderr)
    build_args = [arg for name, value in {"BASE_IMAGE": base, **CPU_BUILD_ARGS}.items()
                  for arg in ("--build-arg", f"{name}={value}")]  # fmt: skip
    docker("build", "--network", "host", "--file", DOCKERFILE, *build_args, "--tag", tag, "-",
           stdin=context_tar(build_context(root)))  # fmt: skip
    # The build the tag moved away from (untagged now) would otherwise pile up, one per change.
    docker("image", "prune", "--force", "--filter", f"label={TITLE_LABEL}", timeout=120)
    return tag


def run_command(
    image: str,
    model_dir: Path,
    port: int,
    *,
    name: str | None = None,
    detach: bool = False,
    env: dict[str, str] | None = None,
    host: str = LOCAL_HOST,
    cache_volume: str = CACHE_VOLUME,
) -> list[str]:
    """`docker run <image> serve` as SageMaker starts it, the model directory read-only at
    /opt/ml/model, locked down for a developer's machine: the server listens on `host`
    (loopback) and `port` of the host's network; the image's unprivileged user, a read-only
    root filesystem, no capabilities; the only writable places its cache (a named volume, so
    the graphs derived from the model survive a restart) and a /tmp in memory, with `exec`,
    which Docker leaves out by default: phonemizer loads its copy of libespeak-ng from there."""
    command = ["docker", "run", "--network", "host", "--read-only", "--tmpfs", "/tmp:rw,exec,nosuid,nodev"]
    command += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    command += ["--volume", f"{model_dir.resolve()}:{MODEL_MOUNT}:ro"]
    command += ["--mount", f"type=volume,source={cache_volume},destination={CACHE_MOUNT}"]
    command += ["--env", f"VOICESTREAM_HOST={host}", "--env", f"VOICESTREAM_PORT={port}"]
    for key, value in (env or {}).items():
        command += ["--env", f"{key}={value}"]
    command += ["--name", name] if name else []
    command += ["--detach"] if detach else ["--rm"]
    return [*command, image, "serve"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m voicestream.aws.deploy.local_image", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="build the CPU image")
    build_parser.add_argument("--tag", default=LOCAL_TAG)
    build_parser.add_argument("--debian-image", default=None, help="a Debian bookworm image to build on")
    build_parser.add_argument("--root", type=Path, default=None, help="the checkout (default: found from .)")
    run_parser = commands.add_parser("run", help="run the image as SageMaker does (Ctrl-C stops it)")
    run_parser.add_argument("--tag", default=LOCAL_TAG)
    run_parser.add_argument("--model-dir", type=Path, default=None, help="default: the model cache")
    run_parser.add_argument("--port", type=int, default=server_settings().port)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            root = repository_root() if args.root is None else args.root.resolve()
            if not is_checkout(root):
                raise DeployError(f"{root} is not a voicestream checkout (no {', '.join(CHECKOUT_MARKERS)})")
            print(build(root, args.tag, args.debian_image))
            return 0
        from voicestream.env import default_model_dir

        model_dir = args.model_dir or default_model_dir()
        if not model_dir.is_dir():
            raise DeployError(f"model directory {model_dir} not found: run `make models`")
        # Named by its port: another run on the same port is refused by name, not by a bind error.
        command = run_command(args.tag, model_dir, args.port, name=f"voicestream-kokoro-{args.port}")
        print(" ".join(command), file=sys.stderr)
        os.execvp(command[0], command)  # docker run forwards Ctrl-C / SIGTERM to the server
    except DeployError as error:
        print(f"local_image: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
