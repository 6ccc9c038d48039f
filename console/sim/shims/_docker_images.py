"""Simulated ``docker save -o TAR IMAGE`` and ``docker load -i TAR``: what an image copy between
stations uses. The tar is a header line naming the image and its build, then filler bytes derived
from its id (SIZE in all): a load on another station gives that station the same image id, and a
tar damaged on the way loads as another image, as a real one would not match its digest."""

from __future__ import annotations

import hashlib
import json
import sys

SIZE = 4_000_000  # bytes of every simulated image (docker image inspect's .Size, the saved tar's size)


def _filler(image_id: str, n: int) -> bytes:
    seed = hashlib.sha256(image_id.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def _flag(args: list[str], names: tuple[str, ...]) -> tuple[str | None, list[str]]:
    value, rest, i = None, [], 0
    while i < len(args):
        if args[i] in names and i + 1 < len(args):
            value, i = args[i + 1], i + 2
            continue
        rest.append(args[i])
        i += 1
    return value, rest


def cmd_save(args: list[str], ctx, find) -> int:
    out, refs = _flag(args, ("-o", "--output"))
    if out is None or len(refs) != 1:
        print("docker save: the simulator takes -o TAR and one image", file=sys.stderr)
        return 1
    img = find(ctx, refs[0])
    if img is None:
        print(f"Error response from daemon: reference does not exist: {refs[0]}", file=sys.stderr)
        return 1
    pulled = (ctx.state.get("pulled") or {}).get(refs[0])
    header = json.dumps({"ref": refs[0], "pulled": pulled, "id": img["id"]}).encode() + b"\n"
    with open(out, "wb") as fh:
        fh.write(header + _filler(img["id"], SIZE - len(header)))
    return 0


def cmd_load(args: list[str], ctx, find) -> int:
    path, _rest = _flag(args, ("-i", "--input"))
    if path is None:
        print("docker load: the simulator takes -i TAR", file=sys.stderr)
        return 1
    try:
        data = open(path, "rb").read()
        head, _, body = data.partition(b"\n")
        meta = json.loads(head)
    except (OSError, ValueError) as exc:
        print(f"Error processing tar file({exc})", file=sys.stderr)
        return 1
    if body != _filler(meta["id"], SIZE - len(head) - 1):
        print("Error processing tar file(unexpected EOF or layer digest mismatch)", file=sys.stderr)
        return 1
    with ctx.world.edit(ctx.station) as s:
        s.setdefault("pulled", {})[meta["ref"]] = meta["pulled"]
    print(f"Loaded image: {meta['ref']}")
    return 0
