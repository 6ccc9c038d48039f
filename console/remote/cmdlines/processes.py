"""The process list's remote command lines (re-exported by ``console.remote.cmdlines``, their one home):
who holds a GPU, and ending one process only while it is still the process the operator was shown.

A pid names a process only while it lives: once it exits, the kernel may hand the number to anything.
So a signal is sent by one station-side command that first reads the pid's start time and command line
again and sends nothing unless both are what the row showed (``signal_if_same``): the gap between the
check and the signal is the shell's, microseconds, never the operator's minutes."""

from __future__ import annotations

import hashlib
import re
import shlex

q = shlex.quote

# ``lstart`` in the C locale: "Sat Dec  5 14:12:43 2026" (five words, one fixed format on every station)
PROCESS_FIELDS = "pid=,user:32=,pcpu=,rss=,cgroup:512=,lstart=,args="
IDENTITY_FIELDS = "stat=,lstart=,args="
CONTAINERS_MARK = "--- containers"
IDENTITY_MARK = "identity:"  # signal_if_same's first line: "identity: same|gone|changed <what runs now>"
SIGNALS = ("TERM", "KILL")
_TR_SPACE = r" \t\n\r\v\f"  # C's [:space:], written as tr reads it
_SPACE = re.compile(r"[ \t\n\r\v\f]+")  # the same, squeezed the same way console-side


def _pid(pid: int) -> str:
    return q(str(int(pid)))


def process_details(pids: list[int]) -> str:
    """User, CPU share, resident memory, cgroup, start time and the whole command line of ``pids``
    (``ps -ww``: no column cut), then every running container's full id and name (the cgroup names
    the container)."""
    ids = ",".join(str(int(p)) for p in pids) or "1"
    return (f"LC_ALL=C ps -ww -o {q(PROCESS_FIELDS)} -p {q(ids)}; echo {q(CONTAINERS_MARK)}; "
            f"docker ps --no-trunc --format {q('{{.ID}} {{.Names}}')} 2>/dev/null; true")


def identity_words(started: str, command: str) -> str:
    """A process's start time and command line as ``signal_if_same`` compares them (runs of white
    space as one space, none at either end: the same squeeze the station's side applies)."""
    return _SPACE.sub(" ", f"{started} {command}").strip()


def identity_fingerprint(started: str, command: str) -> str:
    """What ``signal_if_same`` compares: the SHA-256 of the identity words and a newline, as the
    station's ``sha256sum`` prints it (the command line itself, secrets and all, never goes back in
    an argv)."""
    return hashlib.sha256((identity_words(started, command) + "\n").encode("utf-8", "surrogateescape")).hexdigest()


def signal_if_same(pid: int, signal: str, fingerprint: str) -> str:
    """Send ``signal`` to ``pid`` only if its start time and command line still hash to ``fingerprint``
    (``identity_fingerprint`` of the row shown); the first
    line says which: ``identity: same`` (then procps' kill's own words and exit status), ``identity:
    gone`` (nothing runs under the pid: nothing sent) or ``identity: changed <start and command now>``
    (another process holds the pid: nothing sent)."""
    if signal not in SIGNALS:
        raise ValueError(f"signal {signal!r}: only {', '.join(SIGNALS)}")
    if not re.fullmatch(r"[0-9a-f]{64}", fingerprint):
        raise ValueError("fingerprint: a SHA-256 in hex")
    p = _pid(pid)
    return (f"now=$(LC_ALL=C ps -ww -o {q('lstart=,args=')} -p {p} 2>/dev/null | tr -s {q(_TR_SPACE)} ' '); "
            'now=${now# }; now=${now% }; h=$(printf \'%s\\n\' "$now" | sha256sum); '
            f"if [ -z \"$now\" ]; then echo {q(IDENTITY_MARK + ' gone')}; "
            f"elif [ \"${{h%% *}}\" != {fingerprint} ]; then printf '%s %s\\n' {q(IDENTITY_MARK + ' changed')} \"$now\"; "
            f"else echo {q(IDENTITY_MARK + ' same')}; env kill -s {q(signal)} {p}; fi")


def signal_process(pid: int, signal: str) -> str:
    """Send ``signal`` (TERM or KILL) to ``pid`` unchecked: ``env kill`` runs procps' kill (not the
    shell's), whose words say why it could not ("Operation not permitted", "No such process"). The
    process list sends through ``signal_if_same``."""
    if signal not in SIGNALS:
        raise ValueError(f"signal {signal!r}: only {', '.join(SIGNALS)}")
    return f"env kill -s {q(signal)} {_pid(pid)}"


def process_identity(pid: int) -> str:
    """``pid``'s state letter, start time and command line while it exists (Z: a zombie, gone for the
    GPU; D: stuck in the driver); nothing once it is gone."""
    return f"LC_ALL=C ps -ww -o {q(IDENTITY_FIELDS)} -p {_pid(pid)}; true"


def process_running(pid: int) -> str:
    """``pid`` and its state letter while it exists (Z: a zombie, gone for the GPU; D: stuck in the driver)."""
    return f"ps -o pid=,stat= -p {_pid(pid)}; true"
