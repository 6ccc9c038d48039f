"""Copy throughput of ``dgx-console copy checkpoint`` on the lab's rail: real sshd in two network
namespaces joined by a veth (loopback-class: the kernel moves the bytes, no NIC), A's rsync pushing
to B's rail address over real ssh. Prints the copy's own rate (rsync and ssh, without the identity
check), the identity check's time (sha256 of every file on both sides) and a resumed copy's rate.
Needs root (network namespaces), sshd and rsync; CPU-bound here, so the figure is the machine's.

    sudo python bench/copy_throughput.py [--mb 1024] [--files 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "lab"))
sys.path.insert(0, str(ROOT))

from lab import Lab, missing_prerequisites  # noqa: E402


def copy(lab: Lab, path: str) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "console", "--config", str(lab.config_path()), "copy", "checkpoint",
                        path, "--json"], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"copy failed: {r.stdout[-400:]} {r.stderr[-400:]}")
    return json.loads(r.stdout), time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="checkpoint size in MB (default 1024)")
    ap.add_argument("--files", type=int, default=4, help="shards (default 4)")
    args = ap.parse_args()
    if missing := missing_prerequisites():
        print("needs: " + ", ".join(missing), file=sys.stderr)
        return 2
    lab = Lab().setup()
    try:
        md = lab.config().profile.model_dir
        src = lab.world.fs_dir("A") / md.lstrip("/") / "bench"
        src.mkdir(parents=True)
        per = args.mb * 1_000_000 // args.files
        for i in range(args.files):
            (src / f"model-{i + 1:05d}-of-{args.files:05d}.safetensors").write_bytes(os.urandom(per))
        out, wall = copy(lab, f"{md}/bench")
        print(f"copy {args.mb} MB in {args.files} files: {out['rate_mb_s']} MB/s "
              f"({out['rate_mb_s'] * 8 / 1000:.2f} Gb/s) rsync+ssh, {out['seconds']:.1f} s; "
              f"{wall:.1f} s with planning and the sha256 identity check of both sides")
        dst = lab.world.fs_dir("B") / md.lstrip("/") / "bench"
        first = sorted(dst.iterdir())[0]
        with open(first, "r+b") as fh:  # a cut: the last half of one shard is missing on B
            fh.truncate(per // 2)
        out2, wall2 = copy(lab, f"{md}/bench")
        print(f"resume: {out2['bytes_sent'] / 1e6:.0f} MB sent of {out2['total_bytes'] / 1e6:.0f} MB, "
              f"{wall2:.1f} s in all, result {out2['result']}")
    finally:
        lab.teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
