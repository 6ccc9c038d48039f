"""The hostile-HTTP figures: each HTTP attack run against the real CLI in a child
process, bounded (a wall-clock limit and an address-space limit), with its exit code, its wall time,
its peak RSS and whether it printed a traceback.

    PYTHONPATH=$PWD python3 tests/hostile/attack_figures.py [--bomb-mb 1024] [--only NAME]

Not a test (pytest does not collect it): a measurement the report quotes. The hostile server runs
in its own process (``serve``), so the RSS measured is the console's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIMIT_S = 60.0  # a run past this is a hang
AS_LIMIT = 4 * 1024**3  # the child never takes the machine down


def serve(settings: dict) -> None:
    sys.path.insert(0, str(HERE))
    from hostile_api import gzip_bomb, start_hostile

    async def main() -> None:
        srv, _runner = await start_hostile()
        for k, v in settings.items():
            if k != "raw_mode":
                setattr(srv, k, v)
        for kind, on in (("sse", srv.mode), ("metrics", srv.metrics_mode), ("json", srv.models_mode)):
            if on == "gzip-bomb":  # built before the clock starts
                gzip_bomb(kind, srv.bomb_mb)
        if srv.raw is not None:
            srv.raw.interval_s = srv.drip_interval_s
            srv.raw.mode = settings.get("raw_mode", "headers")
            srv.raw.give_up_s = 2 * LIMIT_S  # a client that never stops is seen as hung
        print(json.dumps({"url": srv.url, "raw": srv.raw_url}), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


CONFIG = """\
[[stations]]
name = "A"
host = "127.0.0.1"
port = 1
rank = 0

[api]
url = "{url}"
timeout_s = 5
"""

# name, server settings, argv (URL / RAW / CFG substituted)
ATTACKS: list[tuple[str, dict, list[str]]] = [
    ("status: /v1/models HTML page", {"models_mode": "html"}, ["status", "--config", "CFG"]),
    ("status: /v1/models []", {"models_mode": "list"}, ["status", "--config", "CFG"]),
    ("status: /v1/models {data:[1]}", {"models_mode": "data-int"}, ["status", "--config", "CFG"]),
    ("status: /v1/models invalid UTF-8", {"models_mode": "bad-utf8"}, ["status", "--config", "CFG"]),
    ("status: /v1/models gzip bomb", {"models_mode": "gzip-bomb"}, ["status", "--config", "CFG"]),
    ("status: /v1/models body drip", {"models_mode": "drip"}, ["status", "--config", "CFG"]),
    ("status: /health 302", {"health_mode": "302"}, ["status", "--config", "CFG", "--json"]),
    ("status: headers drip", {}, ["status", "--config", "CFGRAW"]),
    ("chat: SSE gzip bomb", {"mode": "gzip-bomb"}, ["chat", "--url", "URL", "--model", "m", "-m", "hi"]),
    ("chat: headers drip (--timeout 5 --max-time 8)", {},
     ["chat", "--url", "RAW", "--model", "m", "-m", "hi", "--timeout", "5", "--max-time", "8"]),
    ("chat: model list drip (no --model)", {"models_mode": "drip"}, ["chat", "--url", "URL", "-m", "hi"]),
    ("chat: model list gzip bomb (no --model)", {"models_mode": "gzip-bomb"}, ["chat", "--url", "URL", "-m", "hi"]),
    ("chat: cut stream", {"mode": "cut"}, ["chat", "--url", "URL", "--model", "m", "-m", "hi"]),
    ("chat: empty 200 stream", {"mode": "empty"}, ["chat", "--url", "URL", "--model", "m", "-m", "hi"]),
    ("bench: /metrics drip", {"metrics_mode": "drip", "mode": "reply"},
     ["bench", "--url", "URL", "--model", "m", "--concurrency", "1", "--requests-per-level", "1", "--warmup", "0"]),
    ("bench: /metrics gzip bomb", {"metrics_mode": "gzip-bomb"},
     ["bench", "--url", "URL", "--model", "m", "--concurrency", "1", "--requests-per-level", "1", "--warmup", "0"]),
    ("bench: cut streams", {"mode": "cut"},
     ["bench", "--url", "URL", "--model", "m", "--concurrency", "1", "--requests-per-level", "2", "--warmup", "0"]),
]


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def attack(name: str, settings: dict, argv: list[str], tmp: Path) -> dict:
    srv = subprocess.Popen([sys.executable, __file__, "serve", json.dumps(settings)], stdout=subprocess.PIPE,
                           text=True)
    try:
        urls = json.loads(srv.stdout.readline())  # type: ignore[union-attr]
        cfg, cfg_raw = tmp / "c.toml", tmp / "raw.toml"
        cfg.write_text(CONFIG.format(url=urls["url"]))
        cfg_raw.write_text(CONFIG.format(url=urls["raw"]))
        subst = {"URL": urls["url"], "RAW": urls["raw"], "CFG": str(cfg), "CFGRAW": str(cfg_raw)}
        cmd = [sys.executable, "-m", "console"] + [subst.get(a, a) for a in argv]
        t0 = time.monotonic()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limit,
                                 env={**os.environ, "NO_COLOR": "1"})
        try:
            out, err = child.communicate(timeout=LIMIT_S)
            hung = False
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            hung = True
        wall = time.monotonic() - t0
        rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child so far
        text = (out + err).decode("utf-8", "replace")
        last = [ln for ln in text.splitlines() if ln.strip()][-1:] or [""]
        return {"attack": name, "rc": child.returncode, "wall_s": round(wall, 1), "hung": hung,
                "traceback": "Traceback" in text, "rss_mb": rss_kb // 1024, "said": last[0][:150]}
    finally:
        srv.kill()
        srv.wait()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(json.loads(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--bomb-mb", type=int, default=1024, help="what each gzip bomb decodes to")
    ap.add_argument("--only", default="", help="run the attacks whose name contains this")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, settings, argv in ATTACKS:
            if args.only and args.only not in name:
                continue
            # each attack in a fresh measuring process: RUSAGE_CHILDREN's peak is per parent
            res = subprocess.run([sys.executable, "-c",
                                  "import json,sys; sys.path.insert(0, sys.argv[1]); import attack_figures as a;"
                                  "print(json.dumps(a.attack(sys.argv[2], json.loads(sys.argv[3]),"
                                  " json.loads(sys.argv[4]), a.Path(sys.argv[5]))))",
                                  str(HERE), name, json.dumps({**settings, "bomb_mb": args.bomb_mb}),
                                  json.dumps(argv), tmp], capture_output=True, text=True)
            row = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else \
                {"attack": name, "error": res.stderr[-300:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    bad = [r for r in rows if r.get("traceback") or r.get("hung") or "error" in r]
    print(f"attacks {len(rows)}, tracebacks {sum(bool(r.get('traceback')) for r in rows)}, "
          f"hangs {sum(bool(r.get('hung')) for r in rows)}, "
          f"peak RSS {max((r.get('rss_mb', 0) for r in rows), default=0)} MB")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
