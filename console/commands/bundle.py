"""``dgx-console bundle PATH``: a support archive (tar.gz) to attach to a report.

Contents, all with secrets masked (API keys, hub tokens, ``Bearer ...``, the value after every secret
name: ``*_TOKEN=``, ``*_KEY=``, ``*_PASSWORD=``, ... as ``console.secrets`` decides):
``manifest.json`` (what was collected, which stations could not be reached), ``config.toml`` (the
config file as written) and ``config.effective.toml``, ``checks.json`` (when ``console.station.checks`` is
available), ``logs/<station>.log`` (the last N container log lines), ``findings.json`` (the
diagnosis over those logs and checks), ``health.json`` (every GPU's health and every rail, as
``status --json`` reads them) and ``chat/last.json`` + ``chat/last.md`` (the last kept chat). An unreachable station is recorded, never fatal. Besides the
patterns, every secret value the config knows (``[overrides.extra_env]`` secrets, the API key) is
masked wherever it appears.

The archive is written to a fresh ``O_EXCL|O_NOFOLLOW`` temporary file in PATH's directory, then
renamed over PATH: a symlink, a FIFO or a device at PATH is refused, an existing file needs
``--force`` (``console/safe_files.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from console import __version__, json_out
from console.commands.args import UsageError, add_config_args, check_count
from console.config import (
    MAX_CONFIG_BYTES,
    Config,
    config_to_dict,
    load_config,
    masked_overrides,
    secret_values,
)
from console.secrets import mask_values
from console.diagnosis import Diagnoser, redact
from console.diagnosis.fetch import StationLog, fetch_station_log
from console.safe_files import FileProblem, check_target, expand, read_text, write_replacing
from console.sanitize import one_line

DEFAULT_TAIL = 2000
CHECKS_TIMEOUT_S = 180.0


async def _run_checks(config: Config, timeout: float) -> tuple[list[Any] | None, str | None]:
    """Check results, or why there are none (module not there yet, or the run failed)."""
    try:
        from console.station.checks import run_checks
    except ImportError as exc:
        return None, f"checks not available: {exc}"
    try:
        return list(await asyncio.wait_for(run_checks(config), timeout)), None
    except TimeoutError:
        return None, f"checks did not finish within {timeout:g} s"
    except Exception as exc:  # a broken check run must not lose the rest of the bundle
        return None, f"checks failed: {exc.__class__.__name__}: {exc}"


def _check_dict(r: Any) -> dict[str, Any]:
    d = r.to_dict() if hasattr(r, "to_dict") else {k: getattr(r, k, "") for k in
                                                   ("id", "station", "status", "summary", "evidence", "fix")}
    return {k: redact(v) if isinstance(v, str) else v for k, v in d.items()}


async def _collect(config: Config, tail: int, with_checks: bool, trust: bool
                   ) -> tuple[list[StationLog], list[Any] | None, str | None, dict[str, Any]]:
    logs_task = asyncio.gather(*(fetch_station_log(config, s, tail, trust) for s in config.stations))
    health_task = asyncio.ensure_future(_health(config, trust))
    if with_checks:
        (logs, (checks, err)) = await asyncio.gather(logs_task, _run_checks(config, CHECKS_TIMEOUT_S))
    else:
        logs, checks, err = await logs_task, None, "checks skipped (--no-checks)"
    return list(logs), checks, err, await health_task


async def _health(config: Config, trust: bool) -> dict[str, Any]:
    """Every GPU's health and every rail as ``status --json`` reads them (health.json)."""
    from console.station.status import collect_status

    try:
        data = await asyncio.wait_for(collect_status(config, trust=trust), CHECKS_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the bundle never dies for its health part
        return {"stations": [], "error": f"{exc.__class__.__name__}: {exc}"}
    return {"stations": [{"name": s["name"], "reachable": s["reachable"], "error": s["error"],
                          "gpus": [{"index": g["index"], "name": g["name"], "health": g.get("health")}
                                   for g in s["gpus"]], "rails": s.get("rails", [])}
                         for s in data["stations"]], "error": None}


def _config_text(config: Config) -> str | None:
    if not config.path:
        return None
    try:
        return redact(read_text(config.path, MAX_CONFIG_BYTES))
    except FileProblem:
        return None


def _masker(config: Config):
    """``redact`` plus every secret value the config knows, replaced wherever it appears."""
    values = [v for v in secret_values(config) if len(v) >= 4]

    def mask(text: str) -> str:
        return redact(mask_values(text, values))

    return mask


def build_bundle(config: Config, tail: int = DEFAULT_TAIL, with_checks: bool = True, trust: bool = False
                 ) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The archive members (name -> bytes) and the manifest."""
    logs, checks, checks_error, health = asyncio.run(_collect(config, tail, with_checks, trust))
    mask = _masker(config)  # the patterns, and the config's own secret values wherever they appear
    d = Diagnoser(gpudirect_expected=config.profile.link.gpudirect, nodes=config.profile.nnodes)
    members: dict[str, bytes] = {}
    stations = []
    for log in logs:
        d.feed(log.station, log.lines)
        if log.ok:
            members[f"logs/{log.station}.log"] = "".join(mask(x) + "\n" for x in log.lines).encode()
        else:
            members[f"logs/{log.station}.error.txt"] = (mask(log.error or "") + "\n").encode()
        stations.append({"name": log.station, "reachable": log.ok, "error": mask(log.error) if log.error else None,
                         "log_lines": len(log.lines)})
    if checks is not None:
        d.add_check_results(checks)
    findings = d.ranked()
    manifest = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "dgx_console_version": __version__,
        "profile": config.profile.name,
        "config_path": config.path,
        "tail": tail,
        "stations": stations,
        "checks": {"included": checks is not None, "count": len(checks or []), "error": checks_error},
        "findings": len(findings),
        "redaction": "API keys, hub tokens, Bearer credentials and the values of secret names (*_TOKEN, *_KEY, "
                     "*SECRET*, *PASSWORD*, *PASSWD*, *CREDENTIAL*, ...) are masked",
    }
    members["manifest.json"] = json_out.dumps(_masked(manifest, mask), indent=2).encode()
    text = _config_text(config)
    if text is not None:
        members["config.toml"] = mask(text).encode()
    effective = config_to_dict(config)
    if "overrides" in effective:
        effective["overrides"] = masked_overrides(config)
    members["config.effective.toml"] = mask(tomli_w.dumps(effective)).encode()
    members["checks.json"] = json_out.dumps(_masked(
        {"checks": [_check_dict(r) for r in checks]} if checks is not None else {"checks": [], "error": checks_error},
        mask), indent=2).encode()
    members["findings.json"] = json_out.dumps(_masked({"findings": [f.to_dict() for f in findings]}, mask),
                                          indent=2).encode()
    from console.doctor.bundle import doctor_member  # the NCCL workbench's last report and debug tries

    members["doctor.json"], manifest["doctor"] = doctor_member(config, lambda obj: _masked(obj, mask))
    members["health.json"] = json_out.dumps(_masked(health, mask), indent=2).encode()  # every GPU's health and rail
    manifest["health"] = {"included": bool(health["stations"]), "error": health["error"]}
    from console.serving.chat_export import bundle_members  # the last kept chat, masked

    chat, manifest["chat"] = bundle_members(lambda obj: _masked(obj, mask), mask)
    members.update(chat)
    members["manifest.json"] = json_out.dumps(_masked(manifest, mask), indent=2).encode()
    return members, manifest


def _masked(obj: Any, mask) -> Any:
    """Every string inside ``obj`` masked (before JSON encoding, so no escape hides a value)."""
    if isinstance(obj, str):
        return mask(obj)
    if isinstance(obj, dict):
        return {k: _masked(v, mask) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_masked(v, mask) for v in obj]
    return obj


def write_archive(path: Path, members: dict[str, bytes], force: bool = False) -> None:
    """The tar.gz, written safely (see ``safe_files.write_replacing``); FileProblem when refused."""
    top = "dgx-console-bundle-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    now = time.time()

    def write(fh) -> None:
        with tarfile.open(fileobj=fh, mode="w:gz") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size, info.mtime, info.mode = len(data), now, 0o600
                tar.addfile(info, io.BytesIO(data))

    write_replacing(path, write, force=force)


def _check_path(arg: str, path: Path, force: bool) -> None:
    if path.is_dir() and not path.is_symlink():
        raise UsageError(f"{arg}: is a directory (give a file name, e.g. bundle.tar.gz)")
    if not path.parent.is_dir():
        raise UsageError(f"{arg}: directory {path.parent} does not exist")
    try:
        check_target(path, force)
    except FileProblem as exc:
        raise UsageError(f"{arg}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    check_count("--tail", args.tail, 1, 10_000_000)
    try:
        path = expand(args.path)
        _check_path(args.path, path, args.force)  # before the minutes of collecting
    except ValueError:  # an embedded NUL
        raise UsageError(f"{one_line(repr(args.path), 100)}: not a valid path") from None
    except OSError as exc:  # a name too long, a directory we may not read
        raise UsageError(f"{one_line(args.path, 100)}: {exc.strerror or exc}") from None
    config = load_config(args.config)
    members, manifest = build_bundle(config, args.tail, not args.no_checks, args.trust_host_key)
    try:
        write_archive(path, members, force=args.force)
    except FileProblem as exc:
        raise UsageError(f"{args.path}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{args.path}: cannot write: {exc.strerror or exc}") from None
    down = [s["name"] for s in manifest["stations"] if not s["reachable"]]
    for s in manifest["stations"]:
        if s["error"]:
            print(f"dgx-console: {s['name']}: {one_line(s['error'], 500)}", file=sys.stderr)
    print(f"wrote {path} ({manifest['findings']} findings, {len(manifest['stations']) - len(down)}/"
          f"{len(manifest['stations'])} stations read"
          + (f"; unreachable: {', '.join(down)}" if down else "") + ")")
    return 0


def register(sub) -> None:
    p = sub.add_parser("bundle", help="support bundle (config, checks, recent logs, findings; secrets redacted)")
    add_config_args(p)
    p.add_argument("path", metavar="PATH", help="archive to write (tar.gz)")
    p.add_argument("--tail", type=int, default=DEFAULT_TAIL, metavar="N",
                   help=f"log lines per station (default {DEFAULT_TAIL})")
    p.add_argument("--no-checks", action="store_true", help="do not run the link/preflight checks")
    p.add_argument("--force", action="store_true", help="replace PATH if it is an existing regular file")
    p.set_defaults(func=run)
