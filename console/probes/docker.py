"""docker inspect / docker events output (Go-template formats we request), and docker's timestamps."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from console.probes import ParseError
from console.vocabulary import ContainerState

# docker inspect --format INSPECT_FORMAT NAME
INSPECT_FORMAT = "{{json .State}}|{{.Config.Image}}|{{.Image}}"
# docker events --filter container=NAME --format EVENTS_FORMAT
EVENTS_FORMAT = "{{.Status}}|{{.Actor.Attributes.name}}|{{.Time}}"

@dataclass(frozen=True)
class ContainerInfo:
    name: str
    state: ContainerState  # ABSENT when the container does not exist
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    image: str | None = None
    image_id: str | None = None


def parse_inspect(name: str, text: str, exit_status: int = 0) -> ContainerInfo:
    """Parse ``docker inspect --format INSPECT_FORMAT``; a missing container is ``ABSENT``, a state word
    this console does not know ``UNKNOWN`` (the one place docker's word becomes a ``ContainerState``)."""
    body = text.strip()
    if exit_status != 0 or not body:
        if "No such" in text or "no such" in text or exit_status != 0:
            return ContainerInfo(name, ContainerState.ABSENT)
        raise ParseError(f"docker inspect: empty output for {name!r}")
    state_json, _, rest = body.partition("|")
    image, _, image_id = rest.partition("|")
    try:
        st = json.loads(state_json)
    except json.JSONDecodeError:
        raise ParseError(f"docker inspect: not JSON state: {state_json[:80]!r}") from None
    return ContainerInfo(
        name=name,
        state=ContainerState.parse(st.get("Status")),
        started_at=st.get("StartedAt"),
        finished_at=st.get("FinishedAt"),
        exit_code=st.get("ExitCode"),
        oom_killed=bool(st.get("OOMKilled", False)),
        image=image or None,
        image_id=image_id or None,
    )


@dataclass(frozen=True)
class ImageIdentity:
    """The two names of one image, which are not the same thing
    (https://github.com/docker/distribution/issues/1662): the image ID is the hash of the image's
    local config (``docker image inspect .Id``, what ``docker images`` shows), the registry digest
    the hash of its manifest in the registry (``.RepoDigests``, what ``docker pull repo@sha256:``
    takes). Same ID on two stations: the same image; the digest is what to pin and pull."""

    image_id: str
    repo_digests: tuple[str, ...] = ()

    @property
    def short_id(self) -> str:
        """``sha256:`` + 12 hex digits, as ``docker images`` abbreviates the ID."""
        algo, _, hexes = self.image_id.partition(":")
        return f"{algo}:{hexes[:12]}" if hexes else self.image_id[:19]

    def digest_for(self, image: str) -> str | None:
        """The registry digest of ``image``'s repository (``repo@sha256:...``), else the first."""
        repo = image.split("@")[0]
        repo = repo.rsplit(":", 1)[0] if ":" in repo.split("/")[-1] else repo
        return next((d for d in self.repo_digests if d.split("@")[0] == repo), None) or (
            self.repo_digests[0] if self.repo_digests else None)


def short_digest(digest: str) -> str:
    """``repo@sha256:0123456789ab…`` (a registry digest shortened for a table)."""
    repo, at, dig = digest.partition("@")
    algo, _, hexes = dig.partition(":")
    return f"{repo}{at}{algo}:{hexes[:12]}…" if hexes else digest


def parse_image_identity(text: str) -> ImageIdentity | None:
    """``docker image inspect --format '{{.Id}} {{json .RepoDigests}}'`` (one line), None if empty."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not line:
        return None
    image_id, _, rest = line.partition(" ")
    try:
        digests = json.loads(rest) if rest.strip() else []
    except json.JSONDecodeError:
        digests = []
    if not isinstance(digests, list):  # "null" for an image built locally, never pushed
        digests = []
    return ImageIdentity(image_id, tuple(d for d in digests if isinstance(d, str) and "@" in d))


@dataclass(frozen=True)
class ContainerEvent:
    status: str  # start, die, stop, kill, create, destroy, restart, oom, ...
    name: str
    time: int


def parse_event(line: str) -> ContainerEvent | None:
    parts = line.strip().split("|")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        t = int(parts[2])
    except ValueError:
        t = 0
    return ContainerEvent(parts[0], parts[1], t)


# ``docker logs --timestamps`` prefix: RFC3339 (docker writes UTC with nine fraction digits; other
# writers of the same form, e.g. saved logs, may use fewer digits or an offset), then one space.
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) ")
_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?$")


def split_timestamp(line: str) -> tuple[str | None, str]:
    """``docker logs --timestamps`` line -> (its RFC3339 timestamp, the text), or (None, line) when it
    has none. The one parser of that prefix (the monitor, the diagnosis, the launch, the workbench).
    Hot path: docker's own fixed-width form is recognised by its punctuation without a regex."""
    if (line[30:31] == " " and line[29] == "Z" and line[19] == "." and line[10] == "T" and line[4] == "-"
            and line[13] == ":" and line[16] == ":"):
        return line[:30], line[31:]
    if line[:1].isdigit() and (m := _STAMP.match(line)):
        return m.group(1), line[m.end():]
    return None, line


def newest_stamps(stamps: Iterable[str | None]) -> list[str]:
    """The stamps of a batch worth parsing for its newest: docker's own fixed-width form sorts as its
    time does, so the newest of those is one string compare a line in C, not one parse a line (a log
    flood is thousands of lines a batch); any other form is parsed, each."""
    given = list(filter(None, stamps))
    if given and set(map(len, given)) == {30}:
        return [max(given)]
    return given


def parse_time(value: str) -> float | None:
    """An RFC3339 time with up to nanoseconds (a log line's stamp, ``StartedAt``) -> Unix seconds;
    None for anything else and for docker's zero time (``0001-01-01T00:00:00Z``: never started)."""
    m = _TIME.match(value.strip())
    if not m or m.group(1).startswith("0001"):
        return None
    tz = m.group(3) or "Z"
    if tz != "Z" and ":" not in tz:
        tz = tz[:3] + ":" + tz[3:]
    base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if tz == "Z" else tz)).timestamp()
    return base + (float("0." + m.group(2)) if m.group(2) else 0.0)


def run_started(started_at: str | None) -> float | None:
    """The epoch a container run started (docker's StartedAt), None when it never did: where a
    run's kernel events and findings begin (the station's state and ``diagnose --station``)."""
    return t if started_at and (t := parse_time(started_at)) and t > 0 else None


def time_key(ts: str) -> tuple[str, str]:
    """A docker log timestamp (UTC, ``Z``) as a sortable key without parsing it: the seconds, then the
    fraction padded to nanoseconds (``...09.5Z`` and ``...09.500000000Z`` are one instant). Hot path
    (every stamped log line): docker's own fixed-width form is cut, not walked."""
    if len(ts) == 30 and ts[19] == "." and ts[29] == "Z" and (frac9 := ts[20:29]).isdigit():
        return ts[:19], frac9
    base, _, frac = ts.partition(".")
    digits = ""
    for ch in frac:
        if not ch.isdigit():
            break
        digits += ch
    return base[:19], digits.ljust(9, "0")
