"""Copy hybridfuzz code into a standalone script by source, so the script and the tool share one rule.

A reproducer template (``reproducer_engine.py``, ``reproducer_component.py``) is a
real module: it imports what it needs from hybridfuzz between two marker lines.
``inline_template`` replaces that block with the source of those objects and of
everything they use from hybridfuzz, found by walking their code:

* functions and classes defined in a hybridfuzz module: their source, verbatim
  (``inspect.getsource``); a ``from hybridfuzz.x import y`` inside a copied
  function is followed and the import line dropped;
* module constants: their value as a Python literal (numbers, strings, tuples,
  lists, dicts, compiled regexes, instances of copied dataclasses, field by field,
  so no field can be forgotten);
* anything else the copied code names (``math``, ``dataclass``, ``defaultdict``...)
  must be bound at the top of the template: checked here, one error line if not.

Definitions come out in dependency order (a default argument or a constant
built from a class needs its class first). Two different objects of one name, or a
copied name that the template also defines, are errors: nothing is renamed. The one
exception is short plain data: a second module's constant of a name already copied
(each oracle module has its own ``ORACLE``) is written as its value where it is used.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import re
import sys
import textwrap
from typing import Any

BEGIN = "# >>> hybridfuzz-inline"
END = "# <<< hybridfuzz-inline"
DATA_BEGIN = "# >>> hybridfuzz-data"
DATA_END = "# <<< hybridfuzz-data"
PACKAGE = "hybridfuzz"


class InlineError(ValueError):
    """The template or the code it names cannot be made standalone; str() is one line."""


def literal(value: Any, refs: list[tuple[str, Any]] | None = None) -> str:
    """Python source that evaluates to value (JSON-like data, regexes, dataclass instances). A hybridfuzz
    class or function inside it (``STEP_NAMES = {Generate: "generate"}``) is written by name and added to
    ``refs``, so the caller copies it too."""
    def lit(v: Any) -> str:
        return literal(v, refs)

    if (inspect.isclass(value) or inspect.isfunction(value)) and _is_ours(value):
        if refs is None or value.__name__ == "<lambda>":
            raise InlineError(f"cannot write {value.__qualname__} as a literal here")
        refs.append((value.__name__, value))
        return value.__name__
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(lit(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        inner = ", ".join(lit(v) for v in sorted(value, key=repr))
        return f"{type(value).__name__}([{inner}])"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in value.items()) + "}"
    if isinstance(value, re.Pattern):
        return f"re.compile({value.pattern!r}, {int(value.flags)})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        args = ", ".join(f"{f.name}={lit(getattr(value, f.name))}" for f in dataclasses.fields(value) if f.init)
        if refs is not None and _is_ours(type(value)):
            refs.append((type(value).__name__, type(value)))
        return f"{type(value).__name__}({args})"
    raise InlineError(f"cannot write a {type(value).__name__} as a literal")


def _is_ours(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod == PACKAGE or mod.startswith(PACKAGE + ".")


def _unwrap(obj: Any) -> Any:
    return inspect.unwrap(obj) if callable(obj) and not isinstance(obj, type) else obj


def _source(obj: Any) -> str:
    return textwrap.dedent(inspect.getsource(obj)).rstrip() + "\n"


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """ids of AST nodes inside annotations (never evaluated under ``from __future__ import annotations``)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        anns = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            anns.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for a in anns:
            skip |= {id(n) for n in ast.walk(a)}
    return skip


@dataclasses.dataclass
class _Def:
    name: str
    obj: Any
    source: str
    deps: list[str]


class _Walker:
    def __init__(self, provided: set[str]):
        self.provided = provided  # names the template binds itself (imports, its own defs)
        self.defs: dict[str, _Def] = {}
        self.order: list[str] = []
        self.missing: dict[str, str] = {}  # external name -> who needs it

    def add(self, name: str, obj: Any, needed_by: str, module: Any = None) -> None:
        """Copy ``obj`` under ``name``; ``module``: where a non-literal constant is assigned (its statement is copied)."""
        if name in self.defs:
            if self._clashes(name, obj):
                raise InlineError(f"two different objects named {name!r} are needed ({needed_by} and an earlier one)")
            return
        if (inspect.isfunction(_unwrap(obj)) or inspect.isclass(obj)) and getattr(obj, "__name__", "") == name:
            self._add_source(name, obj, _source(obj), sys.modules[_unwrap(obj).__module__])
            return
        refs: list[tuple[str, Any]] = []
        home = _home(name, obj, module)
        statement = _assignment(home, name) if home is not None else None
        try:
            text = f"{name} = {literal(obj, refs)}\n"
        except InlineError as e:
            if statement is None:
                raise InlineError(f"{name} (used by {needed_by}): {e}") from None
            text = ""
        if not text or (len(text) > 200 and statement is not None):  # a table of lambdas, a long table: its own source
            self._add_source(name, obj, statement, home)
            return
        self.defs[name] = _Def(name, obj, text, [])
        for ref_name, ref in refs:
            self.add(ref_name, ref, name)
            self.defs[name].deps.append(ref_name)
        self._note_externals(text, name)
        self.order.append(name)

    def _clashes(self, name: str, obj: Any) -> bool:
        """Whether ``obj`` is not what is copied under ``name`` already (equal plain data is the same)."""
        have = self.defs[name].obj
        if have is obj or _unwrap(have) is _unwrap(obj):
            return False
        return not (_is_plain(have) and _is_plain(obj) and type(have) is type(obj) and have == obj)

    def _note_externals(self, text: str, who: str) -> None:
        if "re.compile(" in text and "re" not in self.provided:
            self.missing.setdefault("re", who)

    def _module_ref(self, alias: str, module: Any, attrs: set[str], who: str) -> None:
        """``alias.attr`` in copied code, alias a hybridfuzz module: copy each attr under its own name and
        bind ``alias = SimpleNamespace(attr=attr, ...)``."""
        if "SimpleNamespace" not in self.provided:
            self.missing.setdefault("SimpleNamespace", who)
        d = self.defs.get(alias)
        if d is None:
            d = self.defs[alias] = _Def(alias, module, "", [])
            self.order.append(alias)
        elif d.obj is not module:
            raise InlineError(f"two different objects named {alias!r} are needed ({who} and an earlier one)")
        for attr in sorted(attrs):
            self.add(attr, getattr(module, attr), who, module)
            if attr not in d.deps:
                d.deps.append(attr)
        d.source = f"{alias} = SimpleNamespace(" + ", ".join(f"{x}={x}" for x in d.deps) + ")  # the module's names used here\n"

    def _add_source(self, name: str, obj: Any, src: str, module: Any) -> None:
        tree = ast.parse(src)
        drop: list[tuple[int, int, int]] = []  # (first line, last line, indent) of inner hybridfuzz imports
        deps: list[str] = []
        self.defs[name] = _Def(name, obj, "", deps)  # placeholder: recursion and cycles see it
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == PACKAGE for a in node.names):
                raise InlineError(f"{name} imports a hybridfuzz module inside its body; use 'from hybridfuzz.x import name'")
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE:
                inner = sys.modules.get(node.module) or __import__(node.module, fromlist=["_"])
                for alias in node.names:
                    value = getattr(inner, alias.name)
                    if inspect.ismodule(value):
                        raise InlineError(f"{name} imports the module {node.module}.{alias.name}; name what it uses instead")
                    self.add(alias.asname or alias.name, value, name, inner)
                    deps.append(alias.asname or alias.name)
                drop.append((node.lineno, node.end_lineno or node.lineno, node.col_offset))
        skip = _annotation_nodes(tree)
        loads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip]
        bound_here = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - {name}
        bound_here |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
                       for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, *filter(None, [n.vararg, n.kwarg])]}
        attrs: dict[str, set[str]] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and id(n) not in skip:
                attrs.setdefault(n.value.id, set()).add(n.attr)
        folded: dict[str, str] = {}  # constant name -> its literal, written in place of the name (_fold)
        for ref in sorted({n.id for n in loads}):
            if ref == name or ref in deps or ref in bound_here or ref not in vars(module):
                continue  # itself, a builtin, or a local of the copied code (assigned anywhere = local there)
            value = vars(module)[ref]
            if ref in self.defs and self._clashes(ref, value):
                folded[ref] = _short_literal(value)
                if folded[ref]:
                    continue
            if inspect.ismodule(value) and (value.__name__ == PACKAGE or value.__name__.startswith(PACKAGE + ".")):
                self._module_ref(ref, value, attrs.get(ref, set()), name)
                deps.append(ref)
            elif inspect.ismodule(value) or (callable(value) and not _is_ours(value)):
                if ref not in self.provided:  # math, dataclass, defaultdict...: the template's own imports
                    self.missing.setdefault(ref, name)
            else:  # ours, or data: a literal, else its own assignment statement
                self.add(ref, value, name, module)
                deps.append(ref)
        lines = _fold(src, [n for n in loads if n.id in folded and folded[n.id]], folded).splitlines(keepends=True)
        for first, last, col in sorted(drop, reverse=True):
            lines[first - 1:last] = [" " * col + "pass  # (hybridfuzz import: inlined above)\n"]
        self.defs[name].source = "".join(lines)
        self.order.append(name)

    def emit(self) -> str:
        done: set[str] = set()
        out: list[str] = []

        def visit(n: str, stack: tuple[str, ...]) -> None:
            if n in done or n in stack:
                return
            for d in self.defs[n].deps:
                visit(d, stack + (n,))
            done.add(n)
            out.append(self.defs[n].source)

        for n in self.order:
            visit(n, ())
        return "\n\n\n".join(x.rstrip() + "\n" for x in out)


def _short_literal(value: Any) -> str:
    """A short literal of plain data ("" if it is not or has none): what ``_fold`` may write in place of a name."""
    if not _is_plain(value):
        return ""
    text = literal(value, [])
    return text if len(text) <= 80 and "\n" not in text else ""


def _fold(src: str, names: list[ast.Name], values: dict[str, str]) -> str:
    """``src`` with each of ``names`` replaced by its value. Two modules may each have a constant of one name
    (every oracle module its ``ORACLE``); the second one's uses get its value in place, so nothing is renamed."""
    if not names:
        return src
    lines = src.splitlines(keepends=True)
    for n in sorted(names, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        line = lines[n.lineno - 1].encode()  # ast offsets count UTF-8 bytes
        lines[n.lineno - 1] = (line[:n.col_offset] + values[n.id].encode() + line[n.end_col_offset:]).decode()
    out = "".join(lines)
    try:
        ast.parse(out)
    except SyntaxError:  # a value written inside an f-string of the same quotes
        raise InlineError(f"cannot write {', '.join(sorted({n.id for n in names}))} in place as a value; give the constant its own name") from None
    return out


def _home(name: str, obj: Any, module: Any) -> Any:
    """The hybridfuzz module that assigns ``name = obj`` at top level (``module`` if it does, else the one that
    does and ``module`` imported it from)."""
    candidates = [module] if module is not None else []
    candidates += _our_modules(len(sys.modules))
    for m in candidates:
        if vars(m).get(name) is obj and _assignment(m, name) is not None:
            return m
    return module


@functools.lru_cache(maxsize=4)
def _our_modules(count: int) -> list[Any]:
    """hybridfuzz's loaded modules by name (``count``: len(sys.modules), so a new import makes a new list)."""
    ours = sorted((n, m) for n, m in list(sys.modules.items()) if m is not None and (n == PACKAGE or n.startswith(PACKAGE + ".")))
    return [m for _, m in ours]


def _assignment(module: Any, name: str) -> str | None:
    """Source of the top-level statement of ``module`` that assigns ``name`` (``X = ...`` or ``X: T = ...``)."""
    return _assignments(module.__name__, getattr(module, "__file__", None)).get(name)


@functools.lru_cache(maxsize=None)
def _assignments(module_name: str, path: str | None) -> dict[str, str]:
    """Every top-level assignment of a module, by name, its source parsed once (an export walks ~50 constants)."""
    try:
        text = inspect.getsource(sys.modules[module_name])
    except (OSError, TypeError, KeyError):
        return {}
    lines = text.splitlines(keepends=True)
    out: dict[str, str] = {}
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        for t in targets:
            if isinstance(t, ast.Name) and t.id not in out:
                out[t.id] = _segment(lines, node) + "\n"
    return out


def _segment(lines: list[str], node: ast.stmt) -> str:
    """``ast.get_source_segment`` of a top-level statement, from lines split once (it splits the text per call)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    if first == last:
        return lines[first].encode()[node.col_offset:node.end_col_offset].decode()
    head = lines[first].encode()[node.col_offset:].decode()
    tail = lines[last].encode()[:node.end_col_offset].decode()
    return head + "".join(lines[first + 1:last]) + tail


def _is_plain(value: Any) -> bool:
    """Data the walker writes as a literal (not a class, function or module of its own)."""
    if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
        return False
    try:
        literal(value, [])
        return True
    except InlineError:
        return False


def _bound_names(tree: ast.Module) -> set[str]:
    """Top-level names a module binds: imports, defs, classes, assignments, for-loop targets."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _block(text: str, begin: str, end: str, what: str) -> tuple[int, int]:
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.startswith(begin)]
    ends = [i for i, ln in enumerate(lines) if ln.startswith(end)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise InlineError(f"template: expected one {what} block between {begin!r} and {end!r}")
    return starts[0], ends[0]


def imported_objects(block: str) -> list[tuple[str, Any]]:
    """(name, object) for each ``from hybridfuzz... import a, b`` line of an inline block."""
    out = []
    for node in ast.parse(textwrap.dedent(block)).body:
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(PACKAGE):
            raise InlineError(f"template: the inline block may only hold 'from hybridfuzz... import ...' lines, got line {node.lineno}")
        mod = __import__(node.module, fromlist=["_"])
        out += [(a.asname or a.name, getattr(mod, a.name)) for a in node.names]
    return out


def inline_template(template: str, data: str, extra_roots: list[tuple[str, Any]] = ()) -> str:
    """The template with its inline block replaced by copied source and its data block by ``data``;
    ``extra_roots`` (name, object) are copied too, replacing a template import of the same name."""
    b0, b1 = _block(template, BEGIN, END, "inline")
    d0, d1 = _block(template, DATA_BEGIN, DATA_END, "data")
    copied = _copied(template, tuple(extra_roots))
    out: list[str] = []
    for i, ln in enumerate(template.splitlines(keepends=True)):
        if i == b0:
            out.append(copied)
        elif i == d0:
            out.append(data.rstrip() + "\n")
        elif not (b0 < i <= b1 or d0 < i <= d1):
            out.append(ln)
    return "".join(out)


@functools.lru_cache(maxsize=32)
def _copied(template: str, extra_roots: tuple[tuple[str, Any], ...]) -> str:
    """The inline block's replacement: the copied hybridfuzz source, the same for every case of one template (so it is
    made once per process: the script/judge property test inlines 150 scripts)."""
    b0, b1 = _block(template, BEGIN, END, "inline")
    lines = template.splitlines(keepends=True)
    roots = dict(imported_objects("".join(lines[b0 + 1:b1])))
    roots.update(dict(extra_roots))  # a root of the same name replaces the template's stand-in
    rest = "".join(lines[:b0] + lines[b1 + 1:])
    own = _bound_names(ast.parse(rest))
    walker = _Walker(provided=own)
    for name, obj in roots.items():
        walker.add(name, obj, "the template")
    clash = sorted(own & set(walker.defs))
    if clash:
        raise InlineError(f"template defines {clash[0]!r}, which the copied hybridfuzz code defines too")
    if walker.missing:
        name, who = sorted(walker.missing.items())[0]
        raise InlineError(f"copied code ({who}) needs {name!r}: import it at the top of the template")
    header = f"# ---- copied by hybridfuzz export from hybridfuzz's own source ({len(walker.defs)} definitions); do not edit\n"
    return header + walker.emit().rstrip() + "\n# ---- end of copied code\n"


@functools.lru_cache(maxsize=None)
def template_text(module_name: str) -> str:
    """A template module's file text, read without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise InlineError(f"no template module {module_name}")
    with open(spec.origin, encoding="utf-8") as f:
        return f.read()
