"""The processes on a station's GPUs, as nvitop lists them: GPU, pid, process name and the GPU
memory each holds, biggest first (from ``nvidia-smi --query-compute-apps``, streamed by the
station's monitor). A leftover process from a failed container is what this finds: memory in
use with no engine running.

Rendering only: the pane hands it the last compute-apps sample and the GPU readings (for the
GPU index of each process's UUID and its memory total).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.sanitize import one_line


def render_processes(apps: Sequence[ComputeApp] | None, gpus: Sequence[GpuReading],
                     host_total_mib: float | None = None) -> Table | Text:
    """The table (or what is known when there is none). ``host_total_mib``: unified memory (GB10),
    where a process's share is of the host's memory."""
    if apps is None:
        return Text("processes: not read yet", style="dim")
    if not apps:
        return Text("processes: no compute process on this station's GPUs", style="dim")
    by_uuid = {g.uuid: g for g in gpus}
    t = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="bold")
    t.add_column("GPU", no_wrap=True, width=3)
    t.add_column("PID", justify="right", no_wrap=True, width=8)
    t.add_column("process", ratio=1, no_wrap=True, overflow="ellipsis")
    t.add_column("GPU mem", justify="right", no_wrap=True, width=10)
    t.add_column("share", justify="right", no_wrap=True, width=6)
    for a in sorted(apps, key=lambda a: -(a.used_memory_mib or 0)):
        g = by_uuid.get(a.gpu_uuid)
        total = host_total_mib if g is not None and g.memory_total_mib is None else (g.memory_total_mib if g else None)
        mem = "n/a" if a.used_memory_mib is None else f"{a.used_memory_mib / 1024:.1f} GiB"
        share = f"{100 * a.used_memory_mib / total:.0f}%" if a.used_memory_mib is not None and total else "—"
        t.add_row(str(g.index) if g else "?", str(a.pid), Text(one_line(a.process_name, 200)), mem, share)
    return t


class ProcessList(Static):
    """Hidden until the pane's ``p`` key shows it."""

    DEFAULT_CSS = """
    ProcessList { height: auto; max-height: 10; display: none; border-top: dashed $primary 50%; }
    ProcessList.-shown { display: block; }
    """

    def show(self, apps: Sequence[ComputeApp] | None, gpus: Sequence[GpuReading],
             host_total_mib: float | None = None) -> None:
        self.update(render_processes(apps, gpus, host_total_mib))
