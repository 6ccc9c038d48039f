"""dgx-console bench: a concurrency sweep measured with AIPerf's definitions and NVIDIA's method.

Progress goes to stderr; the table (or ``--json``) to stdout; ``--out PATH`` also writes PATH.json
(every request) and PATH.csv. Exit 0 when every request succeeded and the server's token counter
agrees, 1 on errors or a mismatch, 2 on usage errors, 130 when interrupted (finished levels are
still printed and saved).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

import httpx

from console import json_out
from console.commands.args import (
    UsageError,
    add_config_args,
    check_api_key_arg,
    check_count,
    check_seconds,
    check_url_arg,
)
from console.config import BenchRow, load_config
from console.safe_files import MIB, FileProblem, read_bytes
from console.sanitize import one_line
from console.serving.bench import BenchRunner, load_prompts, parse_concurrency, parse_depths, resolve_model
from console.serving.bench_model import (
    DEFAULT_MAX_TOKENS,
    MIN_DECODE_S,
    MIN_TIMED_TOKENS,
    BenchProgress,
    BenchReport,
    BenchSettings,
    LevelResult,
    ReferenceComparison,
    check_report_paths,
    compare_to_reference,
    configured_max_num_seqs,
    max_num_seqs_warning,
    save_report,
    short_levels_warning,
)
from console.serving.bench_stats import DEFAULT_SLO_TARGET_PCT, SLO_HELP, parse_slo, slo_answer
from console.serving.chat import EFFORTS
from console.serving.client import ApiClient
from console.serving.errors import ApiError
from console.tasks import on_signal, stoppable

MAX_PROMPTS_BYTES = 256 * MIB
MAX_REQUESTS = 100_000  # per level: hours of a sweep at any real rate
MAX_TOKENS = 10_000_000  # an output cap beyond any model's context

DESCRIPTION = """\
A concurrency sweep against the served model, measured the way AIPerf measures (TTFT, ITL,
per-user tok/s = 1/ITL, total tok/s) with NVIDIA's method: per level a warm-up of 3x the
concurrency, then 10x measured requests. The profile's reference table is printed beside the
results only when the settings are comparable (same output cap, effort and reply length).

Progress goes to stderr, the table (or --json) to stdout. Exit 0 when every request succeeded
and the server's token counter agrees, 1 on errors or a mismatch, 2 on usage errors, 130 when
interrupted (the finished levels are still printed and saved)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bench", help="concurrency sweep (AIPerf definitions, NVIDIA's method)",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p)
    p.add_argument("--url", help="API base URL (default: the configured head station's API)")
    p.add_argument("--model", help="model id (default: the profile's, else the first /v1/models lists)")
    p.add_argument("--api-key", metavar="KEY", help="API key (default: from the config's api_key_env/file)")
    p.add_argument("--concurrency", default="1,8,16,32", metavar="LIST", help="levels, e.g. 1,8,16,32")
    p.add_argument("--requests-per-level", type=int, metavar="N", help="measured requests (default 10x concurrency)")
    p.add_argument("--warmup", type=int, metavar="N", help="warm-up requests per level (default 3x concurrency)")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, metavar="N",
                   help=f"output cap per request, reasoning included (default {DEFAULT_MAX_TOKENS}, NVIDIA's)")
    p.add_argument("--effort", choices=EFFORTS, help="reasoning effort (NVIDIA ran max)")
    p.add_argument("--ignore-eos", action="store_true", help="generate exactly --max-tokens per request")
    p.add_argument("--prompts", metavar="FILE.jsonl", help="prompts, one JSON object a line "
                   '({"prompt": ...} or {"messages": [...]}); default: built-in coding prompts')
    p.add_argument("--out", metavar="PATH", help="also write PATH.json and PATH.csv (checked before the sweep: "
                                                 "the directory must exist; never through a symlink)")
    p.add_argument("--force", action="store_true", help="replace PATH.json/PATH.csv if they exist")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S",
                   help="longest wait for the next chunk (queued requests wait long at high concurrency)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--slo", nargs="+", action="extend", default=[], metavar="NAME:MS", help=SLO_HELP)
    p.add_argument("--slo-target", type=float, default=DEFAULT_SLO_TARGET_PCT, metavar="PCT",
                   help="a level is within the SLO when this %% of its requests meet every objective "
                        f"(default {DEFAULT_SLO_TARGET_PCT:g})")
    p.add_argument("--depth", default="0", metavar="LIST", help="prompt depths: about N tokens of context "
                   "before each prompt, warm-up included, e.g. 0,4096,16384 (each depth runs every level)")
    p.add_argument("--decode-floor", type=int, default=MIN_TIMED_TOKENS, metavar="N",
                   help=f"per-user tok/s only from replies of N+ tokens over {MIN_DECODE_S * 1000:.0f}+ ms "
                        f"(default {MIN_TIMED_TOKENS}; 0 times every reply of 2+ tokens)")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> BenchSettings:
    try:
        levels = parse_concurrency(args.concurrency)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_count("--requests-per-level", args.requests_per_level, 1, MAX_REQUESTS)
    check_count("--warmup", args.warmup, 0, MAX_REQUESTS)
    check_count("--max-tokens", args.max_tokens, 1, MAX_TOKENS)
    check_seconds("--timeout", args.timeout)
    check_api_key_arg(args.api_key)
    check_count("--decode-floor", args.decode_floor, 0, MAX_TOKENS)
    try:
        slo = parse_slo(args.slo, args.slo_target)
        depths = parse_depths(args.depth)
    except ValueError as exc:
        raise UsageError(one_line(str(exc), 300)) from None
    return BenchSettings(levels, args.requests_per_level, args.warmup, args.max_tokens, args.effort,
                         args.ignore_eos, depths=depths, slo=slo, decode_floor_tokens=args.decode_floor)


@dataclass
class _Target:
    url: str
    key: str | None
    model: str | None
    warnings: list[str] = field(default_factory=list)
    reference: dict[int, BenchRow] = field(default_factory=dict)
    comparison: ReferenceComparison | None = None


def _resolve(args: argparse.Namespace, settings: BenchSettings) -> _Target:
    """URL, key, model hint, warnings (max-num-seqs) and the reference table from the arguments
    and the config (read when there is no --url, or --config names one)."""
    url, key, model = args.url, args.api_key, args.model
    warnings = [w] if (w := short_levels_warning(settings)) else []
    cfg = None
    if not url or getattr(args, "config", None):
        cfg = load_config(getattr(args, "config", None))
    if not url:
        url = cfg.api_url()  # type: ignore[union-attr]
    else:
        check_url_arg(url)
    if cfg is not None:
        key = key or cfg.api_key()
        model = model or cfg.profile.served_model_name or None
        w = max_num_seqs_warning(configured_max_num_seqs(cfg), settings.concurrency, cfg.profile.engine)
        if w:
            warnings.append(w)
        comparison = None
        if cfg.profile.reference_bench:
            comparison = compare_to_reference(settings, cfg.profile.reference_method, args.prompts)
        return _Target(url, key, model, warnings, {r.concurrency: r for r in cfg.profile.reference_bench},
                       comparison)
    return _Target(url, key, model, warnings)


def _check_out(args: argparse.Namespace) -> None:
    """``--out`` is checked before the sweep (minutes of work must not end in 'cannot write')."""
    if not args.out:
        return
    try:
        check_report_paths(args.out, args.force)
    except FileProblem as exc:
        raise UsageError(f"--out {one_line(args.out, 200)}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    _check_out(args)
    prompts = None
    if args.prompts:
        try:  # a regular file of bounded size first: --prompts /dev/zero must not read forever
            read_bytes(args.prompts, MAX_PROMPTS_BYTES)
        except FileProblem as exc:
            raise UsageError(f"--prompts {args.prompts}: {exc}") from None
        try:
            prompts = load_prompts(args.prompts)
        except (ValueError, RecursionError) as exc:
            raise UsageError(one_line(str(exc), 300)) from None
    target = _resolve(args, settings)
    for w in target.warnings:
        print(f"warning: {one_line(w, 500)}", file=sys.stderr)
    if target.comparison is not None and not target.comparison.comparable:
        print(f"note: {one_line(target.comparison.line(), 500)}", file=sys.stderr)
    return asyncio.run(_bench(args, settings, prompts, target))


class _Progress:
    """One line on stderr per update; rewritten in place on a terminal."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self._last: tuple | None = None

    def __call__(self, p: BenchProgress) -> None:
        rate = f", {p.tok_s:,.1f} tok/s" if p.tok_s is not None else ""
        at = f" depth {p.depth:,}" if p.depth else ""
        line = f"C{p.concurrency}{at} ({p.level + 1}/{p.levels}) {p.phase}: {p.done}/{p.total}{rate}"
        if p.phase == "done" and p.result is not None:
            line = f"{p.result.label}: {_row(p.result)}"
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line + ("\n" if p.phase == "done" else ""))
        elif (key := (p.depth, p.concurrency, p.phase, p.done == p.total)) != self._last:  # a log: one line a step
            self._last = key
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _row(lv: LevelResult) -> str:
    server = _server_tokens(lv)
    flag = "  MISMATCH" if lv.mismatch else ""
    return (f"{_f(lv.total_tok_s, ',.1f')} tok/s total, {_f(lv.per_user_tok_s, ',.1f')} per user, "
            f"TTFT {_f(lv.ttft_ms_mean, ',.0f')} ms, ITL {_f(lv.itl_ms_mean, '.2f')} ms, "
            f"latency {_f(lv.latency_s_mean, '.2f')} s, tokens {lv.output_tokens:,} (server {server}){flag}, "
            f"errors {lv.errors}/{lv.requests}")


def _conc(lv: LevelResult) -> str:
    """``4``, or ``4>2`` when at most 2 of the 4 were ever in flight."""
    return str(lv.concurrency) if lv.reached else f"{lv.concurrency}>{lv.concurrency_reached}"


@dataclass(frozen=True)
class _Columns:
    """The table's optional columns: depth (a depth sweep), good% (an SLO), the reference beside."""

    deep: bool
    slo: bool
    beside: bool


def _header(cols: _Columns) -> str:
    return ((f"{'depth':>6} " if cols.deep else "")
            + f"{'conc':>5} {'total tok/s':>12} {'per-user':>9} {'TTFT ms':>9} {'p99':>8} {'ITL ms':>8} "
            f"{'p99':>7} {'lat s':>8} {'tokens':>9} {'server':>9} {'err':>4}" + (f" {'good%':>6}" if cols.slo else "")
            + ("  reference (total / per-user)" if cols.beside else ""))


def _server_tokens(lv: LevelResult) -> str:
    return "n/a" if lv.server_tokens is None else f"{lv.server_tokens:,}"


def _per_user(lv: LevelResult) -> str:
    """``n/m``: requests ran, but none long enough to measure a per-user rate."""
    return _f(lv.per_user_tok_s, ',.1f') if lv.timed_requests or not lv.requests else "n/m"


def _reference_cell(ref: BenchRow | None) -> str:
    return f"  {ref.total_tok_s:,.1f} / {ref.per_user_tok_s:,.1f}" if ref else "  -"


def _level_line(lv: LevelResult, ref: BenchRow | None, cols: _Columns) -> str:
    refs = _reference_cell(ref)
    server = _server_tokens(lv)
    per_user = _per_user(lv)
    good = (f" {_f(lv.goodput_pct, '.0f'):>6}" if cols.slo else "")
    return ((f"{lv.depth:>6} " if cols.deep else "") + f"{_conc(lv):>5} {_f(lv.total_tok_s, ',.1f'):>12} {per_user:>9} "
            f"{_f(lv.ttft_ms_mean, ',.0f'):>9} {_f(lv.ttft_ms_p99, ',.0f'):>8} {_f(lv.itl_ms_mean, '.2f'):>8} "
            f"{_f(lv.itl_ms_p99, '.2f'):>7} {_f(lv.latency_s_mean, '.2f'):>8} {lv.output_tokens:>9,} "
            f"{server:>9}{'!' if lv.mismatch else ' '}{lv.errors:>4}" + good + (refs if cols.beside else ""))


def _print_level_notes(lv: LevelResult, out: Any) -> None:
    """What a level's numbers do not say: its notes, a token count mismatch, its error samples."""
    for note in lv.notes():
        print(note, file=out)
    if lv.mismatch:
        print(f"C{lv.concurrency}: the server counted {lv.server_tokens:,} generated tokens, the benchmark "
              f"{lv.output_tokens:,}: other traffic on the server, or replies without usage", file=out)
    for e in lv.error_samples:  # the server's words: one sanitized line each
        print(f"C{lv.concurrency}: error: {one_line(e, 300)}", file=out)


def print_table(report: BenchReport, reference: dict[int, BenchRow], out: Any = None,
                comparison: ReferenceComparison | None = None) -> None:
    """The levels; the reference column only beside comparable settings (else a line says why)."""
    out = out or sys.stdout  # looked up now: the CLI wraps stdout to keep it terminal-safe
    beside = bool(reference) and (comparison is None or comparison.comparable)
    cols = _Columns(deep=any(lv.depth for lv in report.levels), slo=report.settings.slo is not None, beside=beside)
    print(_header(cols), file=out)
    for lv in report.levels:
        print(_level_line(lv, reference.get(lv.concurrency), cols), file=out)
    if comparison is not None:
        print(one_line(comparison.line(), 500) + ("" if beside else " (not printed beside these results)"), file=out)
    if report.settings.slo is not None:
        for answer in slo_answer(report.levels, report.settings.slo)["answers"]:
            print(one_line(answer["line"], 500), file=out)
    for lv in report.levels:
        _print_level_notes(lv, out)


async def _bench(args: argparse.Namespace, settings: BenchSettings, prompts: tuple | None, t: _Target) -> int:
    top = max(settings.concurrency)
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=top + 4,
                                                             max_keepalive_connections=top + 4))
    # GETs (the model list, /metrics) whole within min(10 s, --timeout): a dripping /metrics never holds the sweep
    async with ApiClient(t.url, api_key=t.key, timeout=min(10.0, args.timeout), stream_timeout=args.timeout,
                         total_timeout=max(3600.0, 4 * args.timeout), transport=transport) as client:
        try:
            model = args.model or await resolve_model(client, t.model)
        except ApiError as exc:
            print(f"dgx-console: bench: {exc}", file=sys.stderr)
            return 1
        runner = BenchRunner(client, model, settings, prompts, on_progress=None if args.json else _Progress())
        runner.report.warnings.extend(t.warnings)
        runner.report.prompts, runner.report.reference = args.prompts, t.comparison
        stop = asyncio.Event()
        with on_signal(stop.set):  # Ctrl+C ends the sweep; the levels finished so far are the report
            _, stopped = await stoppable(runner.run(), stop, name="bench sweep")
        if stopped:
            runner.report.cancelled = True
            print("dgx-console: bench: interrupted; levels finished so far follow", file=sys.stderr)
    report = runner.report
    if args.out:
        try:
            jpath, cpath = save_report(report, args.out, force=args.force, make_dirs=False)
        except (OSError, FileProblem) as exc:
            print(f"dgx-console: bench: cannot write {one_line(args.out, 200)}: {exc}", file=sys.stderr)
            return 1
        print(f"saved {jpath}, {cpath.name}, {jpath.with_suffix('.svg').name} and "
              f"{jpath.with_suffix('.html').name}", file=sys.stderr)
    if args.json:
        print(json_out.dumps(report.to_json(), indent=2))
    else:
        print_table(report, t.reference, comparison=t.comparison)
    for w in report.warnings[len(t.warnings):]:  # what the server reported during the sweep
        print(f"warning: {one_line(w, 500)}", file=sys.stderr)
    if report.cancelled:
        return 130
    return 1 if report.failed or not report.levels else 0
