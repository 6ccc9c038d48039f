"""Public diagnosis API: name the likely root cause of a failed launch or an NCCL timeout.

The catalogue lives in ``console.catalogue``; the matcher in ``console.diagnosis.engine``.
"""

from console.catalogue import SEVERITIES, SPECS
from console.diagnosis.engine import Diagnoser, diagnose_lines
from console.diagnosis.findings import Evidence, Finding, has_problems
from console.diagnosis.text import redact

__all__ = ["SEVERITIES", "SPECS", "Diagnoser", "Evidence", "Finding", "diagnose_lines", "has_problems", "redact"]
