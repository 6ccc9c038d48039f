"""``dgx-console diagnose [FILE|- ...] [--json] [--station NAME]``: name the likely root cause.

Files, stdin (``-``) and the live container logs of configured stations are read into one
Diagnoser, so a watchdog timeout on the head is ranked under the socket fallback on the worker.
With no file and no ``--station``, every station of the config is read.
Exit 0 when nothing is wrong, 1 on any error or warning finding (or an unreadable station),
2 on usage errors (a missing file, an unknown station). Log lines are outside text: a line longer
than ``MAX_LINE`` is cut (with a marker) as it is read, and everything printed is sanitized
(``--json`` keeps the text, JSON-escaped).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from console import json_out
from console.commands.args import UsageError, add_config_args, check_count, check_file_arg
from console.config import Config, ConfigError, find_config, load_config
from console.diagnosis import Diagnoser, Finding, has_problems
from console.sanitize import clean, clip, one_line
from console.tasks import gather_owned
from console.vocabulary import CONTAINER_ENDED_STATES

DEFAULT_TAIL = 5000
BATCH = 4096
MAX_LINE = 64 * 1024  # characters of one log line kept for the diagnosis (a 1 GB line is cut)


def bounded_lines(fh, limit: int = MAX_LINE):
    """Lines of a text stream, each at most ``limit`` characters (plus a marker); memory stays
    bounded whatever the file holds (no newline for gigabytes)."""
    while True:
        line = fh.readline(limit)
        if not line:
            return
        if len(line) == limit and not line.endswith("\n"):
            cut = 0
            while True:  # skip the rest of this line
                more = fh.readline(limit)
                cut += len(more)
                if not more or more.endswith("\n"):
                    break
            line = line + f"… [+{cut:,} chars]"
        yield line


def _feed(d: Diagnoser, source: str, lines) -> int:
    n, buf = 0, []
    for line in lines:
        buf.append(line.rstrip("\r\n"))
        if len(buf) >= BATCH:
            d.feed(source, buf)
            n += len(buf)
            buf = []
    d.feed(source, buf)
    return n + len(buf)


# What a log is not: compressed archives (by their magic bytes), a tar, binary data (NULs all over the first 8 KiB).
_MAGIC = ((b"\x1f\x8b", "gzip-compressed"), (b"PK\x03\x04", "a zip archive"), (b"\xfd7zXZ\x00", "xz-compressed"),
          (b"BZh", "bzip2-compressed"), (b"\x28\xb5\x2f\xfd", "zstd-compressed"))


def binary_kind(head: bytes) -> str | None:
    """Why ``head`` (a file's first bytes) is no log text, or None: reading a .tgz as text finds nothing
    and says "no findings", which would be a lie."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[257:262] == b"ustar" or head.count(b"\x00") > 8 + len(head) // 100:  # a stray NUL in a log is no binary
        return "binary (not text)"
    return None


def _refuse_binary(name: str, p: Path) -> None:
    with p.open("rb") as fh:
        kind = binary_kind(fh.read(8192))
    if kind:
        raise UsageError(f"{name}: {kind}, not a log; give the log text (e.g. zcat FILE | dgx-console diagnose -, "
                         f"or extract the archive first)")


def _read_inputs(d: Diagnoser, inputs: list[str]) -> list[dict]:
    sources = []
    for name in inputs:
        if name == "-":
            sources.append({"source": "stdin", "lines": _feed(d, "stdin", bounded_lines(sys.stdin)),
                            "error": None})
            continue
        p = check_file_arg(name)
        try:
            _refuse_binary(one_line(name, 200), p)
            with p.open(encoding="utf-8", errors="replace") as fh:
                sources.append({"source": name, "lines": _feed(d, name, bounded_lines(fh)), "error": None})
        except OSError as exc:
            raise UsageError(f"{name}: cannot read: {exc.strerror}") from None
        except ValueError:  # an embedded NUL in the name
            raise UsageError(f"{one_line(repr(name), 100)}: not a valid path") from None
    return sources


def split_runs(lines: list[str], started_at: str | None) -> tuple[list[str], list[str]]:
    """``docker logs`` of a container holds every run's lines: those stamped before the current run's start
    (``started_at``, docker's StartedAt) are earlier runs', the rest the current run's."""
    from console.probes.docker import parse_time, split_timestamp

    start = parse_time(started_at) if started_at else None
    if start is None:
        return [], lines
    for i, line in enumerate(lines):
        ts, _ = split_timestamp(line)
        if ts is not None and (t := parse_time(ts)) is not None and t >= start:
            return lines[:i], lines[i:]
    return lines, []


def _read_stations(d: Diagnoser, config: Config, names: list[str], tail: int, trust: bool) -> list[dict]:
    from console.diagnosis.fetch import fetch_station_log

    stations = []
    for name in names:
        try:
            stations.append(config.station(name))
        except Exception:
            known = ", ".join(s.name for s in config.stations)
            raise UsageError(f"--station {name}: no such station (configured: {known})") from None

    async def all_logs():
        return await gather_owned(*(fetch_station_log(config, s, tail, trust, kernel=True) for s in stations))

    out = []
    for log in asyncio.run(all_logs()):
        if log.error:
            print(f"dgx-console: {log.station}: {one_line(log.error, 500)}", file=sys.stderr)
        # findings belong to a run: an earlier run's lines in the tail are the record, not the current fault
        earlier, current = split_runs(log.lines, log.container.started_at if log.container else None)
        read = 0
        if earlier:
            from console.probes.docker import parse_time

            read = _feed(d, log.station, earlier)
            d.end_run(log.station, None, parse_time(log.container.started_at or ""), seen=False)
        read += _feed(d, log.station, current)
        entry = {"source": log.station, "lines": read, "error": log.error}
        if log.kernel is not None or log.kernel_error:  # the kernel log since the container started
            d.feed_kernel(log.station, log.kernel or [])
            entry["kernel"] = {"lines": len(log.kernel or []), "error": log.kernel_error}
            if log.kernel_error:
                print(f"dgx-console: {log.station}: kernel log: {one_line(log.kernel_error, 300)}", file=sys.stderr)
        out.append(entry)
        if log.container is not None and log.container.state in CONTAINER_ENDED_STATES:
            d.note_exit(log.station, log.container.exit_code, f"container {log.container.name}",
                        oom_killed=log.container.oom_killed)
    return out


def format_finding(f: Finding) -> str:
    """A finding as text. Evidence lines are the station's words: one sanitized line each,
    overlong ones shortened with a marker."""
    head = f"{f.severity.upper():8}{f.id}  [{one_line(f.station, 60)}]" + (f"  x{f.count}" if f.count > 1 else "")
    out = [head, f"    cause: {one_line(f.cause, 500)}"]
    if f.explained_by:
        out.append(f"    likely explained by: {one_line(f.explained_by, 120)}")
    for ev in f.evidence:
        where = f"{ev.source}:{ev.line}" if ev.line is not None else ev.source
        out.append(f"    {one_line(where, 200)}: {one_line(ev.text, 400)}")
        for c in ev.context[-4:]:
            out.append(f"        | {one_line(c, 400)}")
    out.append("    fix: " + clip(clean(f.fix).replace("\n", "\n         "), 2000))
    return "\n".join(out)


def _config_and_stations(args: argparse.Namespace):
    """The config (None for files alone) and the stations to read: those named, or with neither files nor
    names every station of the config, in rank order."""
    stations = list(args.station)
    if not args.inputs and not stations:  # a config's stations, all of them
        try:
            find_config(args.config)
        except ConfigError:
            raise UsageError("diagnose needs FILE..., - (stdin), or a config (then it reads every "
                             "station; --station NAME for some)") from None
        config = load_config(args.config)
        return config, [s.name for s in sorted(config.stations, key=lambda s: s.rank)]
    return (load_config(args.config) if (stations or args.config) else None), stations


def _print_text(d: Diagnoser, findings: list[Finding], sources: list[dict]) -> None:
    """The findings as text (or how many lines said nothing), then the previous runs' findings apart."""
    if findings:
        print("\n\n".join(format_finding(f) for f in findings))
    else:
        total = sum(s["lines"] for s in sources)
        print(f"no findings ({total} lines read)")
    for r in d.previous_runs():  # after the current findings: the record, never counted in the exit code
        print(f"\n-- {r.title}: not the container's current run --\n"
              + "\n\n".join(format_finding(f) for f in r.findings))


def run(args: argparse.Namespace) -> int:
    check_count("--tail", args.tail, 1, 10_000_000)
    config, stations = _config_and_stations(args)
    d = Diagnoser(gpudirect_expected=config.profile.link.gpudirect if config else None,
                  nodes=config.profile.nnodes if config else None)
    sources = _read_inputs(d, args.inputs)
    if stations:
        sources += _read_stations(d, config, stations, args.tail, args.trust_host_key)
    d.finish()
    findings = d.ranked()
    unreadable = any(s["error"] for s in sources)
    if args.json:
        print(json_out.dumps({"findings": [f.to_dict() for f in findings], "sources": sources,
                              "previous_runs": [r.to_dict() for r in d.previous_runs()]}, indent=2))
    else:
        _print_text(d, findings, sources)
    return 1 if has_problems(findings) or unreadable else 0


def register(sub) -> None:
    p = sub.add_parser("diagnose", help="findings over log files, stdin, or live container logs",
                       description="Name the likely root cause of a failed launch or an NCCL timeout, "
                                   "with its evidence lines and the fix.")
    add_config_args(p)
    p.add_argument("inputs", nargs="*", metavar="FILE", help="log files; - reads stdin")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--station", action="append", default=[], metavar="NAME",
                   help="read the live container log of this configured station (repeatable; "
                        "default with no FILE: every station of the config)")
    p.add_argument("--tail", type=int, default=DEFAULT_TAIL, metavar="N",
                   help=f"lines of each station's log to read (default {DEFAULT_TAIL})")
    p.set_defaults(func=run)
