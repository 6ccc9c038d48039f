"""Actions on the service: plan, gates, run, follow, verify, history; the engines' command lines."""
