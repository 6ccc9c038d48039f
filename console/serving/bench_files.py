"""A sweep as a picture and a page to attach to a ticket: ``PATH.svg`` (total tok/s and p99 TTFT per
concurrency, one line per prompt depth; SVG written by hand, no plotting library) and ``PATH.html``
(self-contained: the settings, the SLO answer, the table with the intervals, the warnings and the
plot inline). Every outside string (the URL, the model id, the server's error words, warnings) is
HTML-escaped, so a model id ``<script>`` is text. Pure: strings in, strings out.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 360, 70, 70, 40, 50
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


def _scale(values: Sequence[float]) -> float:
    top = max(values, default=0.0)
    return top * 1.1 if top > 0 else 1.0


PLOT_H = H - PAD_T - PAD_B
SERIES = (("total_tok_s", ""), ("ttft_ms_p99", ' stroke-dasharray="6 4"'))  # solid on the left axis, dashed on the right


def to_svg(levels: Sequence[Any], title: str) -> str:
    """Total tok/s (solid, left axis) and p99 TTFT in ms (dashed, right axis) against concurrency."""
    depths = sorted({lv.depth for lv in levels})
    x_of = _x_positions(sorted({lv.concurrency for lv in levels}) or [1])
    tops = (_scale([lv.total_tok_s or 0.0 for lv in levels]), _scale([lv.ttft_ms_p99 or 0.0 for lv in levels]))
    out = _frame(title)
    out += [f'<text x="{x:.1f}" y="{H - PAD_B + 16}" text-anchor="middle">C{c}</text>' for c, x in x_of.items()]
    out += _axis_labels(*tops)
    for i, d in enumerate(depths):
        at = sorted((lv for lv in levels if lv.depth == d), key=lambda lv: lv.concurrency)
        out += _depth_lines(i, d, at, x_of, tops, several=len(depths) > 1)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _x_positions(concs: list[Any]) -> dict[Any, float]:
    """Concurrencies spread evenly across the plot; a single one sits in the middle."""
    if len(concs) > 1:
        return {c: PAD_L + (W - PAD_L - PAD_R) * (i / max(1, len(concs) - 1)) for i, c in enumerate(concs)}
    return {c: PAD_L + (W - PAD_L - PAD_R) * 0.5 for c in concs}


def _y(v: float, top: float) -> float:
    return PAD_T + PLOT_H * (1 - v / top)


def _frame(title: str) -> list[str]:
    """The canvas, the title and the three axis lines (x, left, right)."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
            'font-family="sans-serif" font-size="12">',
            f'<rect width="{W}" height="{H}" fill="white"/>',
            f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{_e(title)}</text>',
            f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" stroke="#333"/>',
            f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" stroke="#333"/>',
            f'<line x1="{W - PAD_R}" y1="{PAD_T}" x2="{W - PAD_R}" y2="{H - PAD_B}" stroke="#333"/>']


def _axis_labels(tok_top: float, ttft_top: float) -> list[str]:
    """Both y axes' ticks (0, half, top) and the three axes' names."""
    out = []
    for frac in (0.0, 0.5, 1.0):
        yy = PAD_T + PLOT_H * (1 - frac)
        out.append(f'<text x="{PAD_L - 6}" y="{yy + 4:.1f}" text-anchor="end">{tok_top * frac:,.0f}</text>')
        out.append(f'<text x="{W - PAD_R + 6}" y="{yy + 4:.1f}">{ttft_top * frac:,.0f}</text>')
    out.append(f'<text x="16" y="{PAD_T + PLOT_H / 2}" transform="rotate(-90 16 {PAD_T + PLOT_H / 2})" '
               'text-anchor="middle">total tok/s (solid)</text>')
    out.append(f'<text x="{W - 14}" y="{PAD_T + PLOT_H / 2}" transform="rotate(90 {W - 14} {PAD_T + PLOT_H / 2})" '
               'text-anchor="middle">p99 TTFT ms (dashed)</text>')
    out.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">concurrency (requests in flight)</text>')
    return out


def _depth_lines(i: int, d: Any, at: list[Any], x_of: dict[Any, float], tops: tuple[float, float],
                 several: bool) -> list[str]:
    """One prompt depth's two series in its colour, and its name unless depth 0 is the only one."""
    colour = COLOURS[i % len(COLOURS)]
    out = []
    for (attr, dash), top in zip(SERIES, tops, strict=True):
        pts = [(x_of[lv.concurrency], _y(getattr(lv, attr), top)) for lv in at if getattr(lv, attr) is not None]
        out += _series(pts, colour, dash)
    if several or d:
        out.append(f'<text x="{PAD_L + 8}" y="{PAD_T + 14 + 14 * i}" fill="{colour}">depth {d:,}</text>')
    return out


def _series(pts: list[tuple[float, float]], colour: str, dash: str) -> list[str]:
    """A line through the points (two at least) and a dot on each."""
    out = []
    if len(pts) > 1:
        path = " ".join(f"{x:.1f},{yy:.1f}" for x, yy in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
    return out + [f'<circle cx="{x:.1f}" cy="{yy:.1f}" r="3" fill="{colour}"/>' for x, yy in pts]


_CI_COLS = (("TTFT ms", "ttft_ms", 0), ("ITL ms", "itl_ms", 2), ("latency s", "latency_s", 2))


def _cell_ci(lv: Any, name: str, q: int, nd: int) -> str:
    v = getattr(lv, f"{name}_p{q}")
    lo, hi = lv.ci95.get(f"{name}_p{q}", [None, None])
    if v is None:
        return "-"
    return f"{_fmt(v, nd)} <small>[{_fmt(lo, nd) if lo is not None else '?'}, {_fmt(hi, nd) if hi is not None else '?'}]</small>"


def to_html(report: Any, svg: str) -> str:
    """The whole report as one page (no outside file, no script)."""
    data = report.to_json()
    s = data["settings"]
    rows = []
    for lv in report.levels:
        cells = [f"{lv.depth:,}", _e(lv.label), _fmt(lv.total_tok_s), _fmt(lv.per_user_tok_s)]
        for _, name, nd in _CI_COLS:
            cells += [_cell_ci(lv, name, q, nd) for q in (50, 90, 99)]
        cells += ["-" if lv.goodput_pct is None else f"{lv.goodput_pct:.0f}%", f"{lv.errors}/{lv.requests}",
                  "-" if lv.spec_accept_length is None else f"{lv.spec_accept_length:.2f}"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ["depth", "level", "total tok/s", "per-user tok/s"]
    for label, _, _ in _CI_COLS:
        head += [f"{label} p{q}" for q in (50, 90, 99)]
    head += ["goodput", "errors", "spec accept len"]
    slo = data.get("slo")
    slo_html = ""
    if slo:
        slo_html = "<h2>Within the SLO</h2><ul>" + "".join(f"<li>{_e(a['line'])}</li>" for a in slo["answers"]) + "</ul>"
    notes = [n for lv in report.levels for n in lv.notes()] + list(report.warnings)
    notes += [f"C{lv.concurrency}: error: {e}" for lv in report.levels for e in lv.error_samples]
    settings = ", ".join(f"{_e(k)}={_e(v)}" for k, v in s.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dgx-console bench: {_e(report.model)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}small{{color:#666}}</style></head><body>
<h1>Benchmark: {_e(report.model)}</h1>
<p>API {_e(report.url)} · started {_e(data["started_at"])}{" · CANCELLED" if report.cancelled else ""}</p>
<p><small>settings: {settings}</small></p>
{slo_html}
<h2>Levels</h2>
<p><small>p50/p90/p99 with [95% interval]: {_e(s["ci"])}; ? = too few requests to bound that side.
ITL = (latency - TTFT) / (tokens - 1) (AIPerf's ITL, vLLM's TPOT).</small></p>
<table><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr>
{chr(10).join(rows)}
</table>
<h2>Plot</h2>
{svg}
<h2>Notes and warnings</h2><ul>{"".join(f"<li>{_e(n)}</li>" for n in notes) or "<li>none</li>"}</ul>
</body></html>
"""
