"""Launch hazards over SSH, read from what the station prints (pure parsers).

- systemd-logind ``RemoveIPC``: when a non-system user's last session ends, logind removes the SysV and
  POSIX IPC objects that user owns, unless the user lingers (logind.conf(5), ``RemoveIPC=``; default
  ``yes`` since systemd 228). A worker started over SSH then loses its semaphores and shared memory when
  the session closes and the head blocks forever (eugr/spark-vllm-docker #352).
- An image named by a moving tag (``:latest`` or no tag at all) can be a different build on each
  station (spark-arena recipe-registry #13: SemLock ``FileNotFoundError`` on the workers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# logind.conf(5): system users (UID <= SYS_UID_MAX, 999 on Debian/Ubuntu) and root are never subject
# to RemoveIPC.
SYS_UID_MAX = 999
_TRUE = {"1", "yes", "y", "true", "t", "on"}
_FALSE = {"0", "no", "n", "false", "f", "off"}
MOVING_TAGS = frozenset({"latest", "nightly", "main", "master", "dev", "edge"})


@dataclass(frozen=True)
class RemoveIpc:
    """The effective ``RemoveIPC`` and where it comes from (``PATH:LINE``; "built-in default")."""

    enabled: bool
    source: str


def parse_logind_remove_ipc(text: str) -> RemoveIpc:
    """``systemd-analyze cat-config systemd/logind.conf`` (``# PATH`` before each file, drop-ins after
    the main file, in the order systemd applies them): the last ``RemoveIPC=`` in ``[Login]`` wins;
    none at all is systemd's built-in ``yes``."""
    found = RemoveIpc(True, "built-in default (systemd 228+: yes)")
    path, section, n = "logind.conf", "Login", 0
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"#\s*(/\S+\.conf)\s*$", line)
        if m:
            path, section, n = m.group(1), "Login", 0
            continue
        n += 1
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "Login" and key.strip() == "RemoveIPC":
            v = value.strip().lower()
            if v in _TRUE or v in _FALSE:
                found = RemoveIpc(v in _TRUE, f"{path}:{n} ({line})")
    return found


@dataclass(frozen=True)
class LoginUser:
    name: str
    uid: int | None
    linger: bool | None

    @property
    def system_user(self) -> bool:
        return self.uid is not None and self.uid <= SYS_UID_MAX


def parse_loginctl_user(text: str, user: str) -> LoginUser | None:
    """``loginctl show-user USER -p Name -p UID -p Linger`` (``KEY=value`` lines, any order); None
    when logind does not know the user (``Failed to get user: ...``)."""
    props = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and not ln.startswith("Failed"))
    if not props:
        return None
    uid = props.get("UID", "").strip()
    linger = props.get("Linger", "").strip().lower()
    return LoginUser(props.get("Name", user).strip() or user, int(uid) if uid.isdigit() else None,
                     True if linger == "yes" else False if linger == "no" else None)


def image_tag(image: str) -> str | None:
    """The tag an image reference names: ``None`` when it is pinned by digest, ``latest`` when it names
    no tag (docker's default)."""
    if "@" in image:
        return None
    last = image.split("/")[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


def is_moving_tag(tag: str | None) -> bool:
    """A tag that registries move on every push (``latest``, ``nightly``, ...)."""
    return tag is not None and (tag in MOVING_TAGS or tag.startswith(("latest-", "nightly-")))
