"""The flight recorder: incidents, their evidence and the minutes around them (the ledger, the
auto-capture, the micro-stalls and the incident window)."""
