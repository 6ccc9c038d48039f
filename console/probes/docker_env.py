"""``docker inspect NAME`` (the JSON array) -> what a container runs with: its environment, the exact
command line, the image (tag, image ID) and when it started.

The environment is a list of ``KEY=VALUE`` strings (``"HF_TOKEN=[secret]"`` may be anything): values
of secret names (``is_secret_name``) are never kept, only that they are set. ``Path`` + ``Args`` is the process the
container runs (the engine's command line with ``--master-addr`` and friends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from console.secrets import is_secret_name
from console.probes import ParseError

# The variables the NCCL workbench compares between stations.
PREFIXES = ("NCCL_", "GLOO_", "UCX_", "VLLM_", "TORCH_NCCL_", "SGLANG_", "TP_SOCKET_IFNAME")
REDACTED = "<set, value hidden>"


@dataclass(frozen=True)
class ContainerRuntime:
    name: str
    state: str  # running | exited | created | ...
    started_at: str | None
    finished_at: str | None
    exit_code: int | None
    image: str | None  # Config.Image: the reference it was started from (tag or repo@sha256)
    image_id: str | None  # .Image: the local image ID (sha256 of the config), not a registry digest
    env: dict[str, str] = field(default_factory=dict)  # secrets as REDACTED
    argv: tuple[str, ...] = ()  # Path + Args

    @property
    def running(self) -> bool:
        return self.state == "running"

    def selected_env(self, prefixes: tuple[str, ...] = PREFIXES) -> dict[str, str]:
        return {k: v for k, v in sorted(self.env.items()) if k.startswith(prefixes)}


def parse_env_list(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = str(item).partition("=")
        if not key:
            continue
        out[key] = REDACTED if is_secret_name(key) else (value if sep else "")
    return out


def parse_inspect_json(name: str, text: str) -> ContainerRuntime | None:
    """``docker inspect NAME`` output; None when the container does not exist ("No such object")."""
    body = text.strip()
    if not body or "No such object" in body or "No such container" in body:
        return None
    start = body.find("[")
    try:
        data = json.loads(body[start:] if start >= 0 else body)
    except json.JSONDecodeError:
        raise ParseError(f"docker inspect: not JSON: {body[:120]!r}") from None
    if isinstance(data, list):
        if not data:
            return None
        data = data[0]
    if not isinstance(data, dict):
        raise ParseError("docker inspect: expected an object")
    st = data.get("State") or {}
    cfg = data.get("Config") or {}
    argv = [str(data["Path"])] if data.get("Path") else []
    argv += [str(a) for a in data.get("Args") or []]
    return ContainerRuntime(
        name=str(data.get("Name") or name).lstrip("/"),
        state=str(st.get("Status", "")).lower() or "unknown",
        started_at=st.get("StartedAt"),
        finished_at=st.get("FinishedAt"),
        exit_code=st.get("ExitCode"),
        image=cfg.get("Image"),
        image_id=data.get("Image"),
        env=parse_env_list(cfg.get("Env")),
        argv=tuple(argv),
    )


def flag_value(argv: tuple[str, ...] | list[str], *flags: str) -> str | None:
    """``--flag V`` or ``--flag=V`` in a command line (the last one wins, as argparse does)."""
    found = None
    for i, a in enumerate(argv):
        for f in flags:
            if a == f and i + 1 < len(argv):
                found = argv[i + 1]
            elif a.startswith(f + "="):
                found = a.split("=", 1)[1]
    return found


def ifname_matches(spec: str, iface: str) -> bool | None:
    """Does NCCL's ``*_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` style list select ``iface``?

    ``^a,b`` excludes, ``=a`` is exact, a plain entry is a prefix; ``dev:port`` entries compare the
    device. None when the list only excludes (NCCL then picks, so "selected" is not decided here)."""
    spec = spec.strip()
    if not spec:
        return None
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    if exact:
        body = body[1:]
    names = [x.strip().split(":")[0] for x in body.split(",") if x.strip()]
    hit = any((iface == n) if exact else iface.startswith(n) for n in names)
    if exclude:
        return False if hit else None
    return hit
