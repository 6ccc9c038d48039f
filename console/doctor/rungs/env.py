"""Rung 4, the environment diff between stations: the ``NCCL_*``, ``GLOO_*``, ``UCX_*``, ``VLLM_*``,
``TORCH_NCCL_*`` variables of the running (or last) container (``docker inspect``), the NCCL version
from its log, the image, the GID index each station uses against the RoCE v2 entry of ``show_gids``,
the MTU at both ends and ``NCCL_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` against the rail. Every difference
is flagged; the ones that break a collective fail and name the cause."""

from __future__ import annotations

from console.config import Station
from console.catalogue import known_bad
from console.doctor import facts
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.doctor.rungs import env_ras
from console.probes import docker_env as de
from console.probes import rdma as rdma_probe
from console.vocabulary import CheckStatus

ID = "env"
# Variables that legitimately differ per station (its own address): compared by the addresses rung.
PER_STATION = {"VLLM_HOST_IP", "SGLANG_HOST_IP", "NCCL_COMM_ID", "VLLM_PORT", "NCCL_IB_GID_INDEX"}
# Settings every rank of a communicator must share: a difference can hang or slow a collective.
MUST_MATCH = {"NCCL_PROTO", "NCCL_ALGO", "NCCL_IB_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_NVLS_ENABLE",
              "NCCL_CUMEM_ENABLE", "NCCL_BUFFSIZE", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_IB_TIMEOUT",
              "NCCL_IB_RETRY_CNT", "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_FAMILY", "NCCL_P2P_DISABLE",
              "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_CROSS_NIC", "NCCL_IB_QPS_PER_CONNECTION",
              "VLLM_NCCL_SO_PATH", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}
GID_NEXT = ("Set NCCL_IB_GID_INDEX={want} on {st} (the GID index is local to each station), or unset it on every "
            "station: current NCCL picks the RoCE v2 GID of the interface's IPv4 address itself. Try it first with the "
            "debug relaunch (rung relaunch), then put it in the launch script / config.")


def describe_gid(rows: list[rdma_probe.Gid], device: str, index: int) -> str:
    g = next((r for r in rows if r.index == index and r.device == device), None)
    if g is None:
        return f"index {index} does not exist on {device}"
    what = f"IPv4 {g.ipv4}" if g.ipv4 else ("link-local IPv6" if g.gid.startswith("fe80") else "an IPv6 address")
    return f"index {index} is the RoCE {g.version} GID of {what} ({g.gid})"


async def _station_facts(ctx: DoctorContext, st: Station) -> dict:
    c = await facts.container(ctx, st)
    env, source = await facts.launch_env(ctx, st)
    info, log_ev = (await facts.nccl_log(ctx, st, c.name)) if c.runtime is not None else (None, "")
    rows, gid_ev = await facts.gids(ctx, st, st.rdma_device) if st.rdma_device else ([], "")
    mtu, mtu_ev = await facts.mtu(ctx, st, st.rail_netdev) if st.rail_netdev else (None, "")
    return {"c": c, "env": env, "source": source, "info": info, "log_ev": log_ev, "gids": rows, "gid_ev": gid_ev,
            "mtu": mtu, "mtu_ev": mtu_ev}


def _gid_in_use(f: dict) -> tuple[int | None, str]:
    v = f["env"].get("NCCL_IB_GID_INDEX")
    if v not in (None, "", "-1"):
        try:
            return int(v), f"NCCL_IB_GID_INDEX={v} in {f['source']}"
        except ValueError:
            return None, f"NCCL_IB_GID_INDEX={v!r} is not a number"
    if f["info"] is not None and f["info"].gid_index is not None:
        return f["info"].gid_index, "the NCCL log (set by environment)"
    return None, "not set: NCCL selects it"


async def run(ctx: DoctorContext) -> list[RungResult]:
    stations = ctx.stations
    label = ",".join(s.name for s in stations)
    fs, out = await ctx.per_station(ID, lambda s: _station_facts(ctx, s))
    if not fs:
        return out
    env_ev = tuple(f"[{n}] NCCL-related environment ({f['source']}):\n" + (
        "\n".join(f"{k}={v}" for k, v in sorted(f["env"].items())) or "(none)") for n, f in fs.items())

    # 1. every variable that differs (or is set on one station only): NCCL's own comparison on 2.31+
    # (ncclras -D), else the rung's own diff of each container's environment
    versions = {n: (f["info"].version if f["info"] else None) for n, f in fs.items()}
    report, ras_ev = await env_ras.ras_report(ctx, fs, versions)
    if report is not None:
        out += env_ras.ras_results(label, report, ras_ev)
    own = (f"own diff of each container's environment: {ras_ev}" if report is None else
           "own diff of each container's environment; NCCL_* by ncclras -D")
    names = sorted(k for k in {k for f in fs.values() for k in f["env"]} - PER_STATION
                   if report is None or not k.startswith("NCCL_"))  # ncclras -D compared the NCCL_* ones
    same = diffs = 0
    for k in names:
        vals = {n: f["env"].get(k) for n, f in fs.items()}
        if len(set(vals.values())) == 1:
            same += 1
            continue
        shown = ", ".join(f"{n}: {v if v is not None else '(unset)'}" for n, v in vals.items())
        must = k in MUST_MATCH
        diffs += 1
        out.append(RungResult(ID, label, CheckStatus.FAIL if must else CheckStatus.WARN,
                              f"{k} differs: {shown}", (*env_ev, f"compared by the {own}"),
                              f"Use the same {k} on every station (in the launch script / config overrides)"
                              + (": every rank of a communicator must agree on it." if must else "."), cause=must))
    if len(fs) > 1 and not diffs:
        what = "NCCL/GLOO/UCX/VLLM/TORCH_NCCL" if report is None else "GLOO/UCX/VLLM/TORCH_NCCL"
        out.append(RungResult(ID, label, CheckStatus.PASS, f"the {same} {what} variables agree ({own})", env_ev))

    # 2. NCCL version and image
    if len({v for v in versions.values() if v}) > 1:
        out.append(RungResult(ID, label, CheckStatus.FAIL, "NCCL version differs: " + ", ".join(
            f"{n} {v or '?'}" for n, v in versions.items()), tuple(f["log_ev"] for f in fs.values()),
            "Use one NCCL build on every station: the image's bundled NCCL (2.30.7 pinned for GLM-5.3); drop "
            "VLLM_NCCL_SO_PATH / LD_LIBRARY_PATH overrides and host library mounts.", cause=True))
    elif all(versions.values()):
        out.append(RungResult(ID, label, CheckStatus.PASS,
                              f"NCCL {next(iter(versions.values()))} on every station",
                              tuple(f["log_ev"] for f in fs.values())))
    for n, v in versions.items():  # a build with a public hang report
        if bad := known_bad(v):
            out.append(RungResult(ID, n, CheckStatus.FAIL, f"NCCL {v} on {n} is a known-bad build: {bad.what}",
                                  (fs[n]["log_ev"], "reports: " + ", ".join(bad.links)),
                                  f"Use {bad.fix} on every station ({bad.cite}).", cause=True))
    images = {n: (f["c"].runtime.image, f["c"].runtime.image_id) for n, f in fs.items() if f["c"].runtime}
    if len({v for v in images.values()}) > 1:
        out.append(RungResult(ID, label, CheckStatus.FAIL, "image differs: " + ", ".join(
            f"{n} {img} ({iid[:19] if iid else '?'})" for n, (img, iid) in images.items()),
            tuple(f["c"].evidence for f in fs.values()), "Run the same image, pinned by digest, on every station.",
            cause=True))
    elif images:
        img, iid = next(iter(images.values()))
        out.append(RungResult(ID, label, CheckStatus.PASS,
                              f"same image everywhere: {img} (image ID {(iid or '?')[:19]})"))

    # 3. per station: GID index in use vs RoCE v2 entry, NCCL_SOCKET_IFNAME / NCCL_IB_HCA vs the rail
    for s in stations:
        f = fs.get(s.name)
        if f is None:
            continue
        want = rdma_probe.roce_v2_index(f["gids"], s.rail_ip, s.rdma_device) if s.rail_ip else None
        used, where = _gid_in_use(f)
        ev_gid = (f["gid_ev"], f"[{s.name}] GID index in use: {used if used is not None else 'auto'} ({where})")
        if want is None:
            out.append(RungResult(ID, s.name, CheckStatus.FAIL,
                                  f"no RoCE v2 GID for {s.rail_ip} on {s.rdma_device}", ev_gid,
                                  f"Give {s.rail_netdev} the address {s.rail_ip} (the GID table follows the "
                                  "netdev's addresses).", cause=True))
        elif used is not None and used != want:
            out.append(RungResult(ID, s.name, CheckStatus.FAIL,
                                  f"GID index {used} in use ({where}), but the RoCE v2 GID of "
                                  f"{s.rail_ip} on {s.rdma_device} is index {want}: "
                                  f"{describe_gid(f['gids'], s.rdma_device, used)}", ev_gid,
                                  GID_NEXT.format(want=want, st=s.name), cause=True,
                                  suggest=((s.name, "NCCL_IB_GID_INDEX", str(want)),)))
        else:
            out.append(RungResult(ID, s.name, CheckStatus.PASS,
                                  f"GID index {used if used is not None else 'auto'} = the RoCE v2 "
                                  f"GID of {s.rail_ip} (index {want})", ev_gid))
        for var, target, what in (("NCCL_SOCKET_IFNAME", s.rail_netdev, "rail netdev"),
                                  ("NCCL_IB_HCA", s.rdma_device, "rail RDMA device")):
            if not target:
                continue
            val = f["env"].get(var)
            if val is None:
                out.append(RungResult(ID, s.name, CheckStatus.WARN,
                                      f"{var} is not set: NCCL picks an interface itself",
                                      env_ev, f"Pin {var}={target} (the {what}) in the launch environment."))
                continue
            hit = de.ifname_matches(val, target)
            if hit is False:
                out.append(RungResult(ID, s.name, CheckStatus.FAIL,
                                      f"{var}={val} does not select the {what} {target}", env_ev,
                                      f"Set {var}={target} on {s.name}.", cause=True,
                                      suggest=((s.name, var, target),)))
            elif hit is None:
                out.append(RungResult(ID, s.name, CheckStatus.WARN,
                                      f"{var}={val} only excludes: NCCL may pick another "
                                      f"interface than {target}", env_ev, f"Pin {var}={target}."))
            else:
                out.append(RungResult(ID, s.name, CheckStatus.PASS,
                                      f"{var}={val} selects the {what} {target}"))

    # 4. MTU at both ends
    mtus = {n: f["mtu"] for n, f in fs.items() if f["mtu"] is not None}
    mtu_ev = tuple(f["mtu_ev"] for f in fs.values() if f["mtu_ev"])
    want_mtu = ctx.profile.link.mtu
    if len(set(mtus.values())) > 1:
        out.append(RungResult(ID, label, CheckStatus.FAIL,
                              "rail MTU differs: " + ", ".join(f"{n} {m}" for n, m in mtus.items()),
                              mtu_ev, f"Set MTU {max(mtus.values())} on every rail (`sudo ip link set dev NETDEV mtu "
                              f"{max(mtus.values())}`): RoCE packets of the larger side are dropped.", cause=True))
    elif mtus:
        m = next(iter(mtus.values()))
        out.append(RungResult(ID, label, CheckStatus.PASS if m == want_mtu else CheckStatus.WARN,
                              f"rail MTU {m} at both ends"
                              + ("" if m == want_mtu else f" (the profile wants {want_mtu})"), mtu_ev))
    return out
