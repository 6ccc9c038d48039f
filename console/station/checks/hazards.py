"""Launch hazards over SSH, checked before a launch: systemd-logind's ``RemoveIPC``
for the launch user (its IPC objects vanish when the SSH session closes unless the user lingers), and
an image tag that names a different build on some station. The facts come from
``console.probes.launch_hazards``; each result carries the station's own output and the fix command."""

from __future__ import annotations

from console.config import Station
from console.probes import launch_hazards as lh
from console.probes.docker import parse_image_identity, short_digest
from console.remote import cmdlines as rc
from console.station.checks.context import CheckResult, CheckRun, ToolMissing, evidence, join_parts
from console.tasks import gather_owned
from console.vocabulary import CheckStatus


def _remove_ipc_fix(user: str, station: str) -> str:
    return (f"On {station}: `sudo loginctl enable-linger {rc.q(user)}` (the user's IPC objects then outlive "
            "its SSH sessions), or turn RemoveIPC off for everyone: `printf '[Login]\\nRemoveIPC=no\\n' | sudo tee "
            "/etc/systemd/logind.conf.d/90-remove-ipc.conf && sudo systemctl restart systemd-logind`.")


async def check_remove_ipc(run: CheckRun, st: Station) -> CheckResult:
    user = await run.reachable(st.name)
    c_user, c_conf = rc.loginctl_user(user), rc.logind_config()
    try:
        r_user = await run.run(st.name, c_user)
    except ToolMissing:
        return CheckResult("remove-ipc", st.name, CheckStatus.PASS,
                           "no systemd-logind (loginctl not found): RemoveIPC does not apply", f"$ {c_user}\n(127)")
    r_conf = await run.run(st.name, c_conf)
    ev = join_parts(evidence(c_user, r_user), evidence(c_conf, r_conf))
    conf = lh.parse_logind_remove_ipc(r_conf.stdout)
    if not conf.enabled:
        return CheckResult("remove-ipc", st.name, CheckStatus.PASS, f"RemoveIPC=no ({conf.source})", ev)
    who = lh.parse_loginctl_user(r_user.stdout + r_user.stderr, user) if r_user.ok else None
    if who is None:
        return CheckResult("remove-ipc", st.name, CheckStatus.WARN,
                           f"RemoveIPC=yes ({conf.source}) and logind does not know {user}: cannot tell whether "
                           "its IPC objects outlive the SSH session", ev, _remove_ipc_fix(user, st.name))
    if who.system_user:
        return CheckResult("remove-ipc", st.name, CheckStatus.PASS,
                           f"{who.name} is a system user (UID {who.uid}): RemoveIPC spares it", ev)
    if who.linger:
        return CheckResult("remove-ipc", st.name, CheckStatus.PASS,
                           f"{who.name} lingers: its IPC objects outlive the SSH session (RemoveIPC=yes)", ev)
    uid = f" (UID {who.uid})" if who.uid is not None else ""
    return CheckResult("remove-ipc", st.name, CheckStatus.FAIL,
                       f"RemoveIPC=yes ({conf.source}) and {who.name}{uid} does not linger: its semaphores and "
                       "shared memory vanish when the SSH session closes, and the head blocks forever", ev,
                       _remove_ipc_fix(who.name, st.name))


async def check_image_tag(run: CheckRun, stations: list[Station]) -> CheckResult:
    """One tag, one build: the registry digest behind the image's tag on every station (the same
    command line as image-mismatch, run once per pass)."""
    image = str(run.config.overrides.get("image") or run.profile.image)
    label = ",".join(s.name for s in stations)
    tag = lh.image_tag(image)
    if tag is None:
        return CheckResult("image-tag", label, CheckStatus.PASS, f"{image} is pinned by digest")
    cmd = rc.docker_image_id(image)
    results = await gather_owned(*(run.run(s.name, cmd) for s in stations))
    ev = join_parts(*(evidence(cmd, r, s.name) for s, r in zip(stations, results, strict=True)))
    found = {s.name: parse_image_identity(r.stdout) if r.ok else None for s, r in zip(stations, results, strict=True)}
    missing = [n for n, i in found.items() if i is None]
    if missing:
        return CheckResult("image-tag", label, CheckStatus.SKIP,
                           f"{image} not present on {', '.join(missing)} (image-mismatch says what to pull)", ev)
    digests = {n: (i.digest_for(image) or f"image {i.short_id} (no registry digest)") for n, i in found.items() if i}
    moving = "a moving tag" if lh.is_moving_tag(tag) else "a tag"
    if len(set(digests.values())) > 1:
        pin = next((d for d in digests.values() if "@sha256:" in d), None)
        pull = f"`docker pull {pin}`" if pin else f"`docker pull {image}` (then read its digest)"
        return CheckResult("image-tag", label, CheckStatus.FAIL,
                           f"{image} is {moving} (:{tag}) that names different builds: " + ", ".join(
                               f"{n} {short_digest(d)}" for n, d in digests.items()), ev,
                           f"Pull one build on every station ({pull}) and name it by digest: `[overrides] image = "
                           f"\"{pin or 'REPO@sha256:...'}\"` (and in any launch script), never by a moving tag.")
    one = next(iter(digests.values()))
    words = (" now; the console's launch pins the digest, a launch script should too" if lh.is_moving_tag(tag)
             else "")
    return CheckResult("image-tag", label, CheckStatus.PASS,
                       f"{image} ({moving} :{tag}) names the same build everywhere: {short_digest(one)}{words}", ev)
