"""A kept chat as a file a person can read or a program can load: Markdown or JSON, by suffix.

Both carry every turn with its reasoning and tool calls. JSON keeps the text as it came (JSON
escapes it). Markdown is for reading: the model's words are outside text, so they are sanitized
(``console/sanitize.py``: no escape sequence reaches a terminal that ``cat``s the file) and every
piece of them sits in a fenced block whose fence is longer than any run of backticks inside it. A
reply that writes ``</details>``, ``<script>`` or an unclosed ````` cannot close the reasoning's
``<details>`` fold, run HTML or swallow the turns after it: inside a fence nothing is markup.
"""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path
from typing import Any, Literal

from console.safe_files import expand, write_replacing
from console.sanitize import clean, one_line
from console.serving.chat_store import SavedSession, result_record

ExportFormat = Literal["markdown", "json"]
SUFFIXES: dict[str, ExportFormat] = {".md": "markdown", ".markdown": "markdown", ".json": "json"}
FORMAT_VERSION = "dgx-console-chat/1"


def export_format(path: str | Path) -> ExportFormat:
    """The format a path's suffix names; ValueError (one line) for any other suffix."""
    suffix = Path(str(path)).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{one_line(str(path), 200)}: the export format follows the suffix: "
                         ".md or .markdown (Markdown), .json (JSON)")
    return SUFFIXES[suffix]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def to_json(s: SavedSession) -> dict[str, Any]:
    h = s.summary
    return {
        "format": FORMAT_VERSION,
        "id": h.id,
        "title": h.title,
        "url": h.url,
        "model": h.model,
        "created_at": _when(h.created_at),
        "updated_at": _when(h.updated_at),
        "turns": [{"user": t.user, "tool_test": t.tools, "at": _when(t.at) if t.at else None, "model": t.model,
                   "reply": result_record(t.result)} for t in s.turns],
        "messages": s.history(),
    }


_TICKS = re.compile(r"`+")


def fenced(text: str, info: str = "") -> str:
    """``text`` (sanitized) in a backtick fence longer than any backtick run inside it."""
    body = clean(text)
    longest = max((len(m) for m in _TICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def inline(text: str, limit: int = 200) -> str:
    """One line of outside text for a heading or a list item: HTML-escaped, in a code span."""
    body = html.escape(one_line(text, limit), quote=False)
    longest = max((len(m) for m in _TICKS.findall(body)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def _stats(r) -> str:
    parts = []
    if r.ttft_s is not None:
        parts.append(f"TTFT {r.ttft_s * 1000:,.0f} ms")
    if r.output_tokens is not None:
        parts.append(f"{r.output_tokens:,} output tokens (reasoning incl.)")
    if r.tokens_per_s is not None:
        parts.append(f"{r.tokens_per_s:,.1f} tok/s")
    parts.append(f"finish: {html.escape(one_line(str(r.finish_reason or '-'), 40), quote=False)}")
    if r.cancelled:
        parts.append("cancelled")
    return " · ".join(parts)


def to_markdown(s: SavedSession) -> str:
    h = s.summary
    out = [f"# Chat: {inline(h.title, 120)}", "",
           f"- model: {inline(h.model or '?')}", f"- API: {inline(h.url)}",
           f"- started: {_when(h.created_at)}, last turn: {_when(h.updated_at)}", f"- turns: {len(s.turns)}", ""]
    for i, t in enumerate(s.turns, 1):
        r = t.result
        out += [f"## {i}. {'Tool test' if t.tools else 'You'}", "", fenced(t.user, "text"), "", "### Reply", ""]
        if r.reasoning:
            out += ["<details>", f"<summary>Reasoning ({len(r.reasoning):,} chars)</summary>", "",
                    fenced(r.reasoning, "text"), "", "</details>", ""]
        if r.content:
            out += [fenced(r.content, "markdown"), ""]
        if r.tool_calls:
            out += ["Tool calls:", "", fenced(json.dumps(r.tool_calls, indent=2, ensure_ascii=False), "json"), ""]
        if r.error is not None:
            out += [f"Error ({html.escape(one_line(r.error.kind, 40), quote=False)}):", "",
                    fenced(str(r.error), "text"), ""]
        for w in r.warnings:
            out += [f"> warning: {html.escape(one_line(w, 500), quote=False)}", ""]
        out += [f"_{_stats(r)}_", ""]
    return "\n".join(out)


def render(s: SavedSession, fmt: ExportFormat) -> bytes:
    if fmt == "json":
        return (json.dumps(to_json(s), indent=2, ensure_ascii=False) + "\n").encode()
    return to_markdown(s).encode()


def write_export(s: SavedSession, path: str | Path, force: bool = True) -> Path:
    """Write the session at ``path`` in the format its suffix names, with the safe writer (never
    through a symlink; without ``force`` never over an existing file). ValueError for a bad
    suffix; FileProblem or OSError when it cannot be written."""
    p = expand(path)
    data = render(s, export_format(p))
    write_replacing(p, lambda fh: fh.write(data), force=force, mode=0o600)
    return p


def export_dir() -> Path:
    from console.config.paths import xdg_data_dir

    return xdg_data_dir() / "chat-exports"


def export_both(s: SavedSession) -> tuple[Path, Path]:
    """The TUI's export: ``<data dir>/chat-exports/<time>-<id>.md`` and ``.json``."""
    d = export_dir()
    d.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S", time.gmtime(s.summary.updated_at)) + "-" + s.summary.id[:8]
    return write_export(s, d / f"{stem}.md"), write_export(s, d / f"{stem}.json")


def bundle_members(mask_obj, mask_text) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The support bundle's part: the last kept chat as ``chat/last.json`` and ``chat/last.md``,
    every string masked (``mask_obj`` over the object before encoding, so no JSON escape hides a
    secret; ``mask_text`` over the Markdown), and its manifest entry. Never raises."""
    from console.serving.chat_store import ChatStore

    try:
        saved = ChatStore().last()
    except Exception as exc:  # noqa: BLE001 - the bundle never dies for its chat part
        return {}, {"included": False, "error": mask_text(f"{exc.__class__.__name__}: {exc}")}
    if saved is None:
        return {}, {"included": False, "error": None}
    data = mask_obj(to_json(saved))
    members = {"chat/last.json": (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(),
               "chat/last.md": mask_text(to_markdown(saved)).encode()}
    return members, {"included": True, "id": saved.summary.id, "turns": len(saved.turns), "error": None}
