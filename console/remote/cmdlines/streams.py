"""The long-lived multiplexed streams: the health channel (GPU health rows, the kernel log and the
rails rounds by one bash) and the station loop (the process list, the container's events and host
memory), plus one rails round on its own."""

from __future__ import annotations

import shlex

from console.probes import gpu_health
from console.probes import nvidia_smi as smi
from console.probes.rails import IB_COUNTERS, NET_LEAVES, NET_STATS
from console.remote.cmdlines.docker import docker_events
from console.remote.cmdlines.host import MEMINFO
from console.remote.cmdlines.links import NET_SYSFS, RDMA_SYSFS

q = shlex.quote


HEALTH_EVERY_S = 2.0  # the health stream's interval (slower than the GPU loop; a fault shows within ~2 s)


RAILS_EVERY_S = 2.0  # the rails loop's interval


def _rail_reads(rails: list[tuple[str, str]]) -> str:
    reads: list[str] = []
    for netdev, device in rails:
        net = f"{NET_SYSFS}/{netdev}"
        reads += [f"r {q(netdev + '.' + leaf)} {q(f'{net}/{leaf}')}" for leaf in NET_LEAVES]
        reads += [f"r {q(netdev + '.' + s)} {q(f'{net}/statistics/{s}')}" for s in NET_STATS]
        if device:
            port = f"{RDMA_SYSFS}/{device}/ports/1"
            reads.append(f"r {q(netdev + '.ib.state')} {q(port + '/state')}")
            reads += [f"r {q(netdev + '.ib.' + c)} {q(f'{port}/hw_counters/{c}')}" for c in IB_COUNTERS]
    return "; ".join(reads)


def rails_once(rails: list[tuple[str, str]]) -> str:
    """One round of the rails loop (``status``, the links rung): ``R KEY VALUE`` lines, then ``R @@``."""
    script = ('r() { if IFS= read -r v 2>/dev/null < "$2"; then printf "R %s %s\\n" "$1" "$v"; '
              'else printf "R %s -\\n" "$1"; fi; }; ' + _rail_reads(rails) + '; printf "R @@\\n"')
    return "bash -c " + q(script)


# One channel for the three: the session's long-lived streams are few (transport.MAX_STREAMS) and the
# monitor already holds five. bash reads the health tool and the kernel log from process substitutions
# (their pids kept: both are killed when the channel hangs up, a wedged nvidia-smi too) and sysfs with
# builtins; each line goes out with its source's tag: ``H`` health row, ``K`` kernel log line, ``R``
# rails round line (``R @@`` ends a round), ``H @@end`` / ``K @@end``: that tool ended.
# Whole lines only: a line read in part when the short read timed out is carried (c4, c5) to the next
# round (an "Xid 79" in two pieces never reads as "Xid 7"). At most HEALTH_LINES_PER_ROUND lines per
# source and round: a kernel-log flood waits in its pipe, never starving the others ("K @@busy": behind).
HEALTH_LINES_PER_ROUND = 50


# The station loop's drain (below): every line as it comes, no per-round bound.
_DRAIN = ('drain() { while :; do IFS= read -r -t 0.01 -u "$1" l; s=$?; '
          'if [ $s = 0 ]; then printf "%s %s\\n" "$2" "$l"; elif [ $s -gt 128 ]; then '
          '[ -n "$l" ] && printf "%s %s\\n" "$2" "$l"; return 0; else [ -n "$l" ] && printf "%s %s\\n" "$2" "$l"; '
          'printf "%s @@end\\n" "$2"; return 1; fi; done; }; ')


_HEALTH_LOOP = (
    'exec 3<> <(:); exec 4< <(exec {health} 2>&1); h=$!; exec 5< <(exec {kernel} 2>&1); k=$!; '
    'trap "kill -KILL $h $k 2>/dev/null; exit 129" HUP INT TERM; '
    'r() { if IFS= read -r v 2>/dev/null < "$2"; then printf "R %s %s\\n" "$1" "$v"; '
    'else printf "R %s -\\n" "$1"; fi; }; '
    'c4=; c5=; '
    'drain() { local n=0 v=c$1 l s; while [ $n -lt {per_round} ]; do IFS= read -r -t 0.01 -u "$1" l; s=$?; '
    'l="${!v}$l"; printf -v "$v" %s ""; '
    'if [ $s = 0 ]; then printf "%s %s\\n" "$2" "$l"; n=$((n + 1)); elif [ $s -gt 128 ]; then '
    'if [ ${#l} -gt 65536 ]; then printf "%s %s\\n" "$2" "$l"; else printf -v "$v" %s "$l"; fi; return 0; '
    'else [ -n "$l" ] && printf "%s %s\\n" "$2" "$l"; printf "%s @@end\\n" "$2"; return 1; fi; done; '
    'printf "%s @@busy\\n" "$2"; }; '
    'hl=1; kl=1; t=0; while :; do '
    '[ $hl = 1 ] && { drain 4 H || hl=0; }; [ $kl = 1 ] && { drain 5 K || kl=0; }; '
    'if [ $t = 0 ]; then {rails}printf "R @@\\n"; fi; t=$(( (t + 1) % {ticks} )); read -t 0.5 -u 3 _; done'
)


def health_stream(rails: list[tuple[str, str]], since_epoch: float, prefix: str = "clocks_event_reasons",
                  interval_s: float = RAILS_EVERY_S) -> str:
    """The GPU health stream (``nvidia-smi -lms``), the kernel log (``journalctl -k -f`` since
    ``since_epoch``; a journal the user may not read says so on its first line) and the rails loop
    (link state, speed, MTU, carrier changes, error and RoCE counters from sysfs, every
    ``interval_s``), multiplexed on one channel by one bash: three long-lived processes, none per
    round. ``rails``: (netdev, RDMA device or "")."""
    health = f"nvidia-smi {gpu_health.query(prefix)} {smi.CSV_FORMAT} -lms {int(HEALTH_EVERY_S * 1000)}"
    kernel = f"journalctl -k -f --no-pager -o short-iso --since @{int(since_epoch)}"
    reads = _rail_reads(rails)
    script = (_HEALTH_LOOP.replace("{health}", health).replace("{kernel}", kernel)
              .replace("{rails}", reads + "; " if reads else "").replace("{ticks}", str(max(1, round(interval_s / 0.5))))
              .replace("{per_round}", str(HEALTH_LINES_PER_ROUND)))
    return "exec bash -c " + q(script)


# The station loop, the same way: the compute-apps loop (``A``), ``docker events`` (``E``) and
# /proc/meminfo every ``interval_s`` by builtins (``M`` lines, ``M @@`` ends one), polled every tick.
_STATION_LOOP = ('exec 3<> <(:); exec 4< <(exec {apps} 2>&1); a=$!; exec 5< <(exec {events} 2>&1); e=$!; '
                 'trap "kill -KILL $a $e 2>/dev/null; exit 129" HUP INT TERM; ' + _DRAIN +
                 'al=1; el=1; t=0; while :; do [ $al = 1 ] && { drain 4 A || al=0; }; '
                 '[ $el = 1 ] && { drain 5 E || el=0; }; if [ $t = 0 ]; then while IFS= read -r l; do '
                 'printf "M %s\\n" "$l"; done < ' + MEMINFO + '; printf "M @@\\n"; fi; '
                 't=$(( (t + 1) % {ticks} )); read -t {tick} -u 3 _; done')


def station_stream(container: str, loop_ms: int, interval_s: float = 2.0) -> str:
    """The station service's second channel: its process list, its container's events and its host
    memory multiplexed by one bash (two long-lived processes, none per round). The tick is half the
    GPU interval (0.05-0.5 s): a process line is never later than the list's horizon."""
    tick = min(0.5, max(0.05, loop_ms / 2000))
    apps = f"nvidia-smi {smi.APPS_QUERY} {smi.CSV_FORMAT} -lms {int(loop_ms)}"
    script = (_STATION_LOOP.replace("{apps}", apps).replace("{events}", docker_events(container)[len("exec "):])
              .replace("{ticks}", str(max(1, round(interval_s / tick)))).replace("{tick}", f"{tick:g}"))
    return "exec bash -c " + q(script)
