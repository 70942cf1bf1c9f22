"""The one place that talks to Docker (through python-on-whales, argument lists only)."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache

from python_on_whales import DockerClient
from python_on_whales.exceptions import DockerException

from lab import config
from lab.errors import EnvironmentProblem

SETUP_HINT = "run `bash scripts/setup.sh` (installs and starts Docker if needed)"


@cache
def client(profiles: tuple[str, ...] = ()) -> DockerClient:
    """The lab's compose project; `profiles` also enables optional services (e.g. grafana)."""
    if shutil.which("docker") is None:
        raise EnvironmentProblem(f"the docker command is not installed: {SETUP_HINT}")
    return DockerClient(
        compose_files=[config.COMPOSE_FILE],
        compose_project_name=config.PROJECT,
        compose_project_directory=config.ROOT,
        compose_profiles=list(profiles),
    )


def image_available(image: str, pull_timeout_s: float) -> bool:
    """True if the image is here, or a `docker pull` of it succeeds within the timeout."""
    if client().image.exists(image):
        return True
    try:
        done = subprocess.run(["docker", "pull", "-q", image], capture_output=True, timeout=pull_timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def require_engine() -> DockerClient:
    docker = client()
    try:
        docker.system.info()
    except DockerException as e:
        first = (e.stderr or str(e)).strip().splitlines()
        why = first[-1] if first else "no answer"
        raise EnvironmentProblem(f"Docker engine not reachable ({why}): {SETUP_HINT}") from None
    if not docker.compose.is_installed():
        raise EnvironmentProblem(f"Docker Compose v2 is not installed: {SETUP_HINT}")
    return docker


def exec_in(container: str, command: list[str]) -> str:
    """Run a command in a lab container and return its stdout (raises DockerException on failure)."""
    return client().container.execute(container, command)
