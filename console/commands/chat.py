"""``dgx-console chat``: one smoke chat with the served model, the same client as the chat pane.

Streams the reply's content on stdout and its reasoning on stderr (dimmed on a terminal, labelled
"[reasoning]" otherwise: ``chat -m ... > reply.txt`` keeps only the answer) as they arrive, then prints
TTFT, output tokens and tokens/s on stderr; ``--json`` prints the contract object instead. Exit 0 on a
reply (warnings included), 1 when the server is unhealthy or errors or the reply was cut (the stream
ended before ``[DONE]`` and any finish reason), 2 on usage errors.
The reply is outside text: printed sanitized (``--json`` keeps it raw, JSON-escaped); ``--timeout``
bounds the wait for the headers and the gap between data events (and the model list, at most
10 s), ``--max-time`` the whole reply.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from console import json_out
from console.commands.args import (
    UsageError,
    add_config_args,
    check_api_key_arg,
    check_count,
    check_seconds,
    check_url_arg,
)
from console.sanitize import clean, one_line
from console.serving.chat import EFFORTS, SMOKE_TOOL, SMOKE_TOOL_PROMPT, ChatEvent, ChatRequest, ChatResult
from console.serving.client import ApiClient
from console.serving.errors import ApiError

DIM, RESET = "\x1b[2m", "\x1b[0m"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("chat", help="send one chat message to the served model (smoke test)",
                              description=__doc__.split("\n\n")[0].replace("``", ""))
    add_config_args(p)
    p.add_argument("--message", "-m", metavar="TEXT", help="the user message (default with --tool-test: "
                   "a weather question)")
    p.add_argument("--url", help="API base URL (default: the configured head station's API)")
    p.add_argument("--model", help="model id (default: the first one /v1/models lists)")
    p.add_argument("--api-key", metavar="KEY", help="API key (default: from the config's api_key_env/file)")
    p.add_argument("--effort", choices=EFFORTS, help="reasoning effort (chat_template_kwargs.reasoning_effort)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="completion budget, reasoning included")
    p.add_argument("--temperature", type=float, metavar="T")
    p.add_argument("--no-think", action="store_true", help="turn reasoning off (enable_thinking=false)")
    p.add_argument("--tool-test", action="store_true", help="offer a get_weather tool and show the parsed call")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="longest wait for the next data event (keep-alive comments do not count)")
    p.add_argument("--max-time", type=float, default=900.0, metavar="S",
                   help="longest whole reply, however steadily the server sends (default 900)")
    p.add_argument("--json", action="store_true", help="print the reply as one JSON object")
    p.add_argument("--save", action="store_true", help="keep this chat with the TUI's kept chats (SQLite under "
                   "$XDG_DATA_HOME/dgx-console; the chat pane's Ctrl+S lists them)")
    p.add_argument("--export", metavar="PATH", help="also write the chat, reasoning and tool calls included, to "
                   "PATH: Markdown for .md/.markdown, JSON for .json (checked before sending)")
    p.add_argument("--force", action="store_true", help="with --export: replace PATH if it exists")
    p.set_defaults(func=run)


def _resolve(args: argparse.Namespace) -> tuple[str, str | None, str | None]:
    """URL, API key and model hint from the arguments, else from the config."""
    check_count("--max-tokens", args.max_tokens, 1, 10_000_000)
    if args.temperature is not None and not 0.0 <= args.temperature <= 2.0:
        raise UsageError("--temperature must be between 0 and 2")
    check_seconds("--timeout", args.timeout)
    check_seconds("--max-time", args.max_time)
    check_api_key_arg(args.api_key)
    if not args.message and not args.tool_test:
        raise UsageError("--message TEXT is required (or --tool-test)")
    url, key, model = args.url, args.api_key, args.model
    if not url:
        from console.config import load_config

        cfg = load_config(args.config)
        url = cfg.api_url()
        key = key or cfg.api_key()
        model = model or cfg.profile.served_model_name or None
    else:
        check_url_arg(url)
    return url, key, model



def _check_export(args: argparse.Namespace) -> None:
    """``--export``: a known suffix and a writable place, before the model is asked anything."""
    if not args.export:
        return
    from console.safe_files import FileProblem, prepare_target
    from console.serving.chat_export import export_format

    try:
        export_format(args.export)
        prepare_target(args.export, args.force)
    except ValueError as exc:
        raise UsageError(one_line(str(exc), 300)) from None
    except FileProblem as exc:
        raise UsageError(f"--export {one_line(args.export, 200)}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    _check_export(args)
    url, key, model = _resolve(args)
    return asyncio.run(_chat(args, url, key, model))


def _keep(args: argparse.Namespace, url: str, model: str | None, user: str, result: ChatResult) -> int:
    """``--save`` and ``--export``: the one-turn session kept and/or written; 0, or 1 when it fails."""
    if not args.save and not args.export:
        return 0
    import time

    from console.safe_files import FileProblem
    from console.serving.chat_export import write_export
    from console.serving.chat_store import ChatStore, SavedSession, SavedTurn, SessionSummary, new_session_id

    now = time.time()
    turn = SavedTurn(user, result, bool(args.tool_test), now, model)
    sid = new_session_id()
    try:
        if args.save:
            store = ChatStore()
            store.add_turn(sid, url, turn)
            saved = store.load(sid)
            print(f"kept as chat {sid[:8]} in {store.path}", file=sys.stderr)
        else:
            from console.serving.chat_store import title_of

            saved = SavedSession(SessionSummary(sid, title_of(user), url, model, now, now, 1), [turn])
        if args.export and saved is not None:
            path = write_export(saved, args.export, force=args.force)
            print(f"exported to {path}", file=sys.stderr)
    except (OSError, FileProblem, ValueError) as exc:
        print(f"dgx-console: chat: cannot keep the chat: {one_line(str(exc), 300)}", file=sys.stderr)
        return 1
    return 0


async def _chat(args: argparse.Namespace, url: str, key: str | None, model_hint: str | None) -> int:
    tty = sys.stderr.isatty() and not args.json and not os.environ.get("NO_COLOR")  # where reasoning goes
    async with ApiClient(url, api_key=key, timeout=min(10.0, args.timeout), stream_timeout=args.timeout,
                         total_timeout=args.max_time) as client:
        model = args.model
        if not model:
            try:
                models = await client.models()
            except ApiError as exc:
                return _fail(args, exc)
            ids = [m["id"] for m in models]
            model = model_hint if model_hint in ids else (ids[0] if ids else model_hint)
            if not model:
                return _fail(args, ApiError("http", f"{url}/v1/models lists no model; pass --model"))
        message = args.message or SMOKE_TOOL_PROMPT
        req = ChatRequest(messages=({"role": "user", "content": message},), model=model,
                          max_tokens=args.max_tokens, temperature=args.temperature, effort=args.effort,
                          no_think=args.no_think, tools=(SMOKE_TOOL,) if args.tool_test else ())
        printer = None if args.json else _Printer(tty)
        result = await client.chat(req, on_event=printer.on_event if printer else None)
    if printer:
        printer.done()
    user = ("[tool test] " if args.tool_test else "") + message
    kept = _keep(args, url, model, user, result)
    if result.error is not None:
        return _fail(args, result.error, result)
    if args.json:
        print(json_out.dumps(result.to_json(), indent=2))
    else:
        _summary(result)
    return kept


class _Printer:
    """Writes deltas as they arrive: content on stdout, reasoning on stderr (dimmed on a terminal,
    labelled otherwise), each part ending its line when the other begins."""

    def __init__(self, tty: bool):
        self.tty = tty  # stderr is a terminal: reasoning dimmed, not labelled
        self.mode: str | None = None

    def _end(self) -> None:
        if self.mode == "reasoning":
            sys.stderr.write((RESET if self.tty else "") + "\n")
            sys.stderr.flush()
        elif self.mode == "content":
            sys.stdout.write("\n")
            sys.stdout.flush()

    def on_event(self, ev: ChatEvent) -> None:
        if ev.kind not in ("reasoning", "content"):
            return
        out = sys.stderr if ev.kind == "reasoning" else sys.stdout
        if ev.kind != self.mode:
            self._end()
            if ev.kind == "reasoning":
                out.write(DIM if self.tty else "[reasoning] ")
            self.mode = ev.kind
        out.write(clean(ev.text))  # model output: no escape sequence reaches the terminal
        out.flush()

    def done(self) -> None:
        self._end()
        self.mode = None


def _summary(r: ChatResult) -> None:
    for call in r.tool_calls:
        fn = call.get("function", {})
        print(f"tool call: {one_line(str(fn.get('name')), 200)}({one_line(str(fn.get('arguments')), 4000)})")
    parts = [f"finish: {one_line(str(r.finish_reason), 40)}"]
    if r.ttft_s is not None:
        parts.append(f"TTFT {r.ttft_s * 1000:.0f} ms")
    if r.output_tokens is not None:
        parts.append(f"{r.output_tokens} output tokens (reasoning included)")
    if r.tokens_per_s is not None:
        parts.append(f"{r.tokens_per_s:.1f} tok/s")
    print("; ".join(parts), file=sys.stderr)
    for w in r.warnings:
        print(f"warning: {one_line(w, 500)}", file=sys.stderr)


def _fail(args: argparse.Namespace, exc: ApiError, partial: ChatResult | None = None) -> int:
    if args.json:
        out = (partial or ChatResult(error=exc)).to_json()
        out["error"] = {"kind": exc.kind, "message": str(exc)}
        print(json_out.dumps(out, indent=2))
    print(f"dgx-console: chat: {exc}", file=sys.stderr)
    return 1
