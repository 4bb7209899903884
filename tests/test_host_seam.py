"""The engine seam stays typed: every parameter named ``host`` in hybridfuzz/, strategies/ and oracles/ is annotated
(``engines.base.Host`` where cases run on it; ``sleepwake.Host`` where it names the steps a host can take).

Read with ``ast``, never imported (so no vLLM or torch)."""

from __future__ import annotations

import ast
import os

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOTS = ("hybridfuzz", "strategies", "oracles")


def unannotated_hosts(root: str = HERE) -> list[str]:
    """'path:line in function' for each parameter named ``host`` without an annotation (lambdas cannot have one)."""
    found = []
    for top in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            for name in sorted(f for f in filenames if f.endswith(".py")):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), filename=path)
                for node in ast.walk(tree):
                    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    a = node.args
                    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                        if arg is not None and arg.arg == "host" and arg.annotation is None:
                            found.append(f"{os.path.relpath(path, root)}:{arg.lineno} in {node.name}")
    return found


def test_the_scan_sees_a_missing_annotation(tmp_path):
    (tmp_path / "hybridfuzz").mkdir()
    (tmp_path / "hybridfuzz" / "m.py").write_text("def f(case, host, timeout: float = 1.0):\n    pass\n\n\ndef g(host: 'Host'):\n    pass\n")
    assert unannotated_hosts(str(tmp_path)) == [os.path.join("hybridfuzz", "m.py") + ":1 in f"]


def test_every_host_parameter_is_annotated():
    found = unannotated_hosts()
    assert not found, "parameters named host without a type (engines.base.Host):\n" + "\n".join(found)
