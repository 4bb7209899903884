"""From a bug to an upstream issue: which case shows it (``bug.py``), the Markdown body (``issue.py``) with its short
plain-vLLM snippet (``snippet.py``), and the standalone reproducer script (``script.py``, built from the template
modules ``reproducer_engine.py`` and ``reproducer_component.py`` by ``inline.py``, which copies hybridfuzz's own code
into them), which checks the bug's own signature (``signature_check.py``). ``run.py`` runs it standalone and records
the run in the ledger."""
from hybridfuzz.export.bug import NothingToReport, Report, bug_report, case_report
from hybridfuzz.export.inline import InlineError
from hybridfuzz.export.issue import collect_env_text, default_script_name, issue_markdown, issue_title, run_script, script_of, snippet_of
from hybridfuzz.export.script import SCRIPT_ENV, latest_divergence, standalone_script

__all__ = ["InlineError", "NothingToReport", "Report", "SCRIPT_ENV", "bug_report", "case_report", "collect_env_text", "default_script_name",
           "issue_markdown", "issue_title", "latest_divergence", "run_script", "script_of", "snippet_of", "standalone_script"]
