"""The README tier: the container tier's Docker engine, for `make image` and `make run-image`, and
its summary line saying which engine and network ran."""

from tests.container.conftest import docker_engine, pytest_terminal_summary  # noqa: F401 (shared)
