"""Simulated ``systemd-analyze cat-config systemd/logind.conf``: Ubuntu 24.04's stock logind.conf (every
setting commented out: RemoveIPC is systemd's built-in ``yes``), printed the way cat-config does
(``# PATH`` before the file)."""

from __future__ import annotations

import sys

STOCK = """#  This file is part of systemd.
#
#  systemd is free software; you can redistribute it and/or modify it under the
#  terms of the GNU Lesser General Public License as published by the Free
#  Software Foundation; either version 2.1 of the License, or (at your option)
#  any later version.
#
# Entries in this file show the compile time defaults. Local configuration
# should be created by either modifying this file (or a copy of it placed in
# /etc/ if the original file is shipped in /usr/), or by creating "drop-ins" in
# the /etc/systemd/logind.conf.d/ directory. The latter is generally
# recommended. Defaults can be restored by simply deleting the main
# configuration file and all drop-ins located in /etc/.
#
# Use 'systemd-analyze cat-config systemd/logind.conf' to display the full config.
#
# See logind.conf(5) for details.

[Login]
#NAutoVTs=6
#ReserveVT=6
#KillUserProcesses=no
#KillOnlyUsers=
#KillExcludeUsers=root
#InhibitDelayMaxSec=5
#UserStopDelaySec=10
#HandlePowerKey=poweroff
#HandleSuspendKey=suspend
#HandleHibernateKey=hibernate
#HandleLidSwitch=suspend
#IdleAction=ignore
#IdleActionSec=30min
#RuntimeDirectorySize=10%
#RuntimeDirectoryInodesMax=
#RemoveIPC=yes
#InhibitorsMax=8192
#SessionsMax=8192
#StopIdleSessionSec=infinity
"""


def main(argv: list[str], ctx) -> int:
    if argv[:2] != ["cat-config", "systemd/logind.conf"]:
        print(f"Unknown command verb '{argv[0] if argv else ''}'.", file=sys.stderr)
        return 1
    print("# /etc/systemd/logind.conf")
    print(STOCK, end="")
    return 0
