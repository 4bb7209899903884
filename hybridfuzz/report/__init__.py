"""``hybridfuzz report``: a run's HTML page (page) and its inline SVG plots (plots).

Importing the package imports none of them.
"""
