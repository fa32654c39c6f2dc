"""Pre-flight check: what a run would train on and what it would cost, before any weights load.

``check.run_preflight(request, settings, store)`` -> ``report.PreflightReport``.
"""
