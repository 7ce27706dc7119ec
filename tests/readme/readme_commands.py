"""The commands README.md shows, read from its Commands table, and a way to run them as a user does.

`commands()` is every backticked span in the first cell of each row of the "## Commands" table
(`\\|` inside a span is a pipe), so a command renamed in the README, or a module moved under
it, is what the tests run. `find(text)` is the one command containing `text`.

`Program` runs one command line in bash, in its own process group (a terminal's job), with
the main environment's bin directory first on PATH (where `voicestream` is once the venv is
active); `interrupt()` is Ctrl-C: SIGINT to the whole group.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
VENV_BIN = Path(sys.prefix) / "bin"  # the environment running the tests: the project's .venv
SECTION = "## Commands"
CELL_SEPARATOR = re.compile(r"(?<!\\)\|")
SPAN = re.compile(r"`([^`]+)`")


def commands(readme: Path = README) -> list[str]:
    text = readme.read_text(encoding="utf-8")
    assert SECTION in text, f"{readme} has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found: list[str] = []
    for line in section.splitlines():
        cells = CELL_SEPARATOR.split(line)
        if len(cells) < 3 or set(cells[1].strip()) <= {"-"}:
            continue  # not a row, or the header's rule
        found += [span.replace("\\|", "|") for span in SPAN.findall(cells[1])]
    return found


def find(text: str, readme: Path = README) -> str:
    """The README's one command containing `text`."""
    matching = [command for command in commands(readme) if text in command]
    assert len(matching) == 1, f"README.md's Commands table has {len(matching)} commands with {text!r}: {matching}"
    return matching[0]


# What an enclosing `make test` leaves in the environment: a user's shell has none of it, and with
# it a `make` the README shows prints "Entering directory" lines around its own output.
MAKE_VARIABLES = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")


def shell_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A user's shell: this environment less what an enclosing make set, the project's venv first."""
    user = {name: value for name, value in os.environ.items() if name not in MAKE_VARIABLES}
    return {**user, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", **(extra or {})}


def run(
    command: str, cwd: Path, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """One command line in bash to its end; its output (stdout bytes, stderr bytes)."""
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=shell_env(env), capture_output=True,
        timeout=timeout, check=False,
    )  # fmt: skip


class Program:
    """A long-running command line (a server), its output in a log file."""

    def __init__(self, command: str, cwd: Path, log: Path, env: Mapping[str, str] | None = None) -> None:
        self.command = command
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                ["bash", "-c", command], cwd=cwd, env=shell_env(env), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None:
                raise AssertionError(f"`{self.command}` exited ({self.process.returncode}):\n{self.output()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"`{self.command}`: {what} not within {timeout} s:\n{self.output()[-4000:]}")
            time.sleep(0.5)

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C (SIGINT to the process group), then its exit status."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            output = self.output()[-4000:]
            raise AssertionError(f"`{self.command}` still running {timeout} s after Ctrl-C:\n{output}") from None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@contextlib.contextmanager
def program(command: str, cwd: Path, log: Path, env: Mapping[str, str] | None = None) -> Iterator[Program]:
    started = Program(command, cwd, log, env)
    try:
        yield started
    finally:
        if started.process.poll() is None:
            started.kill()
