"""``python -m hybridfuzz.cli``: the same as the ``hybridfuzz`` console script."""
import sys

from hybridfuzz.cli import console

sys.exit(console())
