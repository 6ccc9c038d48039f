"""The copy's command lines (``dgx-console copy``), re-exported by ``cmdlines``: every one runs on
the source station and reaches the destination station over the rail (its ``rail_ip``), with the
source station's own key, the way the launch scripts log in from one station to the other."""

from __future__ import annotations

import shlex

q = shlex.quote

# the peer login: a prompt is a failure (BatchMode), a dead link ends the copy within ~15 s
PEER_SSH = ("ssh -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3")
EXIT_MARK = "@@exit"  # the last line of a streamed command: its exit status
HASH_JOBS = 8  # sha256sum processes at once (a checkpoint's shards hash in parallel)


def _path(path: str) -> str:
    """A shell word for ``path`` (``~/x`` -> the login user's home), as ``cmdlines.station_path``."""
    if path == "~" or path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"' + (("/" + q(rest)) if rest else "")
    return q(path)


def rsync_path(path: str) -> str:
    """``path`` as rsync's remote argument: ``~/x`` is ``x`` (rsync starts in the login's home)."""
    return path[2:] if path.startswith("~/") else path


def manifest(path: str, hashes: bool) -> str:
    """A directory's identity: ``@@nodir`` when it is not there; ``L dangling|escapes NAME`` per symlink
    that points nowhere or out of the directory; ``F SIZE NAME`` per regular file; with ``hashes``
    the sha256 of every file (``sha256sum``'s lines, several files hashed at once)."""
    script = (
        f"cd {_path(path)} 2>/dev/null || {{ echo @@nodir; exit 0; }}; root=$(pwd -P); "
        "find . -type l -print0 | while IFS= read -r -d '' l; do "
        'if [ ! -e "$l" ]; then printf "L dangling %s\\n" "${l#./}"; '
        'else t=$(readlink -f -- "$l"); case "$t" in "$root"/*) ;; *) printf "L escapes %s\\n" "${l#./}";; esac; fi; '
        "done; find . -type f -printf 'F %s %P\\n'"
        + (f"; find . -type f -print0 | xargs -0 -r -P {HASH_JOBS} -n 4 sha256sum" if hashes else "")
    )
    return "bash -c " + q(script)


def peer(rail_ip: str, remote: str) -> str:
    """``remote`` (a command line) run on the peer station at ``rail_ip``; ``--``: the address is never
    an option."""
    return f"{PEER_SSH} -- {q(rail_ip)} {q(remote)}"


def peer_manifest(rail_ip: str, path: str, hashes: bool) -> str:
    return peer(rail_ip, manifest(path, hashes))


def _streamed(script: str) -> str:
    """``script`` with rsync's carriage-return progress as lines, then ``@@exit STATUS``."""
    return "bash -c " + q(f"set -o pipefail; {script} 2>&1 | tr '\\r' '\\n'; echo {EXIT_MARK} $?")


def rsync_push(src: str, rail_ip: str, dst: str, bwlimit_mbps: int | None = None) -> str:
    """``src``'s contents into ``dst`` on the peer, resumable: a cut file stays (``--partial``) and the
    next run appends to it after checking what is there (``--append-verify``); progress as lines."""
    mkdir = peer(rail_ip, f"mkdir -p -- {_path(dst)}")
    args = ["rsync", "-a", "--partial", "--append-verify", "--info=progress2", "--no-inc-recursive",
            "-e", PEER_SSH]
    if bwlimit_mbps:
        args.append(f"--bwlimit={max(1, int(bwlimit_mbps * 1e6 / 8 / 1024))}")  # rsync's unit: KiB/s
    src_arg = src.rstrip("/") + "/"
    dst_arg = f"{rail_ip}:{rsync_path(dst).rstrip('/')}/"
    words = " ".join(q(a) for a in args)
    src_word = _path(src_arg) if src_arg.startswith("~/") else q(src_arg)
    return _streamed(f"{mkdir} && {words} -- {src_word} {q(dst_arg)}")


def rsync_present(rail_ip: str) -> str:
    """``no-rsync-here`` / ``no-rsync-there`` when this station or the peer lacks rsync; nothing
    when both have it (ssh's own failure: exit 255)."""
    return ("command -v rsync >/dev/null || { echo no-rsync-here; exit 0; }; "
            + peer(rail_ip, "command -v rsync >/dev/null || echo no-rsync-there"))


def image_id(image: str) -> str:
    """The image's content id (``sha256:...``), the identity both sides must show."""
    return f"docker image inspect --format {q('{{.Id}}')} {q(image)}"


def image_id_size(image: str) -> str:
    """The image's id and its size in bytes (what the destination must find room for)."""
    return f"docker image inspect --format {q('{{.Id}} {{.Size}}')} {q(image)}"


def peer_image_id(rail_ip: str, image: str) -> str:
    return peer(rail_ip, image_id(image))


IMAGE_TAR = "image.tar"


def image_save(image: str, folder: str) -> str:
    """``docker save`` into ``folder/image.tar`` on this station; a save already complete there (the
    same folder, named after the image's id) is kept, so a resumed copy does not save again."""
    d = _path(folder)
    return (f"mkdir -p {d} && cd {d} && {{ [ -f saved ] || {{ docker save -o {IMAGE_TAR}.tmp {q(image)} && "
            f"mv {IMAGE_TAR}.tmp {IMAGE_TAR} && touch saved; }}; }}")


def peer_image_load(rail_ip: str, folder: str) -> str:
    """``docker load`` of the copied tar on the peer, then its folder removed there."""
    d = _path(folder)
    return peer(rail_ip, f"docker load -i {d}/{IMAGE_TAR} && rm -rf -- {d}")


def remove_tree(folder: str) -> str:
    return f"rm -rf -- {_path(folder)}"
