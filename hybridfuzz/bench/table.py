"""The tables the detection-power benches keep (bench/faults.py, bench/releases.py): JSON plus Markdown beside it,
written atomically, so a bench cut short keeps every row it finished."""
from __future__ import annotations

import json
from typing import Callable

from hybridfuzz.store import write_atomic


def write(path: str, table: dict, markdown: Callable[[dict], str]) -> dict:
    write_atomic(path, json.dumps(table, indent=2))
    write_atomic(path[:-5] + ".md", markdown(table))
    return table


def header(title: str, table: dict) -> list[str]:
    """The Markdown's title, when it was updated and the commands that made its rows."""
    return [f"# {title}", "", f"Updated {table['updated']}. Commands:", "", *[f"    {c}" for c in table["commands"]], ""]
