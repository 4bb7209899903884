"""After a finding: its file and signature (findings), its status per vLLM version (status),
its reproduction rate (reproduce), the smallest case that still shows it (shrink), the first
release that has it (bisection, in release environments made by venvs), and what a run's
findings share beyond chance (shared_features).

Importing the package imports none of them.
"""
