"""The README tier: the Docker engine of the container tier, for `make image` and `make run-image`."""

from tests.container.conftest import docker_engine  # noqa: F401 (the container tier's engine, shared)
