"""``dgx-console hang-report PATH [--json]``: the hang evidence of every station, taken at the same
moment (``console/doctor/evidence.py``), written as one archive (tar.gz) with one verdict line.

Archive: ``manifest.json``, ``verdict.txt``, ``evidence.json`` (what ``--json`` prints) and per station
``stations/NAME/`` with what the tools printed: ``pyspy.txt`` (``py-spy dump --native``),
``flight_recorder.txt``, ``ras-1.txt`` / ``ras-2.txt``, ``kernel.txt``, ``counters.txt`` and
``logs.txt`` (the last 200 lines). Every string passes the config's masker (``config.masker``:
secret names' values, tokens, the config's own secret values) before it is written; the file is
written like the bundle's (``safe_files``: never through a symlink, an existing file only with
``--force``). Exit 0 captured, 1 nothing to capture (no engine container runs on any station),
2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console import __version__
from console.commands.args import UsageError, add_config_args, check_seconds
from console.commands.bundle import write_archive
from console.config import load_config, masker
from console.secrets import mask_tree
from console.diagnosis import redact
from console.doctor.evidence import HangEvidence, capture
from console.doctor.evidence_words import station_rows, stragglers_line
from console.safe_files import FileProblem, prepare_target
from console.sanitize import one_line

RAW_FILES = ("pyspy.txt", "flight_recorder.txt", "ras-1.txt", "ras-2.txt", "kernel.txt", "counters.txt", "tasks.txt")


def _masked(obj: Any, mask) -> Any:
    """Every string inside ``obj`` masked, dictionary keys too (a secret-named key's value whole): the one
    tree masker (``secrets.mask_tree``) with the config's text masker."""
    return _finite(mask_tree(obj, mask))


def _finite(obj: Any) -> Any:
    """NaN / inf are "unknown" (null) in JSON, never a token strict parsers refuse."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def members(ev: HangEvidence, mask) -> dict[str, bytes]:
    """The archive's files, every string masked before it is encoded."""
    data = _masked(ev.to_dict(), mask)
    out = {"evidence.json": json.dumps(data, indent=2, allow_nan=False, default=str).encode(),
           "verdict.txt": (data["verdict"] + "\n\n" + "\n".join(f"{k}: {v}" for k, v in data["findings"].items())
                           + (f"\n\nnext: {data['next_step']}" if data.get("next_step") else "")
                           + "\n").encode()}
    for name, st in ev.stations.items():
        for fname in RAW_FILES:
            if fname in st.raw:
                out[f"stations/{name}/{fname}"] = mask(st.raw[fname]).encode()
        if st.logs:
            out[f"stations/{name}/logs.txt"] = "".join(mask(x) + "\n" for x in st.logs).encode()
    manifest = {"created_at": datetime.now(UTC).isoformat(timespec="seconds"), "dgx_console_version": __version__,
                "kind": "hang-report", "verdict": data["verdict"], "capture_s": data["capture_s"],
                "stations": {n: {"error": s["error"], "container": s["container"]} for n, s in data["stations"].items()},
                "files": sorted(out), "redaction": "secret names' values, API keys, tokens and the config's own secret "
                                                  "values are masked"}
    out["manifest.json"] = json.dumps(manifest, indent=2).encode()
    return out


def run(args: argparse.Namespace) -> int:
    check_seconds("--interval", args.interval, 60.0)
    check_seconds("--deadline", args.deadline, 3600.0)
    try:
        path = prepare_target(args.path, args.force)  # before the seconds of capturing
    except FileProblem as exc:
        raise UsageError(f"{one_line(str(args.path), 100)}: {exc}") from None
    if path.is_dir():
        raise UsageError(f"{args.path}: is a directory (give a file name, e.g. hang.tar.gz)")
    config = load_config(args.config)
    mask = masker(config)

    def full_mask(text: str) -> str:
        return redact(mask(text))

    progress = None if args.json else (lambda text: print(f"hang-report: {text}", file=sys.stderr))
    try:
        ev = asyncio.run(capture(config, interval_s=args.interval, deadline_s=args.deadline, progress=progress))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a station's answer we did not foresee: one line, never a traceback
        print(f"dgx-console: hang-report: the capture failed: {one_line(full_mask(f'{type(exc).__name__}: {exc}'), 300)}",
              file=sys.stderr)
        return 2
    if not ev.captured:
        if args.json:
            print(json.dumps(_masked(ev.to_dict(), full_mask), allow_nan=False, default=str))
        print(f"dgx-console: {one_line(full_mask(ev.verdict), 400)}", file=sys.stderr)
        return 1
    try:
        write_archive(Path(path), members(ev, full_mask), force=args.force)
    except FileProblem as exc:
        raise UsageError(f"{args.path}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{args.path}: cannot write: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps(_json(ev, full_mask), allow_nan=False, default=str))
    else:
        print(one_line(full_mask(ev.verdict), 2000))
        for k, v in ev.findings.items():
            print(f"  {k}: {one_line(full_mask(v), 400)}")
        for line in station_lines(ev, config.head.name):
            print(f"  {one_line(full_mask(line), 600)}")
        if ev.next_step:
            print(f"next: {one_line(ev.next_step, 600)}")
        print(f"wrote {path} ({ev.capture_s:.1f} s to capture {len(ev.stations)} stations)")
    return 0


def station_lines(ev: HangEvidence, head: str) -> list[str]:
    """The plain output's per-station rows: the engine threads in the kernel and whether RAS found the
    rank behind, in the evidence screen's words (``evidence_words``, one source); no ages (the output
    is the capture's moment, printed as it ends). The CLI reads no engine metrics, so its head says the
    requests in flight are not read (an incident's bundle has them)."""
    out = [f"stragglers: {stragglers_line(ev.stragglers, ev.interval_s + 2.0)}"]
    for name, st in ev.stations.items():
        for label, words in station_rows(st.tasks, ev.stragglers, name, serves_api=name == head):
            if label != "straggler":  # the stragglers' line above says it for every station
                out.append(f"{name} {label}: {words}")
    return out


def _json(ev: HangEvidence, mask) -> dict[str, Any]:
    d = _masked(ev.to_dict(), mask)
    return d


def register(sub) -> None:
    p = sub.add_parser("hang-report", help="hang evidence from every station at the same moment (py-spy, flight "
                                           "recorder, NCCL RAS, GPUs, kernel log, counters, logs) in one archive")
    add_config_args(p)
    p.add_argument("path", metavar="PATH", help="archive to write (tar.gz)")
    p.add_argument("--json", action="store_true", help="print the evidence and the verdict as JSON")
    p.add_argument("--interval", type=float, default=3.0, metavar="S",
                   help="seconds between the two RAS / counter reads (default 3)")
    p.add_argument("--deadline", type=float, default=90.0, metavar="S",
                   help="the whole capture ends by then; what has not answered is said as cut (default 90)")
    p.add_argument("--force", action="store_true", help="replace PATH if it is an existing regular file")
    p.set_defaults(func=run)
