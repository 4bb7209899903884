"""After a finding: its file and signature (findings), its status per vLLM version (status),
its reproduction rate (reproduce), the smallest case that still shows it (shrink), and the
first release that has it (bisection, in release environments made by venvs).

Importing the package imports none of them.
"""
