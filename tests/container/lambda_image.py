"""The Lambda emulation image (tests/container/lambda/Dockerfile), built with no registry.

Its context is assembled here as a tar: the Dockerfile, this machine's CPython 3.12 (the
interpreter behind the main venv, its shared library and standard library, less the tests,
static library, IDLE/Tk and site-packages),
awslambdaric as `make venv-sam` installed it for Python 3.12 (.venv-sam/rie) and the
bootstrap. The tag is a hash of all of it and of the Debian image: built only when missing.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).parent / "lambda"
REPOSITORY = "voicestream-lambda-python"
LABEL = "voicestream.test=lambda-emulation"  # the Dockerfile's, inherited by SAM's invoke images
PYTHON_PREFIX = Path(sys.base_prefix)  # the real 3.12 (pyenv's), not a venv
# Only the interpreter, its shared library and its standard library: a prefix may be /usr.
PYTHON_PARTS = ("bin/python3.12", "lib/libpython3.12*", "lib/python3.12")
# Parts of the standard library a Lambda runtime never imports; 230 MB of pyenv's 310.
SKIPPED = {"test", "idlelib", "tkinter", "turtledemo", "__pycache__", "site-packages", "dist-packages"}
SKIPPED_PREFIXES = ("config-3.",)  # libpython3.12.a and the build's Makefile


def python_files(prefix: Path = PYTHON_PREFIX) -> Iterator[Path]:
    for top in sorted(path for pattern in PYTHON_PARTS for path in prefix.glob(pattern)):
        for path in [top] if not top.is_dir() or top.is_symlink() else sorted(top.rglob("*")):
            parts = path.relative_to(prefix).parts
            if any(part in SKIPPED or part.startswith(SKIPPED_PREFIXES) for part in parts):
                continue
            if path.is_file() or path.is_symlink():
                yield path


def context_members(ric_dir: Path) -> Iterator[tuple[str, Path]]:
    """(name in the context, file on this machine) for every file the image needs."""
    yield "Dockerfile", HERE / "Dockerfile"
    yield "runtime/bootstrap", HERE / "bootstrap"
    for path in python_files():
        yield f"python/{path.relative_to(PYTHON_PREFIX).as_posix()}", path
    for path in sorted(ric_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield f"runtime/{path.relative_to(ric_dir).as_posix()}", path


def context_tar(ric_dir: Path) -> tuple[bytes, str]:
    """The context as a tar, and a hash of its names, modes, link targets and bytes."""
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, path in context_members(ric_dir):
            info = archive.gettarinfo(str(path), arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 1577836800, 0, 0, "root", "root"
            digest.update(f"{name}\0{info.mode:o}\0{info.linkname}\0".encode())
            if info.isfile():
                data = path.read_bytes()
                digest.update(hashlib.sha256(data).digest())
                archive.addfile(info, io.BytesIO(data))
            else:
                archive.addfile(info)
    return buffer.getvalue(), digest.hexdigest()


def build(debian_image: str, ric_dir: Path) -> str:
    """The image's name, built when no image has this context's tag."""
    tar, context_hash = context_tar(ric_dir)
    debian_id = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", debian_image],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    tag = hashlib.sha256(f"{context_hash}\0{debian_id}".encode()).hexdigest()[:12]
    image = f"{REPOSITORY}:{tag}"
    exists = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False, timeout=60)
    if exists.returncode != 0:
        result = subprocess.run(
            ["docker", "build", "--network", "host", "--build-arg", f"DEBIAN_IMAGE={debian_image}",
             "--build-arg", f"PYTHON_PREFIX={PYTHON_PREFIX}", "--tag", image, "-"],
            input=tar, capture_output=True, timeout=1200, check=False,
        )  # fmt: skip
        output = (result.stdout + result.stderr).decode(errors="replace")
        assert result.returncode == 0, f"building {image} failed:\n{output[-4000:]}"
        remove_other_tags(image)
    return image


def remove_other_tags(image: str) -> None:
    """Earlier builds of this repository: superseded, they would only take disk."""
    listed = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", image.split(":")[0]],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    stale = [name for name in listed if name != image]
    if stale:
        subprocess.run(["docker", "rmi", *stale], capture_output=True, check=False, timeout=120)
