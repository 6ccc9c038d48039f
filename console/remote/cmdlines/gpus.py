"""The GPU command lines: ``nvidia-smi`` queries, one-shot (bounded) or one long-lived loop."""

from __future__ import annotations

from console.probes import gpu_health
from console.probes import nvidia_smi as smi
from console.remote.cmdlines.bounds import TOOL_LIMIT_S, bounded, ended_with_channel


def gpu_query(loop_ms: int | None = None, limit_s: float = TOOL_LIMIT_S) -> str:
    """One line per GPU; with ``loop_ms`` one long-lived process prints a round per interval."""
    cmd = f"nvidia-smi {smi.GPU_QUERY} {smi.CSV_FORMAT}"
    if loop_ms:
        return ended_with_channel(cmd + f" -lms {int(loop_ms)}")
    return bounded(cmd, limit_s)


def compute_apps_query(loop_ms: int | None = None) -> str:
    cmd = f"nvidia-smi {smi.APPS_QUERY} {smi.CSV_FORMAT}"
    if loop_ms:
        return ended_with_channel(cmd + f" -lms {int(loop_ms)}")
    return bounded(cmd)


GPU_LIST_QUERY = bounded("nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader")


def gpu_list() -> str:
    """index, uuid, name of every GPU: the launch picks the serving one(s) by UUID or name."""
    return GPU_LIST_QUERY


def gpu_index_names() -> str:
    return bounded("nvidia-smi --query-gpu=index,name --format=csv,noheader")


def gpu_query_with_activity(limit_s: float = TOOL_LIMIT_S) -> str:
    """The GPU query with the memory's utilization as one more column: the hang capture's GPU sample
    and the GPUs' activity (``activity.split_gpu_sample``) from one nvidia-smi, not two that would
    wait on each other's lock."""
    return bounded(f"nvidia-smi {smi.GPU_QUERY},utilization.memory {smi.CSV_FORMAT}", limit_s)


def gpu_health_query(loop_ms: int | None = None, prefix: str = "clocks_event_reasons",
                     limit_s: float = TOOL_LIMIT_S) -> str:
    """Per-GPU health (console/probes/gpu_health.py); ``prefix``: ``clocks_event_reasons`` (R535+) or
    older drivers' ``clocks_throttle_reasons``. With ``loop_ms`` one long-lived process."""
    cmd = f"nvidia-smi {gpu_health.query(prefix)} {smi.CSV_FORMAT}"
    if loop_ms:  # 2>&1: an unknown field's complaint must reach the reader (it switches the names)
        return ended_with_channel(cmd + f" -lms {int(loop_ms)} 2>&1")
    return bounded(cmd, limit_s) + " 2>&1"
