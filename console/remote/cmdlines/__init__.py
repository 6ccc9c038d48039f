"""Every remote command line in one place: this package, and nothing else, builds the shell text that
runs on a station. Every argument that comes from config or the operator goes through ``shlex.quote``.

Callers use the one namespace (``from console.remote import cmdlines as rc``; ``rc.gpu_query(...)``);
the builders live by family: ``bounds`` (how a tool that can wedge ends station-side), ``gpus``
(nvidia-smi), ``docker``, ``host`` (files, clock, pids, the launch script, logind), ``links`` (rails,
RDMA, perftest, SSH between stations), ``nccl`` (nccl-tests and the hang evidence), ``streams`` (the
multiplexed long-lived channels), ``processes`` (the GPU process list, ending one), ``identity`` (who a
station is), ``tasks`` (the engine threads' kernel side), ``batch`` (several lines as one) and ``copy``
(``dgx-console copy``, used as ``rc.copy.*``). Each family loads on the first use of one of its names
(``console.lazy.lazy_exports``): a short-lived process that needs one constant loads one module.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from console.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker reads (it cannot see through __getattr__); a test keeps it equal
    from console.remote.cmdlines.batch import PartResult, at_once, in_one, split_parts
    from console.remote.cmdlines.bounds import (
        KILLED_STATUS,
        SMI_LOCK,
        SMI_LOCK_WAIT_S,
        TOOL_LIMIT_S,
        bounded,
        ended_with_channel,
    )
    from console.remote.cmdlines.docker import (
        IMAGE_DIGEST_FORMAT,
        docker_events,
        docker_image_id,
        docker_inspect,
        docker_inspect_json,
        docker_logs,
        docker_rename,
        docker_rm,
        docker_runtimes,
        docker_start,
        docker_stop,
        image_digests,
        log_tail,
    )
    from console.remote.cmdlines.gpus import (
        GPU_LIST_QUERY,
        compute_apps_query,
        gpu_health_query,
        gpu_index_names,
        gpu_list,
        gpu_query,
        gpu_query_with_activity,
    )
    from console.remote.cmdlines.host import (
        LOGIND_CONF,
        MEMINFO,
        clock_sync,
        disk_free,
        drop_caches,
        epoch,
        kernel_log_since,
        kill_pid,
        loginctl_user,
        logind_config,
        meminfo_once,
        model_config,
        model_revision,
        pid_alive,
        port_listeners,
        read_file,
        run_launch_script,
        script_info,
        station_path,
        tail_file,
        whoami,
    )
    from console.remote.cmdlines.identity import (
        MACHINE_ID,
        NET_ADDRESS,
        machine_id_read,
        neigh_json,
        rail_mac_read,
    )
    from console.remote.cmdlines.links import (
        NET_SYSFS,
        RDMA_COUNTER_NAMES,
        RDMA_SYSFS,
        ethtool,
        ethtool_stats,
        ibdev2netdev,
        ibv_devinfo,
        ip_addr4,
        ip_addrs4,
        ip_link,
        jumbo_ping,
        perftest_client,
        perftest_lat_client,
        perftest_lat_server,
        perftest_server,
        rdma_counters,
        rdma_link,
        rdma_statistic,
        route_get,
        show_gids,
        ssh_peer,
    )
    from console.remote.cmdlines.nccl import (
        ENGINE_PROCESS_PATTERN,
        FLIGHT_RECORDER_DUMP,
        FLIGHT_RECORDER_ENTRIES,
        FLIGHT_RECORDER_ON,
        FLIGHT_RECORDER_ON_TEXT,
        FLIGHT_RECORDER_PIPE,
        FLIGHT_RECORDER_PREFIX,
        FR_DEFAULT_TEMP_FILE,
        FR_DUMP_MAX_BYTES,
        NCCL_LOG_PATTERN,
        RAS_DEFAULT_ADDR,
        RAS_WATCH_EVERY_S,
        RAS_WATCH_LIMIT_S,
        engine_tasks,
        flight_recorder_dump,
        nccl_log_lines,
        nccl_tests_binary,
        nccl_tests_mpirun,
        ncclras_diag,
        ncclras_report,
        ncclras_watch,
        pyspy_dump_engines,
    )
    from console.remote.cmdlines.processes import (
        CONTAINERS_MARK,
        IDENTITY_MARK,
        PROCESS_FIELDS,
        SIGNALS,
        identity_fingerprint,
        identity_words,
        process_details,
        process_identity,
        process_running,
        signal_if_same,
        signal_process,
    )
    from console.remote.cmdlines.streams import (
        HEALTH_EVERY_S,
        HEALTH_LINES_PER_ROUND,
        RAILS_EVERY_S,
        health_stream,
        rails_once,
        station_stream,
    )

__getattr__, __all__ = lazy_exports(__name__, {
    "batch": ("PartResult", "at_once", "in_one", "split_parts"),
    "bounds": ("KILLED_STATUS", "SMI_LOCK", "SMI_LOCK_WAIT_S", "TOOL_LIMIT_S", "bounded",
               "ended_with_channel"),
    "docker": ("IMAGE_DIGEST_FORMAT", "docker_events", "docker_image_id", "docker_inspect",
               "docker_inspect_json", "docker_logs", "docker_rename", "docker_rm", "docker_runtimes",
               "docker_start", "docker_stop", "image_digests", "log_tail"),
    "gpus": ("GPU_LIST_QUERY", "compute_apps_query", "gpu_health_query", "gpu_index_names", "gpu_list",
             "gpu_query", "gpu_query_with_activity"),
    "host": ("LOGIND_CONF", "MEMINFO", "clock_sync", "disk_free", "drop_caches", "epoch", "kernel_log_since",
             "kill_pid", "loginctl_user", "logind_config", "meminfo_once", "model_config", "model_revision",
             "pid_alive", "port_listeners", "read_file", "run_launch_script", "script_info", "station_path",
             "tail_file", "whoami"),
    "identity": ("MACHINE_ID", "NET_ADDRESS", "machine_id_read", "neigh_json", "rail_mac_read"),
    "links": ("NET_SYSFS", "RDMA_COUNTER_NAMES", "RDMA_SYSFS", "ethtool", "ethtool_stats", "ibdev2netdev",
              "ibv_devinfo", "ip_addr4", "ip_addrs4", "ip_link", "jumbo_ping", "perftest_client",
              "perftest_lat_client", "perftest_lat_server", "perftest_server", "rdma_counters", "rdma_link",
              "rdma_statistic", "route_get", "show_gids", "ssh_peer"),
    "nccl": ("ENGINE_PROCESS_PATTERN", "FLIGHT_RECORDER_DUMP", "FLIGHT_RECORDER_ENTRIES",
             "FLIGHT_RECORDER_ON", "FLIGHT_RECORDER_ON_TEXT", "FLIGHT_RECORDER_PIPE",
             "FLIGHT_RECORDER_PREFIX", "FR_DEFAULT_TEMP_FILE", "FR_DUMP_MAX_BYTES", "NCCL_LOG_PATTERN",
             "RAS_DEFAULT_ADDR", "RAS_WATCH_EVERY_S", "RAS_WATCH_LIMIT_S", "engine_tasks",
             "flight_recorder_dump", "nccl_log_lines", "nccl_tests_binary", "nccl_tests_mpirun",
             "ncclras_diag", "ncclras_report", "ncclras_watch", "pyspy_dump_engines"),
    "processes": ("CONTAINERS_MARK", "IDENTITY_MARK", "PROCESS_FIELDS", "SIGNALS", "identity_fingerprint",
                  "identity_words", "process_details", "process_identity", "process_running",
                  "signal_if_same", "signal_process"),
    "streams": ("HEALTH_EVERY_S", "HEALTH_LINES_PER_ROUND", "RAILS_EVERY_S", "health_stream", "rails_once",
                "station_stream"),
}, submodules=("copy",))

q = shlex.quote
