"""Measurements of the fuzzer itself: speed of the naive and fast paths (speed), detection power
on injected faults (faults) and on older releases (releases), fault severity (sensitivity), the
oracles' noise floor (noise, calibrate), and the shared table writer (table).

Importing the package imports none of them.
"""
