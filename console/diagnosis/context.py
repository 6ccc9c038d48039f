"""What a log says about the run it comes from: the stack, the hosts and ranks, the phase.

Some lines mean different things in different runs: a missing verbs library or NCCL's socket plugin is
nothing on one node and a fault across two; an out-of-memory while the weights load wants another fix than
one while serving, and each engine names its own knobs. The diagnoser keeps these facts per source
(``SourceState``), read by the context probes of ``catalogue.signatures`` (``CONTEXT_PROBES``: anchor, fact,
regex; the stack, host and rank probes are read by ``note`` here), and the rules that depend on them ask here.
"""

from __future__ import annotations

import re

from console.catalogue.wordings import STACK_FIXES
from console.diagnosis.findings import SourceState


def note(st: SourceState, fact: str, m: re.Match[str]) -> bool:
    """Record one context fact; True when what the rules see changed."""
    if fact == "rank_host":
        host = m.group("host")
        st.hosts[host] = st.hosts.get(host, 0) + 1
        return st.hosts[host] == 1
    if fact == "local_ranks":
        n, local = int(m.group("n")), int(m.group("v"))
        changed = (n, local) != (st.nranks, st.local_ranks)
        st.nranks, st.local_ranks = max(st.nranks, n), local
        st.nnodes = max(st.nnodes, int(m.group("nodes")))
        return changed
    if fact.startswith("stack:"):
        stack = fact.split(":", 1)[1]
        changed = st.stack != stack
        st.stack = stack
        return changed
    return False


def multi_node(st: SourceState, nodes: int | None, nccl_sources: int) -> bool | None:
    """True when this source's run crosses hosts, False when the log proves it does not, else None.

    ``nodes``: the configured station count when the caller knows it. From the log: the hosts nccl-tests
    lists, NCCL's nNodes, all ranks on this host (nRanks = localRanks), channels only over P2P/SHM, NET
    channels, or several sources speaking NCCL."""
    if nodes is not None:
        return nodes > 1
    if st.hosts:
        return len(st.hosts) > 1
    if st.nnodes:
        return st.nnodes > 1
    per_host = ranks_per_host(st)
    if st.nranks and per_host:
        return st.nranks > per_host
    if st.via & {"ib", "socket"}:
        return True
    if st.via == {"local"}:  # only P2P/SHM channels (no NET/ ones): NCCL stays on one host
        return False
    if nccl_sources > 1:
        return True
    return None


def ranks_per_host(st: SourceState) -> int | None:
    """How many ranks share a host, when the log says (nccl-tests' listing or NCCL's localRanks)."""
    if st.hosts:
        return max(st.hosts.values())
    return st.local_ranks or None


def fix_for(kind: str, stack: str | None, default: str) -> str:
    """The fix in the words of the stack that runs (its own flags), else the kind's default."""
    return STACK_FIXES.get((kind, stack), default) if stack else default
