"""The container's command lines: ``docker`` inspect, events, logs, start, stop, rename, remove, and
the image's digests and the daemon's runtimes."""

from __future__ import annotations

import shlex

from console.probes import docker as docker_probe

q = shlex.quote


def docker_inspect(container: str) -> str:
    return f"docker inspect --format {q(docker_probe.INSPECT_FORMAT)} {q(container)}"


def docker_events(container: str, since: str = "30s") -> str:
    """``--since`` replays the last few seconds (a duration on the station's own clock, so no
    skew): a start that lands between our ``docker inspect`` and the moment the subscription is
    live is not missed. A replayed event only costs one more inspect."""
    return (f"exec docker events --since {q(since)} --filter {q('container=' + container)} "
            f"--format {q(docker_probe.EVENTS_FORMAT)}")


def docker_logs(container: str, tail: int = 1000, follow: bool = True, since: str | None = None) -> str:
    """``--since`` (an RFC3339 time from a previous ``--timestamps`` line) resumes a followed log
    after the container restarts without repeating what was already shown."""
    parts = ["docker", "logs", "--timestamps"]
    if follow:
        parts.append("-f")
    if since:
        parts += ["--since", q(since)]
    else:
        parts += ["--tail", str(int(tail))]
    return "exec " + " ".join(parts) + " " + q(container) + " 2>&1"


def docker_start(container: str) -> str:
    return f"docker start {q(container)}"


def docker_stop(container: str, timeout_s: int = 30) -> str:
    return f"docker stop -t {int(timeout_s)} {q(container)}"


IMAGE_DIGEST_FORMAT = "{{json .RepoDigests}}"


def image_digests(image: str) -> str:
    """The repo digests of a local image (the launch pins the image by digest)."""
    return f"docker image inspect --format {q(IMAGE_DIGEST_FORMAT)} {q(image)}"


def docker_rm(container: str) -> str:
    """Remove a stopped container (the launch clears NAME-prev before keeping the last run there)."""
    return f"docker rm {q(container)}"


def docker_rename(container: str, new_name: str) -> str:
    """Keep the previous run (and its log, the evidence of what went wrong) under another name."""
    return f"docker rename {q(container)} {q(new_name)}"


def docker_image_id(image: str) -> str:
    return f"docker image inspect --format {q('{{.Id}} {{json .RepoDigests}}')} {q(image)}"


def docker_runtimes() -> str:
    return (f"docker info --format {q('{{json .Runtimes}}')} && "
            "{ command -v nvidia-ctk nvidia-container-runtime || true; }")


def docker_inspect_json(container: str) -> str:
    """The whole ``docker inspect`` object (Config.Env, Path/Args, Image, State)."""
    return f"docker inspect {q(container)}"


def log_tail(container: str, lines: int = 200) -> str:
    """The last ``lines`` lines of the container's log (stdout and stderr), once."""
    return docker_logs(container, tail=lines, follow=False).removeprefix("exec ")
