"""Is anything moving? RDMA hardware counters, the NIC's RDMA byte counters and GPU utilisation,
each read twice a few seconds apart by the hang rung.

- ``rdma statistic show link mlx5_0/1`` (iproute2): ``link mlx5_0/1 rx_write_requests 0 ...
  out_of_sequence 0 ... local_ack_timeout_err 0 ...`` (name/value pairs, possibly wrapped over lines).
- ``ethtool -S NETDEV`` (mlx5): ``     tx_vport_rdma_unicast_bytes: 123`` among hundreds of counters.
- ``nvidia-smi --query-gpu=index,name,utilization.gpu,utilization.memory --format=csv,noheader,nounits``:
  ``utilization.memory`` is the share of time device memory was read or written; a GPU at 100 % with
  memory at 0 % spins (an NCCL kernel polling for a peer that never sends).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from console.probes import ParseError
from console.probes import nvidia_smi as smi

# Counters that rise when the RoCE transport retries or loses packets (mlx5 hw_counters names).
RETRY_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "implied_nak_seq_err",
                  "duplicate_request", "rnr_nak_retry_err", "roce_adp_retrans", "roce_adp_retrans_to",
                  "roce_slow_restart", "req_cqe_error", "resp_cqe_error", "req_remote_access_errors")
TRAFFIC_COUNTERS = ("tx_vport_rdma_unicast_bytes", "rx_vport_rdma_unicast_bytes")


def parse_rdma_statistic(text: str) -> dict[str, dict[str, int]]:
    """``{"mlx5_0/1": {"out_of_sequence": 0, ...}}`` from ``rdma statistic show link``."""
    out: dict[str, dict[str, int]] = {}
    cur: dict[str, int] | None = None
    for tok_line in text.splitlines():
        toks = tok_line.split()
        i = 0
        while i < len(toks):
            if toks[i] == "link" and i + 1 < len(toks) and "/" in toks[i + 1]:
                cur = out.setdefault(toks[i + 1], {})
                i += 2
                continue
            if cur is not None and i + 1 < len(toks) and re.fullmatch(r"\d+", toks[i + 1]):
                cur[toks[i]] = int(toks[i + 1])
                i += 2
                continue
            i += 1
    if not out:
        raise ParseError(f"rdma statistic: no 'link DEV/PORT name value ...' line in {text.strip()[:120]!r}")
    return out


def parse_ethtool_stats(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([\w\[\]\-.]+):\s*(\d+)\s*$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    if not out:
        raise ParseError(f"ethtool -S: no 'name: value' lines in {text.strip()[:120]!r}")
    return out


def growth(before: dict[str, int], after: dict[str, int], names: tuple[str, ...] | None = None) -> dict[str, int]:
    """Counters that grew (a reset reads as no growth), restricted to ``names`` when given."""
    keys = [k for k in after if names is None or k in names]
    return {k: after[k] - before[k] for k in keys if k in before and after[k] > before[k]}


@dataclass(frozen=True)
class GpuActivity:
    index: int
    name: str
    util_pct: float | None
    mem_util_pct: float | None


def _pct(value: str) -> float | None:
    v = value.strip().rstrip("%").strip()
    try:
        return float(v)
    except ValueError:
        return None  # [N/A], N/A, [Not Supported], ERR!


def parse_gpu_activity(text: str) -> list[GpuActivity]:
    """Row by row: a GPU that prints an error line instead of its row is skipped, the others kept."""
    out = []
    for row in csv.reader(io.StringIO(text.replace("\r", ""))):
        if len(row) < 4 or not row[0].strip().isdigit():
            continue
        out.append(GpuActivity(int(row[0]), row[1].strip(), _pct(row[2]), _pct(row[3])))
    if not out and text.strip():
        raise ParseError(f"nvidia-smi: no 'index, name, util, mem util' rows in {text.strip()[:120]!r}")
    return out


def split_gpu_sample(text: str) -> tuple[str, str]:
    """The answer of ``cmdlines.gpu_query_with_activity`` as the two it stands for: the GPU query's
    own text (``nvidia_smi.parse_gpus``; each row without its last cell, any other line -- an error --
    as it is) and the activity rows (``parse_gpu_activity``: index, name, utilization, memory's)."""
    n = len(smi.GPU_FIELDS)
    at = [smi.GPU_FIELDS.index(f) for f in ("index", "name", "utilization.gpu")]
    query, activity = [], []
    for line in text.replace("\r", "").splitlines():
        cells = next(csv.reader([line], skipinitialspace=True), [])
        if len(cells) != n + 1:
            query.append(line)
            continue
        query.append(line.rsplit(",", 1)[0])
        activity.append(", ".join([*(cells[i].strip() for i in at), cells[n].strip()]))
    return "\n".join(query) + ("\n" if query else ""), "\n".join(activity) + ("\n" if activity else "")


def spinning(samples: list[list[GpuActivity]], gpu_name: str | None = None) -> list[int]:
    """GPUs busy (>= 90 %) with no memory traffic (<= 5 %) in every sample: a collective spinning."""
    if not samples:
        return []
    idx = None
    for sample in samples:
        busy = {g.index for g in sample if (gpu_name is None or g.name == gpu_name) and g.util_pct is not None
                and g.util_pct >= 90 and g.mem_util_pct is not None and g.mem_util_pct <= 5}
        idx = busy if idx is None else idx & busy
    return sorted(idx or ())
