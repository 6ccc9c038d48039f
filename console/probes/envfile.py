"""The ``~/glm53.env`` style file: ``export NAME="value"`` / ``NAME=value`` lines, read with shlex."""

from __future__ import annotations

import shlex

from console.probes import ParseError


def parse_env(text: str) -> dict[str, str]:
    """Variables set in a POSIX-shell env file (comments and blank lines ignored)."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            words = shlex.split(s, comments=True)
        except ValueError as exc:
            raise ParseError(f"env file line {n}: {exc}: {s[:80]!r}") from None
        if words and words[0] == "export":
            words = words[1:]
        for w in words:
            name, sep, value = w.partition("=")
            if not sep or not name.replace("_", "a").isalnum() or name[0].isdigit():
                raise ParseError(f"env file line {n}: not NAME=value: {s[:80]!r}")
            out[name] = value
    return out


# Names the launch scripts read: which one carries which fact (first match wins).
RANK_KEYS = ("RANK", "NODE_RANK")
HEAD_IP_KEYS = ("HEAD_IP", "MASTER_ADDR", "HEAD_NODE_IP", "VLLM_MASTER_ADDR")
LOCAL_IP_KEYS = ("LOCAL_IP", "NODE_IP", "VLLM_HOST_IP", "SGLANG_HOST_IP")
PEER_IP_KEYS = ("PEER_IP", "REMOTE_IP", "WORKER_IP")
NETDEV_KEYS = ("NETDEV", "RAIL_NETDEV", "NCCL_SOCKET_IFNAME", "IFACE")
RDMA_KEYS = ("RDMA_DEV", "RDMA_DEVICE", "NCCL_IB_HCA", "IB_DEV")


def first(env: dict[str, str], keys: tuple[str, ...]) -> tuple[str, str] | None:
    for k in keys:
        if env.get(k):
            return k, env[k]
    return None
