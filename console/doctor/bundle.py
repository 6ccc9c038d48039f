"""The workbench's part of the support bundle: the last doctor report and the debug tries of this
config (from the store), or -- when the doctor never ran -- the quick rungs run now (environment
diff and addresses: seconds, nothing started or changed on the stations). Secrets are redacted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from console.config import Config
from console.doctor import store
from console.doctor.runner import run_doctor

QUICK_RUNGS = ("env", "addresses")
QUICK_TIMEOUT_S = 90.0


def doctor_member(config: Config, mask=lambda obj: obj) -> tuple[bytes, dict[str, Any]]:
    """(doctor.json bytes, manifest entry); ``mask`` masks every string of an object (before encoding,
    so no JSON escape hides a secret)."""
    saved = store.load(config)
    report = saved.get("report")
    source = "the last doctor run"
    error = None
    if report is None:
        source = f"the quick rungs ({', '.join(QUICK_RUNGS)}), run for this bundle"
        try:
            rep = asyncio.run(asyncio.wait_for(run_doctor(config, rungs=QUICK_RUNGS), QUICK_TIMEOUT_S))
            report = rep.to_dict()
        except TimeoutError:
            error = f"the quick rungs did not finish within {QUICK_TIMEOUT_S:g} s"
        except Exception as exc:  # noqa: BLE001 - the bundle never dies for its doctor part
            error = f"doctor failed: {exc.__class__.__name__}: {exc}"
    data = mask({"source": source, "report": report, "tries": saved.get("tries") or [], "error": error})
    return json.dumps(data, indent=2).encode(), {"included": report is not None, "source": source, "verdict": (report or {}).get("verdict"),
                           "tries": len(data["tries"]), "error": error}
