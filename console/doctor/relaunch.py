"""Rung 7's action: relaunch with NCCL debug output and chosen overrides, show the exact difference
from the normal launch command before anything runs, run the try, read what NCCL said, and put the
normal command back afterwards. The same ``run_action`` the launch uses does the work (workers
first, the head last; a fatal line ends the wait at once; a failed start stops what it started).

Overrides are per station (the GID index is local to each station): ``{"B": {"NCCL_IB_GID_INDEX": "5"}}``;
a None value removes the variable from the command. ``NCCL_DEBUG=INFO`` and
``NCCL_DEBUG_SUBSYS=INIT,NET,ENV`` are always added.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from console.config import Config
from console.doctor.context import RelaunchPlan
from console.probes.docker import split_timestamp
from console.probes.nccl_diag import parse_diag
from console.probes.nccl_tests import parse_nccl_info
from console.remote import cmdlines as rc
from console.remote.transport import Transport, TransportError
from console.service.actions import (
    ActionEvent,
    ActionFailed,
    ActionOptions,
    ActionResult,
    CancelToken,
    ServiceActions,
    run_action,
)
from console.service.engines import LaunchSpec
from console.service.follow import LogSource
from console.vocabulary import ActionOutcome, NcclTransport

DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}
# What the screen offers to change (the list); any NCCL_* name is accepted from the CLI.
OVERRIDE_CHOICES = ("NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL",
                    "NCCL_NVLS_ENABLE", "NCCL_IB_DISABLE", "NCCL_RUN_DIAGNOSTICS")
_NAME = re.compile(r"^(NCCL|GLOO|UCX|TORCH_NCCL|VLLM|SGLANG)_[A-Z0-9_]+$")


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def parse_set(items: list[str], stations: list[str]) -> dict[str, dict[str, str | None]]:
    """``--set [STATION:]NAME=VALUE`` / ``--unset [STATION:]NAME`` items -> per-station overrides."""
    out: dict[str, dict[str, str | None]] = {}
    for raw in items:
        unset = raw.startswith("-")
        item = raw[1:] if unset else raw
        where, sep, rest = item.partition(":")
        if not sep or "=" in where:
            where, rest = "", item
        name, eq, value = rest.partition("=")
        if where and where not in stations:
            raise ValueError(f"{raw!r}: no station named {where!r} (stations: {', '.join(stations)})")
        if not valid_name(name):
            raise ValueError(f"{raw!r}: {name!r} is not an NCCL/GLOO/UCX/TORCH_NCCL/VLLM variable name")
        if not unset and not eq:
            raise ValueError(f"{raw!r}: expected NAME=VALUE")
        if not unset and not re.fullmatch(r"[\w.,:^=/+\-]*", value):
            raise ValueError(f"{raw!r}: the value may hold letters, digits and . , : ^ = / + - only")
        for st in ([where] if where else stations):
            out.setdefault(st, {})[name] = None if unset else value
    return out


def with_env(spec: LaunchSpec, env: dict[str, str | None]) -> LaunchSpec:
    """The same ``docker run`` with these variables set (replaced in place) or removed (None)."""
    argv = list(spec.argv)
    for name, value in env.items():
        at = next((i for i in range(len(argv) - 1) if argv[i] == "-e" and argv[i + 1].split("=", 1)[0] == name),
                  None)
        if at is not None:
            if value is None:
                del argv[at:at + 2]
            else:
                argv[at + 1] = f"{name}={value}"
        elif value is not None:
            end = argv.index("--entrypoint") if "--entrypoint" in argv else argv.index(spec.image)
            argv[end:end] = ["-e", f"{name}={value}"]
    return replace(spec, argv=tuple(argv))


def diff(normal: LaunchSpec, debug: LaunchSpec) -> str:
    lines = list(difflib.unified_diff(normal.preview().splitlines(), debug.preview().splitlines(),
                                      f"{normal.station}: normal launch", f"{debug.station}: debug try", lineterm="",
                                      n=1))
    return "\n".join(lines) or f"{normal.station}: no difference"


def changes(normal: LaunchSpec, debug: LaunchSpec) -> list[str]:
    """``B: NCCL_IB_GID_INDEX 3 -> 5`` per changed variable (what the tries table shows)."""
    def env_of(spec: LaunchSpec) -> dict[str, str]:
        a = spec.argv
        return dict(a[i + 1].split("=", 1) for i in range(len(a) - 1) if a[i] == "-e" and "=" in a[i + 1])

    before, after = env_of(normal), env_of(debug)
    out = []
    for k in sorted(set(before) | set(after)):
        if before.get(k) != after.get(k) and k not in DEBUG_ENV:
            out.append(f"{normal.station}: {k} {before.get(k, '(unset)')} -> {after.get(k, '(unset)')}")
    return out


@dataclass
class TryResult:
    number: int
    changed: list[str]
    result: str  # ready | failed | cancelled
    summary: str
    transport: str = "unknown"
    nccl: dict[str, str] = field(default_factory=dict)  # station -> what NCCL said (network, GDR, GID, version)
    evidence: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    restored: str = "not yet"
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"try": self.number, "changed": self.changed, "result": self.result, "summary": self.summary,
                "transport": self.transport, "nccl": self.nccl, "seconds": round(self.seconds, 1),
                "restored": self.restored, "at": self.at,
                "evidence": [{"station": s, "line": ln} for s, ln in self.evidence]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TryResult:
        return cls(int(d.get("try", 0)), list(d.get("changed") or []), str(d.get("result", "?")),
                   str(d.get("summary", "")), str(d.get("transport", "unknown")), dict(d.get("nccl") or {}),
                   [(e.get("station", ""), e.get("line", "")) for e in d.get("evidence") or []],
                   float(d.get("seconds", 0.0)), str(d.get("restored", "")), float(d.get("at", 0.0)))


def nccl_summary(lines: list[str]) -> str:
    """What NCCL said about one station's try, short: ``IB gdrdma, NCCL 2.30.7, GID 5``."""
    info = parse_nccl_info(lines)
    parts = [f"{info.network or '?'} {info.transport}"]
    if info.version:
        parts.append(f"NCCL {info.version}")
    if info.gid_index is not None:
        parts.append(f"GID {info.gid_index}")
    if info.gdr_enabled is False:
        parts.append("GDR off")
    if info.completion_errors:
        parts.append(f"IB status={info.completion_errors[0].status}")
    if any("Watchdog caught" in ln for ln in lines):
        parts.append("watchdog timeout")
    parts += [r.summary() for r in parse_diag(lines)]  # NCCL_RUN_DIAGNOSTICS=1 (NCCL 2.31+): its own checks
    return ", ".join(parts)


class DebugRelaunch:
    """Plan (the exact commands and their diff), then run one try and restore the normal command."""

    def __init__(self, config: Config, transports: dict[str, Transport] | None = None,
                 on_event: Callable[[ActionEvent], None] | None = None, ready_timeout_s: float | None = None,
                 log_source: LogSource | None = None):
        self.config = config
        self.transports = transports
        self.log_source = log_source  # the console's log streams (else the launch follows the logs itself)
        self.on_event = on_event or (lambda ev: None)
        self.ready_timeout_s = ready_timeout_s
        self.normal: dict[str, LaunchSpec] = {}
        self.debug: dict[str, LaunchSpec] = {}
        self._cancel: CancelToken | None = None

    def _settings(self) -> dict[str, Any]:
        return {"transports": self.transports, "on_event": self.on_event, "ready_timeout_s": self.ready_timeout_s,
                "log_source": self.log_source}

    async def plan(self, plan: RelaunchPlan) -> dict[str, str]:
        """The normal and the debug launch per station; returns the unified diff per station."""
        async with ServiceActions(self.config, **self._settings()) as svc:
            self.normal = await svc.plan_launch()
        self.debug = {name: with_env(spec, {**DEBUG_ENV, **plan.overrides.get(name, {})})
                      for name, spec in self.normal.items()}
        out = {name: diff(self.normal[name], self.debug[name]) for name in self.normal}
        for st in self.config.stations:  # stations the operator's own launch script starts
            if st.name not in self.normal:
                out[st.name] = (f"{st.name}: started by its launch script ({self.config.launch_script_for(st)}): "
                                "the try runs it unchanged (set the variables in the script to try them there)")
        return out

    def changed(self) -> list[str]:
        return [c for name in self.normal for c in changes(self.normal[name], self.debug[name])]

    def cancel(self) -> bool:
        if self._cancel is not None:
            return self._cancel.request()
        return False

    async def _launch(self, specs: dict[str, LaunchSpec]) -> ActionResult:
        """Stop (verified), then launch ``specs``; a stop that failed or was cancelled launches nothing."""
        self._cancel = CancelToken()
        try:
            stop = await run_action(self.config, "stop", cancel=self._cancel, **self._settings())
            if stop.result != ActionOutcome.OK:
                return stop
            self._cancel = CancelToken()
            return await run_action(self.config, "launch", ActionOptions(skip_checks=True, specs=specs, skip_fit=True),
                                    cancel=self._cancel, **self._settings())
        finally:
            self._cancel = None

    async def _nccl_lines(self) -> dict[str, list[str]]:
        out = {}
        for st in self.config.stations:
            tr = (self.transports or {}).get(st.name)
            if tr is None:
                continue
            for name in (st.container, f"{st.container}-prev"):
                try:
                    res = await tr.run(rc.nccl_log_lines(name), timeout=30)
                except TransportError:
                    break
                lines = [split_timestamp(ln)[1] for ln in res.stdout.splitlines()]
                if lines:
                    out[st.name] = lines
                    break
        return out

    async def run(self, number: int, restore: bool = True) -> TryResult:
        """The try (with ``plan()`` made first), what NCCL said, then the normal command back."""
        t0 = time.monotonic()
        res = await self._launch(self.debug)
        lines = await self._nccl_lines() if self.transports else {}
        on_sockets = res.result == ActionOutcome.FAILED and res.transport == NcclTransport.SOCKET and "sockets" in res.summary
        ok = res.result == ActionOutcome.OK or on_sockets
        out = TryResult(number, self.changed(), "ready" if res.result == ActionOutcome.OK else (
            "ready on sockets" if on_sockets else res.result), res.summary,
                        res.transport, {n: nccl_summary(v) for n, v in lines.items()}, list(res.evidence),
                        time.monotonic() - t0)
        if ok and not restore:
            out.restored = "kept: the try runs (the normal command is not back)"
        elif res.result == ActionOutcome.CANCELLED:
            out.restored = "cancelled: nothing restored"
        elif restore:
            back = await self._launch(self.normal)
            out.restored = ("normal command back: " + ("serving" if back.result == ActionOutcome.OK else
                                                       f"{back.result} ({back.summary[:160]})"))
        else:
            out.restored = "not restored (--keep)"
        return out


def plan_error(exc: Exception) -> str:
    return exc.detail if isinstance(exc, ActionFailed) else str(exc)
