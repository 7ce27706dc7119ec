"""The lock files (scripts/locks.py, docs/testing.md "Lock files"): every environment the project
installs has one, every entry is pinned with its hashes, each covers what its environment declares,
and every installer verifies them. A dependency added without `make lock` fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scripts.locks import (
    ROOT,
    AuditInput,
    Environment,
    LockError,
    audit,
    check,
    coverage_problems,
    load_environments,
    load_ignored,
    parse_lock,
)

HASH = "--hash=sha256:" + "ab" * 32
ENVIRONMENTS = load_environments()


def test_every_installed_environment_has_a_lock() -> None:
    names = {e.name for e in ENVIRONMENTS}
    assert {"build", "main", "torch", "pipecat", "livekit", "sam", "rie", "checkov"} <= names
    assert {"image-torch", "image-engine", "layer"} <= names  # the container images and the Lambda layer
    assert {p.stem for p in (ROOT / "requirements").glob("*.txt")} == names  # no lock left without its environment


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=lambda e: e.name)
def test_lock_is_hashed_and_covers_its_declarations(environment: Environment) -> None:
    locked = parse_lock(environment.lock_path().read_text(), environment.name)  # raises on any unhashed line
    assert locked
    assert coverage_problems(environment, locked) == []


def test_check_passes_on_the_tree() -> None:
    assert check() == []


def _write_project(root: Path, extra_deps: list[str], lock_text: str, provided: list[str] | None = None) -> Environment:
    (root / "requirements").mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "1"\ndependencies = ["starlette==1.10.0"]\n'
        f"[project.optional-dependencies]\nengine = {json.dumps(extra_deps)}\n"
    )
    provided_line = f"provided = {json.dumps(provided)}\n" if provided else ""
    (root / "requirements" / "environments.toml").write_text(
        f'[environments.main]\npython = "3.12"\nextras = ["engine"]\ninstalls = ".venv"\n{provided_line}'
    )
    (root / "requirements" / "main.txt").write_text(lock_text)
    [environment] = load_environments(root)
    return environment


def test_a_declared_dependency_missing_from_the_lock_fails(tmp_path: Path) -> None:
    lock = f"starlette==1.10.0 {HASH}\nnumpy==2.5.5 {HASH}\n"
    environment = _write_project(tmp_path, ["numpy>=2,<3", "onnx==1.23.2"], lock)
    problems = coverage_problems(environment, parse_lock((tmp_path / "requirements/main.txt").read_text()), tmp_path)
    assert len(problems) == 1 and "onnx==1.23.2" in problems[0] and "make lock" in problems[0]
    assert check(tmp_path) == problems


def test_a_locked_version_outside_the_declared_range_fails(tmp_path: Path) -> None:
    environment = _write_project(tmp_path, ["numpy>=2,<3"], f"starlette==1.10.0 {HASH}\nnumpy==1.26.4 {HASH}\n")
    [problem] = coverage_problems(environment, parse_lock((tmp_path / "requirements/main.txt").read_text()), tmp_path)
    assert "numpy" in problem and "1.26.4" in problem


def test_markers_pick_the_declaration_and_the_entry_for_the_environments_python(tmp_path: Path) -> None:
    declarations = ["av==19.0.2; python_version >= '3.12'", "av==18.1.0; python_version < '3.12'"]
    lock = f"starlette==1.10.0 {HASH}\nav==18.1.0 ; python_full_version < '3.12' {HASH}\n"
    environment = _write_project(tmp_path, declarations, lock)
    [problem] = coverage_problems(environment, parse_lock(lock), tmp_path)  # 3.12 needs av 19, the lock has it for 3.11
    assert "av==19.0.2" in problem and "nothing" in problem
    lock += f"av==19.0.2 ; python_full_version >= '3.12' {HASH}\n"
    assert coverage_problems(environment, parse_lock(lock), tmp_path) == []


def test_a_provided_package_is_neither_required_nor_allowed(tmp_path: Path) -> None:
    environment = _write_project(tmp_path, ["torch>=2.10"], f"starlette==1.10.0 {HASH}\n", provided=["torch"])
    assert coverage_problems(environment, parse_lock(f"starlette==1.10.0 {HASH}\n"), tmp_path) == []
    locked = parse_lock(f"starlette==1.10.0 {HASH}\ntorch==2.10.0 {HASH}\n")
    [problem] = coverage_problems(environment, locked, tmp_path)
    assert "provided" in problem


@pytest.mark.parametrize(
    "text",
    [
        "numpy==2.5.5\n",  # no hash
        "numpy==2.5.5 --hash=md5:0123\n",  # not sha256
        "numpy>=2 " + HASH + "\n",  # not pinned
        "-e . " + HASH + "\n",  # editable
        "--index-url https://example.invalid/simple\n",  # an option line
        "numpy @ https://example.invalid/numpy.whl " + HASH + "\n",  # a URL
        "numpy==2.5.5 \\\n    " + HASH + "\nscipy==1.0 \\\n    # via numpy\n",  # second entry unhashed
    ],
)
def test_a_lock_entry_pip_could_not_verify_is_refused(text: str) -> None:
    with pytest.raises(LockError):
        parse_lock(text)


def test_continuation_lines_and_comments_parse() -> None:
    other = HASH.replace("ab", "cd")
    text = f"# header\nnumpy==2.5.5 ; python_full_version >= '3.12' \\\n    {HASH} \\\n    {other}\n    # via x\n"
    [entry] = parse_lock(text)
    assert (entry.name, str(entry.version), len(entry.hashes), entry.line) == ("numpy", "2.5.5", 2, 2)


# --- every installer verifies the locks ---------------------------------------------------------

INSTALLERS = ["Makefile", "layers/voicestream/Makefile", "container/Dockerfile"]
VALUE_OPTIONS = {"-r", "--requirement", "--target", "--platform", "--implementation", "--python-version", "--abi",
                 "--only-binary", "--wheel-dir"}  # fmt: skip


def _pip_installs(path: str) -> list[str]:
    text = (ROOT / path).read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^(\w*INSTALL\w*)\s*:?=\s*(.*)$", text, flags=re.MULTILINE))
    for name, value in variables.items():
        text = text.replace(f"$({name})", value)
    commands = []
    for line in text.splitlines():
        if line.lstrip().startswith("#") or re.match(r"^\w+\s*:?=", line):
            continue
        commands += [c for c in re.split(r"&&|;", line) if re.search(r"pip install\b", c)]
    return commands


# The layer's own wheel, built by the layer's Makefile just before.
BUILT_WHEEL = re.compile(r'"\$\$\(ls "\$\(WHEELS\)"/voicestream-\*\.whl\)"')


def _unverified_arguments(command: str) -> list[str]:
    tokens = BUILT_WHEEL.sub("BUILT-WHEEL", command.split("pip install", 1)[1]).split()
    arguments, skip = [], False
    for token in tokens:
        if skip or (token.startswith("$(") and token.endswith(")") and "ls" not in token):
            skip = False
            continue
        if token.startswith("-"):
            skip = token in VALUE_OPTIONS
            continue
        arguments.append(token)
    return arguments


@pytest.mark.parametrize("path", INSTALLERS)
def test_every_pip_install_checks_hashes_or_installs_a_local_package(path: str) -> None:
    commands = _pip_installs(path)
    assert commands
    for command in commands:
        assert "--no-deps" in command, f"{path}: {command.strip()} resolves dependencies outside the lock"
        if "--require-hashes" in command:
            # $(2): the lock that the Makefile's install_locked is called with.
            assert re.search(r"(-r|--requirement) (\S*requirements/|\$\(2\))", command), command
            continue
        # Without hashes: only the project and the en_core_web_sm shim (directories), or the wheel built from it.
        for argument in _unverified_arguments(command):
            assert argument in {".", "./packaging/en_core_web_sm", "BUILT-WHEEL"}, (
                f"{path}: {command.strip()} installs {argument} without a hash"
            )


# --- make audit ---------------------------------------------------------------------------------


def test_the_committed_ignore_list_gives_a_reason_for_every_entry() -> None:
    for entry in load_ignored():
        assert entry.id and entry.reason


def test_an_ignored_vulnerability_without_a_reason_is_refused(tmp_path: Path) -> None:
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements/audit-ignore.toml").write_text('[[ignore]]\nid = "GHSA-aaaa-bbbb-cccc"\nreason = " "\n')
    with pytest.raises(LockError, match="reason"):
        load_ignored(tmp_path)


def test_audit_input_never_repeats_a_name_in_one_file() -> None:
    one = parse_lock(f"av==19.0.2 {HASH}\nnumpy==2.5.5 {HASH}\n")
    other = parse_lock(f"av==18.1.0 {HASH}\nnumpy==2.5.5 {HASH}\ntorch==2.13.0+cpu {HASH}\n")
    parts = AuditInput.from_locks([("main", one), ("image-engine", other)]).parts
    names = [[line.split()[0] for line in part] for part in parts]
    # Each release once; torch's local build under its public version, the one the services know.
    assert names == [["av==18.1.0", "numpy==2.5.5", "torch==2.13.0"], ["av==19.0.2"]]
    assert all(HASH in line for part in parts for line in part)


def test_audit_says_it_skipped_when_no_service_answers(capsys: pytest.CaptureFixture[str]) -> None:
    assert audit(service=lambda _pip: None) == 0
    assert "SKIPPED" in capsys.readouterr().out
    assert audit(service=lambda _pip: None, required=True) == 1  # AUDIT_REQUIRED=1: a skip is an error
