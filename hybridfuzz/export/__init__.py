"""From a finding to an upstream issue: the Markdown body (``issue.py``) and the standalone
reproducer script (``script.py``, built from the template modules ``reproducer_engine.py`` and
``reproducer_component.py`` by ``inline.py``, which copies hybridfuzz's own code into them)."""
from hybridfuzz.export.inline import InlineError
from hybridfuzz.export.issue import (collect_env_text, default_script_name, environment_summary, issue_markdown, issue_title,
                                     latest_divergence, run_script)
from hybridfuzz.export.script import SCRIPT_ENV, standalone_script

__all__ = ["InlineError", "SCRIPT_ENV", "collect_env_text", "default_script_name", "environment_summary", "issue_markdown",
           "issue_title", "latest_divergence", "run_script", "standalone_script"]
