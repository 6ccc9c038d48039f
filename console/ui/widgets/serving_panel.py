"""Serving panel: API health, model, load, token rate, latency p50s, cache and MTP figures.

No I/O: ``ServingMonitor`` (console/serving/metrics.py) polls the API and the app hands each
snapshot to ``show()`` (post ``ServingUpdate`` from the monitor's callback). When the API stops
answering the last values stay, dimmed, with their age, so the operator sees what they were and
how old they are; a dash means unknown, never zero. Everything the server said (model id,
version, error bodies) is outside text: sanitized, one line, never markup.
"""

from __future__ import annotations

import time

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from console.sanitize import one_line
from console.serving.metrics import ServingSnapshot

STALE_AFTER_S = 10.0


class ServingUpdate(Message):
    """A new snapshot; a newer one supersedes it in the queue."""

    def __init__(self, snapshot: ServingSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ServingUpdate)


def _num(x: float | None, fmt: str, unit: str = "") -> str:
    return "—" if x is None else format(x, fmt) + unit


def _ms(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x * 1000:,.0f} ms" if x >= 0.1 else f"{x * 1000:.1f} ms"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f} %"


def _age(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def render_snapshot(snap: ServingSnapshot | None, now: float | None = None) -> Group:
    """The panel's content as a Rich table (pure: a snapshot and a clock in, a renderable out)."""
    now = time.time() if now is None else now
    t = Table.grid(padding=(0, 1), expand=True)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(no_wrap=True)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(no_wrap=True)
    if snap is None:
        t.add_row("API", Text("waiting for the first poll…", style="dim"), "", "")
        return Group(t)
    stale = snap.is_stale(now, STALE_AFTER_S)
    health = {
        "ok": Text("● healthy", style="green"),
        "unhealthy": Text("● unhealthy (503)", style="bold red"),
        "unreachable": Text("● not answering", style="bold red"),
        "unauthorized": Text("● API key refused", style="bold yellow"),
    }.get(snap.status, Text("● unknown", style="dim"))
    engine = f"{snap.engine or '?'} {snap.version or ''}".strip()
    t.add_row("API", health, "Model", Text(one_line(f"{snap.model or '—'} ({engine})", 200), overflow="ellipsis"))
    val = "dim" if stale else ""
    t.add_row("Reqs", Text(f"{_num(snap.running, '.0f')} run · {_num(snap.waiting, '.0f')} wait", style=val),
              "KV", Text(_pct(snap.kv_usage), style=val))
    t.add_row("Gen", Text(_num(snap.gen_tok_s, ",.1f", " tok/s"), style=val),
              "Prefix", Text(_pct(snap.prefix_hit_rate) + (" hit" if snap.prefix_hit_rate is not None else ""),
                             style=val))
    t.add_row("TTFT", Text(_ms(snap.ttft_p50_s) + (" p50" if snap.ttft_p50_s is not None else ""), style=val),
              "ITL", Text(_ms(snap.itl_p50_s) + (" p50" if snap.itl_p50_s is not None else ""), style=val))
    if snap.spec_accept_rate is not None or snap.spec_mean_len is not None:
        t.add_row("MTP", Text(_pct(snap.spec_accept_rate) + " accepted", style=val),
                  "Len", Text(_num(snap.spec_mean_len, ".2f") + " tok/step", style=val))
    age = snap.age_s(now)
    error = one_line(snap.error, 300) if snap.error else None
    if age is None:
        foot = Text(f"no metrics yet{': ' + error if error else ''}", style="yellow")
    elif stale:
        foot = Text(f"stale: last good poll {_age(age)} ago" + (f" — {error}" if error else ""),
                    style="bold yellow")
    else:
        foot = Text(f"updated {_age(age)} ago", style="dim")
        if snap.note:
            foot.append(f" — {one_line(snap.note, 300)}", style="yellow")
    return Group(t, foot)


class ServingPanel(Static):
    """Shows the latest ServingSnapshot; a 1 s timer only re-renders the age (no I/O)."""

    DEFAULT_CSS = """
    ServingPanel { height: auto; border: round $primary; padding: 0 1; }
    ServingPanel.-stale { border: round $warning; }
    ServingPanel.-down { border: round $error; }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.snapshot: ServingSnapshot | None = None
        self.border_title = "Serving"

    def on_mount(self) -> None:
        self.set_interval(1.0, self._redraw)
        self._redraw()

    def show(self, snapshot: ServingSnapshot) -> None:
        self.snapshot = snapshot
        self._redraw()

    def _redraw(self) -> None:
        snap = self.snapshot
        now = time.time()
        self.set_class(snap is not None and snap.is_stale(now, STALE_AFTER_S) and snap.updated_at is not None,
                       "-stale")
        self.set_class(snap is not None and snap.status in ("unhealthy", "unreachable"), "-down")
        if snap is not None and snap.url:
            self.border_subtitle = Text(one_line(snap.url, 120))  # Text: a URL is never markup
        self.update(render_snapshot(snap, now))
