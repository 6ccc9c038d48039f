"""``dgx-console plan [--json]``: the fit estimate alone, before a load that may take minutes.

Reads config.json and the shard sizes of the checkpoint on every station, the serving GPU's
memory and what holds it, and the launch settings (the profile with the config's overrides, or the
flags in the operator's ``launch_script``); prints weights per GPU and the KV-cache tokens left at
the chosen memory fraction against ``--max-model-len`` x ``--max-num-seqs``. Exit 0 when it fits,
1 when it does not (or a station cannot be read), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from console import json_out
from console.commands.args import add_config_args
from console.config import Config, load_config
from console.remote.host_keys import HostKeyChoice, trust_stations
from console.remote.transport import TransportError
from console.sanitize import one_line
from console.service.actions import ActionFailed, ServiceActions
from console.service.fit import StationFit
from console.service.fit_inputs import FitReport

HELP = "fit estimate: weights per GPU and KV-cache tokens vs --max-model-len x --max-num-seqs"


async def estimate(cfg: Config, trust: bool = False) -> tuple[FitReport, str | None]:
    """The report, and a note when the service runs (then it is estimated as if stopped)."""
    async with ServiceActions(cfg) as svc:
        await trust_stations(svc.transports.values(), HostKeyChoice(trust), cfg.connect_timeout_s + 2)
        report, running = await svc.fit_now()
    note = (f"the service is running on {', '.join(running)}: memory estimated as if it were stopped"
            if running else None)
    return report, note


def describe(f: StationFit) -> list[str]:
    s, m = f.settings, f.shape
    frac = "--gpu-memory-utilization" if s.engine == "vllm" else "--mem-fraction-static"
    layers = m.attention_layers + (m.mtp_layers if s.mtp else 0)
    kind = (f"MLA latent {m.kv_lora_rank}+{m.qk_rope_head_dim}" + (f" + DSA indexer {m.index_head_dim}"
                                                                  if m.index_head_dim else "")
            if m.attention == "mla" else f"GQA {m.num_kv_heads} KV heads x {m.head_dim}")
    lines = [
        f"checkpoint {f.checkpoint_gib:.1f} GiB ({f.checkpoint_source}) over tensor parallel {s.tensor_parallel}: "
        f"weights {f.weights_gib:.1f} GiB per GPU of {f.total_gib:.1f} GiB"
        + (" (unified memory)" if f.unified else ""),
        f"{frac} {s.memory_fraction:g}: {f.budget_gib:.1f} GiB; start-up overhead ~{f.overhead_gib:.1f} GiB "
        "(an estimate)" + (f"; free now {f.free_gib:.1f} GiB" if f.free_gib is not None else ""),
        f"KV cache ~{f.kv_gib:.1f} GiB = {f.kv_tokens:,} tokens ({f.bytes_per_token:,} bytes/token: {kind}, "
        f"{layers} layers, {s.kv_cache_dtype} cache)",
        f"one request of {s.max_model_len:,} tokens needs {f.one_request_gib:.2f} GiB; {s.max_num_seqs} sequences "
        f"at full length need {f.all_requests_tokens:,} tokens ({f.concurrency:.1f} fit at once)",
    ]
    if m.hybrid:
        lines.append(f"{m.linear_layers} of {m.num_layers} layers are linear-attention / state-space (no KV)")
    lines += [f"settings from {s.source}" + (f" ({'; '.join(s.notes)})" if s.notes else "")]
    return lines


def print_report(report: FitReport, cfg: Config, note: str | None, out=sys.stdout) -> None:
    if note:
        print(f"note: {note}", file=out)
    for f in report.fits:
        st = cfg.station(f.station)
        print(f"{f.station} (rank {st.rank}, {st.role}): {'fits' if f.fits else 'DOES NOT FIT'}", file=out)
        for line in describe(f):
            print(f"  {line}", file=out)
        for w in f.warnings:
            print(f"  {w.severity}: {one_line(w.text)}" + (f"\n    fix: {w.fix}" if w.fix else ""), file=out)
    for w in report.problems:
        print(f"{w.station}: cannot estimate: {one_line(w.text)}" + (f"\n    fix: {w.fix}" if w.fix else ""),
              file=out)
    verdict = report.verdict
    if verdict == "unknown":
        verdict += f" (no estimate for {', '.join(dict.fromkeys(w.station for w in report.problems))})"
    print(f"fits: {verdict}", file=out)


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    try:
        report, note = asyncio.run(estimate(cfg, args.trust_host_key))
    except (ActionFailed, TransportError) as exc:
        print(f"dgx-console: plan: {one_line(str(getattr(exc, 'detail', exc)))}", file=sys.stderr)
        return 1
    if args.json:
        doc = report.to_json()
        if note:
            doc["note"] = note
        print(json_out.dumps(doc, indent=2))
    else:
        print_report(report, cfg, note)
    return 0 if report.ok else 1


def register(sub) -> None:
    p = sub.add_parser("plan", help=HELP, description=HELP)
    add_config_args(p)
    p.add_argument("--json", action="store_true",
                   help='print {"stations": {...}, "fits": bool, "warnings": [...]} on stdout')
    p.set_defaults(func=run)
