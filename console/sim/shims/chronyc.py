"""Simulated ``chronyc tracking`` (``clock-skew``: not synchronised)."""

from __future__ import annotations

import sys
import time


def main(argv: list[str], ctx) -> int:
    if not argv or argv[0] != "tracking":
        print(f"Unrecognized command: {' '.join(argv)}", file=sys.stderr)
        return 1
    ref = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(time.time() - 40))
    if "clock-skew" in ctx.faults:
        print("Reference ID    : 00000000 ()\nStratum         : 0\nRef time (UTC)  : Thu Jan 01 00:00:00 1970\n"
              "System time     : 0.000000000 seconds fast of NTP time\nLast offset     : +0.000000000 seconds\n"
              "RMS offset      : 0.000000000 seconds\nFrequency       : 0.000 ppm slow\n"
              "Residual freq   : +0.000 ppm\nSkew            : 0.000 ppm\nRoot delay      : 1.000000000 seconds\n"
              "Root dispersion : 1.000000000 seconds\nUpdate interval : 0.0 seconds\n"
              "Leap status     : Not synchronised")
        return 0
    print(f"Reference ID    : A9FEA97B (169.254.169.123)\nStratum         : 4\nRef time (UTC)  : {ref}\n"
          "System time     : 0.000022151 seconds slow of NTP time\nLast offset     : -0.000005040 seconds\n"
          "RMS offset      : 0.000012345 seconds\nFrequency       : 10.421 ppm slow\n"
          "Residual freq   : -0.000 ppm\nSkew            : 0.012 ppm\nRoot delay      : 0.000460131 seconds\n"
          "Root dispersion : 0.000366253 seconds\nUpdate interval : 16.0 seconds\nLeap status     : Normal")
    return 0
