"""Link and preflight checks: "is the cable path healthy end to end, and are both stations ready?".

Every check becomes a ``CheckResult`` (id, station, status, summary, evidence, fix) under the id it
reports when it fails (shared/reference/findings.md), so a healthy pair shows each id as ``pass``.
Commands run concurrently across stations, each with a timeout; identical command lines on a
station run once per pass and are shared by the checks that read them. A station that cannot be
reached fails ``station-reachable`` with the reason (so ``check`` exits 1) and yields ``skip`` for
its other checks, never a hang; the checks that run on the other station (its ping towards it,
its SSH login to it) still run and say what they see. A channel the station refused for a while
("no more sessions") is a busy station, not an unreachable one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable

from console import json_out
from console.config import Config, Station
from console.probes import ParseError
from console.remote.session import make_transport
from console.remote.transport import Transport
from console.station.checks.api_port import check_api_port
from console.station.checks.context import (
    STATUSES,
    TOOL_PACKAGES,
    TRANSCRIPT,
    CheckResult,
    CheckRun,
    Spec,
    StationDown,
    ToolMissing,
)
from console.station.checks.gpu_errors import check_gpu_errors
from console.station.checks.hazards import check_image_tag, check_remove_ipc
from console.station.checks.health_checks import check_gpu_health, check_rail_live
from console.station.checks.holders import check_gpu_holders
from console.station.checks.identity import check_pair_identity
from console.station.checks.links import (
    check_jumbo_ping,
    check_link_down,
    check_link_speed,
    check_mtu_mismatch,
    check_mtu_value,
    check_rail_route,
    check_reachable,
)
from console.station.checks.rdma_checks import (
    check_clock_skew,
    check_clock_sync,
    check_rdma_errors,
    check_rdma_netdev,
    check_rdma_port,
    check_roce_gid,
)
from console.station.checks.software import (
    check_api_exposed,
    check_checkpoint,
    check_disk,
    check_env,
    check_image,
    check_model_config,
    check_same_user,
    check_ssh,
    check_toolkit,
)
from console.tasks import gather_owned
from console.vocabulary import CheckStatus

__all__ = ["CHECK_IDS", "SPECS", "STATUSES", "CheckResult", "StationDown", "ToolMissing", "overall", "planned",
           "run_checks", "station_summary", "summary_line", "to_json", "unknown_selection"]

# ------------------------------------------------------------------ registry

SPECS: tuple[Spec, ...] = (
    Spec("station-reachable", "station", check_reachable, "SSH login works", ("sshd",), login=False),
    Spec("link-down", "station", check_link_down, "rail link up", ("ethtool",)),
    Spec("link-speed", "station", check_link_speed, "rail at the profile's speed", ("ethtool",)),
    Spec("mtu-value", "station", check_mtu_value, "rail MTU = profile", ("ip",)),
    Spec("pair-identity", "pair", check_pair_identity, "the two stations are two machines",
         ("machine-id", "nvidia-smi", "ssh")),
    Spec("mtu-mismatch", "pair", check_mtu_mismatch, "same MTU both ends", ("ip",)),
    Spec("jumbo-ping", "direction", check_jumbo_ping, "jumbo ping with DF set", ("ping",)),
    Spec("rail-route", "direction-src", check_rail_route, "route to the peer via the rail", ("ip",)),
    Spec("rdma-netdev", "station", check_rdma_netdev, "RDMA device <-> netdev", ("ibdev2netdev",)),
    Spec("rdma-port-down", "station", check_rdma_port, "RDMA port active", ("rdma", "ibv_devinfo")),
    Spec("roce-gid", "station", check_roce_gid, "RoCE v2 GID for the rail IP", ("show_gids",)),
    Spec("rdma-errors", "station", check_rdma_errors, "port error counters", ("sysfs counters",)),
    Spec("clock-unsynced", "station", check_clock_sync, "clock synchronised", ("chronyc", "timedatectl")),
    Spec("clock-skew", "pair", check_clock_skew, "skew between stations", ("date",)),
    Spec("ssh-a-to-b", "head-to-worker", check_ssh, "passwordless SSH head -> worker", ("ssh", "sshd")),
    Spec("user-mismatch", "all", check_same_user, "same Linux user", ("id", "sshd")),
    Spec("image-mismatch", "all", check_image, "same container image", ("docker",)),
    Spec("container-toolkit", "station", check_toolkit, "Docker + NVIDIA toolkit", ("docker",)),
    Spec("gpu-errors", "station", check_gpu_errors, "every GPU answers nvidia-smi", ("nvidia-smi",)),
    Spec("gpu-holders", "station", check_gpu_holders, "no one else holds the GPUs (shown, not fatal)",
         ("nvidia-smi", "ps", "docker")),
    Spec("model-config", "station", check_model_config, "config.json architecture/quantization", ("files",)),
    Spec("checkpoint-mismatch", "all", check_checkpoint, "same model revision", ("files",)),
    Spec("disk-space", "station", check_disk, "free disk for the checkpoint", ("df",)),
    Spec("env-mismatch", "all", check_env, "env file consistent", ("files",)),
    Spec("api-exposed", "head", check_api_exposed, "API exposure", ("config",)),
    Spec("api-port", "station", check_api_port, "no one else listens on the API port (the head's refuses a launch)",
         ("ss", "ps", "docker")),
    # Launch hazards over SSH
    Spec("remove-ipc", "station", check_remove_ipc, "IPC outlives the SSH session (logind RemoveIPC)",
         ("loginctl", "logind.conf")),
    Spec("image-tag", "all", check_image_tag, "image tag names one build everywhere", ("docker",)),
    # GPU and fabric health
    Spec("gpu-health", "station", check_gpu_health, "GPU throttling, PCIe, ECC, power", ("nvidia-smi",)),
    Spec("rail-live", "station", check_rail_live, "rail up, not flapping, no errors rising", ("sysfs counters",)),
)
CHECK_IDS = tuple(s.id for s in SPECS)


def _jobs(config: Config, only: set[str] | None) -> list[tuple[Spec, tuple[Station, ...], str, set[str]]]:
    """(spec, arguments, label, stations it needs) for every check of this pass."""
    head, workers, all_ = config.head, config.workers, list(config.stations)
    jobs = []
    for spec in SPECS:
        targets: list[tuple[tuple[Station, ...], str, set[str]]] = []
        if spec.scope == "station":
            targets = [((s,), s.name, {s.name}) for s in all_]
        elif spec.scope == "pair":
            targets = [((head, w), f"{head.name}<->{w.name}", {head.name, w.name}) for w in workers]
        elif spec.scope == "direction":
            for w in workers:
                targets += [((head, w), f"{head.name}->{w.name}", {head.name}),
                            ((w, head), f"{w.name}->{head.name}", {w.name})]
        elif spec.scope == "direction-src":
            targets = [((head, workers[0]), head.name, {head.name})] if workers else []
            targets += [((w, head), w.name, {w.name}) for w in workers]
        elif spec.scope == "head-to-worker":
            targets = [((head, w), f"{head.name}->{w.name}", {head.name}) for w in workers]
        elif spec.scope == "all":
            targets = [((tuple(all_)), ",".join(s.name for s in all_), {s.name for s in all_})] if len(all_) > 1 \
                else [((tuple(all_)), all_[0].name, {all_[0].name})]
        elif spec.scope == "head":
            targets = [((head,), head.name, set())]
        for args, label, needs in targets:
            if only is None or spec.id in only or f"{spec.id}@{label}" in only:
                jobs.append((spec, args, label, needs))
    return jobs


def _failed_line(log: list[str]) -> str | None:
    """'TOOL failed on STATION: first error line' for the last command that exited non-zero."""
    for entry in reversed(log):
        head, _, body = entry.partition("\n")
        if "(exit status" in body:
            m = re.match(r"\[(\S+)\] \$ (\S+)", head)
            lines = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("(exit status")]
            if m:
                return f"{m.group(2)} failed on {m.group(1)}" + (f": {lines[0].strip()[:160]}" if lines else "")
    return None


# Station fields a check cannot do without (from [[stations]] in the config).
_NEEDS_FIELDS = {
    "link-down": ("rail_netdev",), "link-speed": ("rail_netdev",), "mtu-value": ("rail_netdev",),
    "mtu-mismatch": ("rail_netdev",), "jumbo-ping": ("rail_netdev", "rail_ip"), "rail-route": ("rail_netdev", "rail_ip"),
    "rdma-netdev": ("rdma_device", "rail_netdev"), "rdma-port-down": ("rdma_device",),
    "roce-gid": ("rdma_device", "rail_ip"), "rdma-errors": ("rdma_device",),
    "rail-live": ("rail_netdev",),
}


def _missing_fields(spec: Spec, args: tuple[Station, ...]) -> list[str]:
    return [f"{st.name}.{f}" for st in args for f in _NEEDS_FIELDS.get(spec.id, ()) if not getattr(st, f)]


async def _one(run: CheckRun, spec: Spec, args: tuple[Station, ...], label: str, needs: set[str]) -> CheckResult:
    log: list[str] = []
    TRANSCRIPT.set(log)
    missing = _missing_fields(spec, args)
    if missing:
        return CheckResult(spec.id, label, CheckStatus.SKIP, f"not configured: {', '.join(missing)}", "",
                           "Set rail_netdev, rdma_device and rail_ip in each [[stations]] table of the config "
                           "(`ibdev2netdev` shows the device -> netdev pairs, `ip -4 addr` the rail IP).")
    try:
        for name in sorted(needs) if spec.login else ():
            await run.reachable(name)
        if spec.scope == "all":
            return await spec.fn(run, list(args))
        return await spec.fn(run, *args)
    except StationDown as exc:
        return CheckResult(spec.id, label, CheckStatus.SKIP, str(exc))
    except ToolMissing as exc:
        tool = str(exc).split()[0]
        pkg = TOOL_PACKAGES.get(tool, "its package")
        return CheckResult(spec.id, label, CheckStatus.FAIL, str(exc), "\n\n".join(log),
                           f"Install {pkg} on the station (DGX OS ships it), or put it on the login shell's PATH.")
    except ParseError as exc:
        why = _failed_line(log)
        return CheckResult(spec.id, label, CheckStatus.FAIL,
                           why or f"output not understood: {exc}", "\n\n".join(log),
                           "Run the command in the evidence by hand on the station; the tool may be missing or "
                           "too old.")
    except Exception as exc:  # one broken check must not hide the others
        return CheckResult(spec.id, label, CheckStatus.FAIL,
                           f"check failed: {exc.__class__.__name__}: {exc}", "\n\n".join(log),
                           "This is a bug in the console's check; please report it with the evidence.")


def unknown_selection(config: Config | None, only: Iterable[str]) -> str | None:
    """The first ``--only`` item that names no check (``id``), or, with a config, no station of
    that check in it (``id@label``)."""
    labels: dict[str, set[str]] = {}
    for spec, _a, label, _n in _jobs(config, None) if config is not None else ():
        labels.setdefault(spec.id, set()).add(label)
    for item in only:
        cid, sep, label = item.partition("@")
        if cid not in CHECK_IDS:
            return f"unknown check {cid!r} (known: {', '.join(CHECK_IDS)})"
        if config is not None and sep and label not in labels.get(cid, set()):
            return (f"check {cid!r} has no station {label!r} in this config "
                    f"(it runs for: {', '.join(sorted(labels.get(cid, set()))) or 'none'})")
    return None


def planned(config: Config, only: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(id, station label) of every check a pass will report, in order (for placeholder rows)."""
    return [(spec.id, label) for spec, _a, label, _n in _jobs(config, set(only) if only is not None else None)]


async def run_checks(config: Config, transports: dict[str, Transport] | None = None,
                     only: Iterable[str] | None = None, cmd_timeout: float | None = None,
                     on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Every check (or those named in ``only``: ``id`` or ``id@station-label``), in catalogue order.
    ``on_result`` is called (on the caller's loop) as each check finishes."""
    own = transports is None
    if transports is None:
        transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                      for s in config.stations}
    run = CheckRun(config, transports, cmd_timeout or config.command_timeout_s)
    try:
        jobs = _jobs(config, set(only) if only is not None else None)

        async def report(job) -> CheckResult:
            result = await _one(run, *job)
            if on_result is not None:
                on_result(result)
            return result

        return list(await gather_owned(*(report(j) for j in jobs)))
    finally:
        await run.close()
        if own:
            await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)


def overall(results: Iterable[CheckResult]) -> int:
    """Exit code: 1 when any check fails, else 0."""
    return 1 if any(r.status == CheckStatus.FAIL for r in results) else 0


def station_summary(results: Iterable[CheckResult], station: str) -> dict[str, int]:
    """Counts per status for the checks that involve ``station`` (for its pane). A label is its stations
    (``A``, ``A<->B``, ``A->B``, ``A,B``), then what it tested (RDMA: ``A->B mlx5_0 host``): a run
    between two stations counts on both panes."""
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        who = r.station.split(" ", 1)[0]
        if r.status in counts and station in re.split(r"<->|->|,", who):
            counts[r.status] += 1
    return counts


def summary_line(counts: dict[str, int]) -> str:
    """One line for a station pane: ``checks: 1 FAIL, 2 warn, 28 pass`` (failures first)."""
    parts = [f"{counts.get(CheckStatus.FAIL, 0)} FAIL"] if counts.get(CheckStatus.FAIL) else []
    parts += [f"{counts[s]} {s}" for s in (CheckStatus.WARN,
                                           CheckStatus.SKIP, CheckStatus.PASS) if counts.get(s)]
    return "checks: " + (", ".join(parts) if parts else "not run")


def to_json(results: Iterable[CheckResult]) -> str:
    return json_out.dumps({"checks": [r.to_dict() for r in results]}, indent=2)
