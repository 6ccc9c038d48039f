"""The hang evidence screen (``h`` on the dashboard, ``h`` in the workbench): the verdict line over
every station's evidence taken at the same moment, then the ranks side by side -- where each one's
engine waits (py-spy --native), its last collective (flight recorder), its RAS operation count, GPU
util/power/memory, RDMA counters, kernel log, and (worded by ``evidence_words``, as ``hang-report``
prints them) its engine threads in the kernel, whether RAS found it behind, and on the head the
requests in flight (the app's own poll of the API, passed in: the screen reads nothing). The capture is a worker of this screen
(``console/doctor/evidence.capture``, the same service as ``hang-report``); ``s`` saves the archive."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static
from textual.worker import Worker

from console.config import Config
from console.doctor.evidence import HangEvidence, StationEvidence, capture
from console.doctor.evidence_words import StationRow, station_rows
from console.sanitize import one_line
from console.ui.widgets.fitted_footer import FittedFooter
from console.vocabulary import ContainerState

CAPTURE_INTERVAL_S = 3.0
CAPTURE_DEADLINE_S = 60.0


def station_lines(ev: StationEvidence, ras_ops: dict[str, int], first: list[StationRow] | None = None
                  ) -> list[tuple[str, str]]:
    """(label, text) rows of one station's column; outside text is one plain line each. ``first``
    (threads, straggler, requests) right under the container: what a hang is read from first, above
    the fold at 80x24."""
    rows: list[tuple[str, str]] = []
    c = ev.container
    if ev.error:
        rows.append(("station", f"not read: {ev.error}"))
    rows.append(("container", f"{c.get('name', '?')} {c.get('state', '?')}"
                 + (f" (exit {c.get('exit_code')})" if c.get("state") not in (None, ContainerState.RUNNING) else "")))
    rows.extend(first or ())
    if ev.name in ras_ops:
        rows.append(("RAS", f"op {ras_ops[ev.name]}"))
    elif ev.ras.get("note"):
        rows.append(("RAS", ev.ras["note"]))
    py = ev.pyspy
    if py.get("processes"):
        for p in py["processes"]:
            where = re.sub(r"[\w.-]*/([\w.-]+\.py)", r"\1", p["wait"]["where"])  # the file's name is enough here
            rows.append((f"pid {p['pid']}", f"{p['wait']['kind']}: {where}"))
    if py.get("note"):
        rows.append(("py-spy", py["note"]))
    frd = ev.flight_recorder
    for d in frd.get("dumps", []):
        last = d.get("last") or {}
        rows.append((f"FR rank {d.get('rank')}", f"{last.get('op')} SeqNum {last.get('seq')} {last.get('state')}"))
    if frd.get("note"):
        rows.append(("flight rec.", frd["note"]))
    samples = ev.gpus.get("samples") or []
    for g in samples[-1] if samples else []:
        power = f"{g['power_w']:.0f} W" if g.get("power_w") is not None else "n/a W"
        mem = f", {g['memory_used_mib']:,} MiB" if g.get("memory_used_mib") is not None else ""
        rows.append((f"GPU {g['index']}", f"{g.get('util_pct')} % at {power}{mem}"))
    cnt = ev.counters
    if cnt.get("status") == "ok":
        rising = ", ".join(f"{k} +{v}" for k, v in sorted(cnt["retries_rising"].items()))
        rows.append(("counters", "frozen (no traffic, no retries)" if cnt["frozen"] else
                     (f"retries rising: {rising}" if rising else
                      f"{cnt['rdma_bytes_moved'] * 8 / cnt['interval_s'] / 1e9:.1f} Gb/s RDMA")))
    elif cnt.get("note"):
        rows.append(("counters", cnt["note"]))
    events = ev.kernel.get("events") or []
    errs = [e for e in events if e["severity"] == "error"]
    rows.append(("kernel", errs[0]["text"] if errs else ev.kernel.get("note") or f"clean ({len(events)} events)"))
    if ev.logs:
        rows.append(("last log", ev.logs[-1]))
    return rows


def column(ev: StationEvidence, ras_ops: dict[str, int], width: int, first: list[StationRow] | None = None) -> Text:
    out = Text(ev.name + "\n", style="bold")
    wide = {label for label, _ in first or ()}  # the hang's first facts get a fourth line before a clip
    for label, value in station_lines(ev, ras_ops, first):
        out.append(f"{label:<11} ", style="dim")
        out.append(one_line(value, max(20, width * (4 if label in wide else 3))) + "\n")
    return out


def first_rows(ev: HangEvidence, name: str, head: bool, requests: dict | None, now: float) -> list[StationRow]:
    """The threads, straggler and (head) requests rows of station ``name``, each read's age taken at
    ``now`` (stale past the interval + 2 s, as the verdict line's stale rule)."""
    st = ev.stations[name]
    tasks_at = st.read_at.get("tasks")
    ras_at = ev.stations[r].read_at.get("ras") if (r := ev.stragglers.get("read_on")) in ev.stations else None
    return station_rows(st.tasks, ev.stragglers, name, serves_api=head, requests=requests,
                        tasks_age_s=None if tasks_at is None else now - tasks_at,
                        stragglers_age_s=None if ras_at is None else now - ras_at,
                        stale_after_s=ev.interval_s + 2.0)


def ras_ops_by_station(ev: HangEvidence, config: Config) -> dict[str, int]:
    """Station -> the RAS operation count (AllReduce) of its rank, where RAS gave one."""
    from console.doctor.verdict import rank_names

    for st in ev.stations.values():
        if st.ras_reports:
            rep = st.ras_reports[-1]
            names = rank_names(config, rep)
            return {names.get(r, f"rank {r}"): x.counts.get("AllReduce", x.ops or 0)
                    for r, x in rep.ranks().items() if x.counts}
    return {}


class HangEvidenceScreen(Screen):
    TITLE = "Hang evidence"
    SUB_TITLE = "every rank at the same moment"
    DEFAULT_CSS = """
    HangEvidenceScreen #hang-verdict { height: auto; padding: 0 1; border-bottom: solid $primary; }
    HangEvidenceScreen #hang-findings { height: auto; padding: 0 1; border-top: solid $panel; }
    HangEvidenceScreen #hang-columns { height: auto; }
    HangEvidenceScreen #hang-ranks { height: 1fr; }
    HangEvidenceScreen .hang-rank { width: 1fr; height: auto; padding: 0 1; border-left: solid $panel; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="hang-back"),
        Binding("r", "recapture", "Capture again", id="hang-recapture", tooltip="Take the evidence again"),
        Binding("s", "save", "Save archive", id="hang-save",
                tooltip="Write the archive (as dgx-console hang-report) to the current directory"),
    ]

    def __init__(self, config: Config, evidence: HangEvidence | None = None, autostart: bool = True,
                 interval_s: float = CAPTURE_INTERVAL_S, requests: Callable[[], dict] | None = None) -> None:
        """``requests``: the head engine's requests in flight now (``incidents.capture.requests_in_flight``
        over the app's own poll); None: the head's row says "not read"."""
        super().__init__()
        self.config, self.evidence, self.autostart, self.interval_s = config, evidence, autostart, interval_s
        self.requests = requests
        self.progress_text = ""
        self.failure: str | None = None
        self._job: Worker | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="hang-verdict")
        with VerticalScroll(id="hang-ranks"):
            with Horizontal(id="hang-columns"):
                for st in sorted(self.config.stations, key=lambda s: s.rank):
                    yield Static("", id=f"hang-rank-{st.rank}", classes="hang-rank")
            yield Static("", id="hang-findings")
        yield FittedFooter()

    def on_mount(self) -> None:
        self._show()
        self.set_interval(1.0, self._age)  # every read's age on screen: older than interval + 2 s it says stale
        if self.evidence is None and self.autostart:
            self.action_recapture()

    @property
    def job(self) -> Worker | None:
        return self._job

    def action_recapture(self) -> None:
        if self._job is not None and not self._job.is_finished:
            return
        self.progress_text = "reading every station at once..."
        self._show()
        self._job = self.run_worker(self._capture(), name="hang evidence", exclusive=True, exit_on_error=False)

    async def _capture(self) -> None:
        def progress(text: str) -> None:
            self.progress_text = text
            self._show()

        try:
            ev = await capture(self.config, interval_s=self.interval_s, deadline_s=CAPTURE_DEADLINE_S,
                               progress=progress)
        except Exception as exc:  # noqa: BLE001 - a capture that fails is a line on this screen, never the app's end
            self.failure = one_line(f"{type(exc).__name__}: {exc}", 300)
            self.progress_text = ""
            self._show()
            return
        self.failure = None
        self.evidence = ev
        self.progress_text = ""
        self._show()

    def _age(self) -> None:
        if self.evidence is not None:  # the rows' ages count on (a frozen "3 s old" would be a lie)
            self._show()

    def action_save(self) -> None:
        if self.evidence is None or not self.evidence.captured:
            self.notify("Nothing captured yet.", severity="warning")
            return
        from pathlib import Path

        from console.commands.bundle import write_archive
        from console.commands.hang_report import members
        from console.config import masker
        from console.diagnosis import redact
        from console.safe_files import FileProblem

        mask = masker(self.config)
        path = Path.cwd() / time.strftime("hang-report-%Y%m%d-%H%M%S.tar.gz")
        try:
            write_archive(path, members(self.evidence, lambda t: redact(mask(t))))
        except (FileProblem, OSError) as exc:
            self.notify(one_line(f"not written: {exc}", 300), severity="error", markup=False)
            return
        self.notify(one_line(f"wrote {path}", 400), timeout=6, markup=False)  # a directory may be called "[/]"

    def _show(self) -> None:
        """Redraw everything from the evidence held now: the verdict, the findings, every rank."""
        if not self.query("#hang-verdict"):
            return  # not composed yet
        ev = self.evidence
        self.query_one("#hang-verdict", Static).update(self._head_text(ev))
        self.query_one("#hang-findings", Static).update(findings_text(ev))
        self._show_columns(ev)

    def _head_text(self, ev: HangEvidence | None) -> Text:
        """A failed capture wins over old evidence (unless a new capture runs), then the capture's
        progress while nothing is held, else the verdict."""
        if self.failure and not self.progress_text:
            return failure_text(self.failure)
        if ev is None:
            return capturing_text(self.progress_text)
        return verdict_text(ev, self.progress_text, time.time())

    def _show_columns(self, ev: HangEvidence | None) -> None:
        """Every station's column; one the capture has not (yet) read says it waits."""
        width = max(20, (self.size.width or 80) // max(1, len(self.config.stations)) - 3)
        ops = ras_ops_by_station(ev, self.config) if ev is not None else {}
        now = time.time()
        requests = self.requests() if self.requests is not None and ev is not None else None
        for st in self.config.stations:
            box = self.query_one(f"#hang-rank-{st.rank}", Static)
            if ev is None or st.name not in ev.stations:
                box.update(Text(st.name + "\n", style="bold") + Text("waiting for the capture", style="dim"))
            else:
                box.update(column(ev.stations[st.name], ops, width,
                                  first_rows(ev, st.name, st.name == self.config.head.name, requests, now)))


def failure_text(failure: str) -> Text:
    head = Text()
    head.append("capture failed: ", style="bold red")
    head.append(failure)
    head.append("\nr captures again", style="dim")
    return head


def capturing_text(progress: str) -> Text:
    head = Text()
    head.append("capturing: ", style="bold cyan")
    head.append(progress or "waiting to start")
    return head


def verdict_style(stale: bool, captured: bool) -> str:
    """Stale evidence is never shown in the colour of a present hang."""
    if stale:
        return "yellow"
    return "bold red" if captured else "bold yellow"


def verdict_text(ev: HangEvidence, progress: str, now: float) -> Text:
    """The verdict line, said stale first when a read is older than the interval + 2 s at ``now``."""
    head = Text()
    old = ev.stale_reads(now)
    if old:
        head.append(f"stale ({max(old.values()):.0f} s old, {len(old)} reads past {ev.interval_s + 2:g} s): ",
                    style="bold yellow")
    head.append("verdict: ", style="bold")
    head.append(one_line(ev.verdict, 600), style=verdict_style(bool(old), bool(ev.captured)))
    if ev.next_step:
        head.append("\nnext: ", style="bold")
        head.append(one_line(ev.next_step, 600))
    head.append(capture_line(ev, progress, bool(old)), style="dim")
    return head


def capture_line(ev: HangEvidence, progress: str, stale: bool) -> str:
    """A new capture under way is said over when the shown one was taken."""
    if progress:
        return f"\n(capturing again: {one_line(progress, 120)})"
    return (f"\ncaptured {time.strftime('%H:%M:%S', time.localtime(ev.captured_at))} in "
            f"{ev.capture_s:.1f} s from {len(ev.stations)} stations; r captures again, s saves "
            "the archive" + ("; what it says is not the stations' present" if stale else ""))


def findings_text(ev: HangEvidence | None) -> Text:
    """What each piece of evidence says, one line each, with the stations it could not read."""
    if ev is None:
        return Text()
    findings = Text("what each piece of evidence says\n", style="dim")
    for k, v in ev.findings.items():
        findings.append(f"{k:<16}", style="bold")
        findings.append(one_line(v, 400))
        cov = ev.covers.get(k)
        if cov is not None and cov.not_read:
            findings.append(f"  (not read on {', '.join(cov.not_read)})", style="dim")
        findings.append("\n")
    return findings
