"""The package's layers (docs/CONTRIBUTING.md): no package imports a package above it.

Every module of `xla_costmodel` is parsed, not imported, and every import in
it (at the top or inside a function, absolute or relative) is resolved to
the package it names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "xla_costmodel"

#: Bottom to top. A module may import modules of its own package and of lower layers only. The
#: private top-level helpers that import nothing of the package are the floor; the package's
#: `__init__`, the command line and the demo it runs are the roof.
LAYERS = (
    ("_gc", "_jaxlib_oracle", "_lapack", "_text", "_worker"),
    ("hlo", "zoo", "corpus"),
    ("devices",),
    ("analysis",),
    ("models",),
    ("fusion",),
    ("measure",),
    ("fit",),
    ("compare", "plot"),
    ("scale",),
    ("cli", "_demo", "__init__"),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit_of(path: Path, root: Path = ROOT) -> str:
    """A module's layer unit: its top-level package, or a top-level module's own name."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported_units(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """`(unit, line)` for every import of the package's modules in the module at `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = [root.name, *path.relative_to(root).parts[:-1]]  # the package `path` is in

    def unit_of_name(name: str) -> str:  # `from xla_costmodel import <name>`
        return name if (root / name).is_dir() or (root / f"{name}.py").is_file() else "__init__"

    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            if target[0] != root.name:
                continue
            if len(target) > 1:
                out.append((target[1], node.lineno))
            else:
                out.extend((unit_of_name(a.name), node.lineno) for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == root.name:
                    out.append((parts[1] if len(parts) > 1 else "__init__", node.lineno))
    return out


MODULES = sorted(ROOT.rglob("*.py"))


def test_every_package_has_a_layer():
    units = {unit_of(p) for p in MODULES}
    assert units <= set(RANK), f"give these a layer in LAYERS (and in docs/CONTRIBUTING.md): {sorted(units - set(RANK))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_imports_one_above_it(path):
    unit = unit_of(path)
    upward = [
        f"line {line} imports {target} (layer {RANK[target]}) into {unit} (layer {RANK[unit]})"
        for target, line in imported_units(path)
        if RANK[target] > RANK[unit]
    ]
    assert not upward, f"{path.relative_to(ROOT)}: " + "; ".join(upward)


def test_the_walk_finds_every_kind_of_import(tmp_path):
    root = tmp_path / "xla_costmodel"
    (root / "fit").mkdir(parents=True)
    (root / "models").mkdir()
    probe = root / "models" / "_probe.py"
    probe.write_text(
        "import os\n"
        "from . import _base\n"
        "def f():\n"
        "    from ..fit import ScaledModel\n"
        "    import xla_costmodel.cli\n"
        "    from xla_costmodel import fit, get_model\n"
    )
    found = imported_units(probe, root)
    assert found == [("models", 2), ("fit", 4), ("cli", 5), ("fit", 6), ("__init__", 6)]
    assert unit_of(probe, root) == "models"
    assert [t for t, _ in found if RANK[t] > RANK["models"]] == ["fit", "cli", "fit", "__init__"]


# -- cycles between modules -------------------------------------------------------------------------------------
# Layers order packages; inside a package (and between packages of one layer) modules must not import each other
# in a loop either: a cycle has no bottom to read or test first. Every import counts, at the top or inside a
# function, as for the layers.

#: Cycles left to break, each as the sorted modules it joins (issue 25, section 4, names most of them). A cycle not
#: listed fails the test; remove an entry once its cycle is broken.
KNOWN_CYCLES = {
    ("analysis/_rules.py", "analysis/_rules_math.py"),
    ("fit/_calibrate.py", "fit/_context_model.py", "fit/_devices.py", "fit/_learned.py"),
    ("measure/_isolated.py", "measure/_measure.py"),
    ("models/_base.py", "models/_combined.py", "models/_plugins.py", "models/_resolve.py"),
    ("models/_xla_gpu.py", "models/_xla_gpu_fusion.py"),
}


def imported_modules(path: Path, root: Path = ROOT) -> list[Path]:
    """The package's module files that the module at `path` imports (`from x import y`: y where y is a module,
    else x's file or its `__init__.py`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = [root.name, *path.relative_to(root).parts[:-1]]

    def module_file(parts: list[str]) -> Path | None:
        if not parts or parts[0] != root.name:
            return None
        base = root.joinpath(*parts[1:])
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        return None

    out: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            for alias in node.names:
                found = module_file([*target, alias.name])  # `from . import _x`: the module _x
                if found is None:
                    found = module_file(target)
                if found is not None:
                    out.append(found)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found = module_file(alias.name.split("."))
                if found is not None:
                    out.append(found)
    return [p for p in out if p != path]


def import_cycles(modules: list[Path], root: Path = ROOT) -> list[tuple[str, ...]]:
    """Every set of modules that import each other in a loop (strongly connected, more than one), as sorted
    paths relative to `root` (Tarjan's algorithm)."""
    graph = {p: sorted(set(imported_modules(p, root))) for p in modules}
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    cycles: list[tuple[str, ...]] = []

    def visit(start: Path) -> None:  # iterative: a deep import chain must not hit Python's recursion limit
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(tuple(sorted(str(p.relative_to(root)) for p in component)))

    for module in modules:
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_new_import_cycles():
    new = [c for c in import_cycles(MODULES) if c not in KNOWN_CYCLES]
    assert not new, "modules that import each other in a loop: " + "; ".join(" <-> ".join(c) for c in new)


def test_the_hlo_front_end_has_no_cycle():
    assert not [c for c in import_cycles(MODULES) if any(m.startswith("hlo/") for m in c)]


def test_the_cycle_walk_finds_loops_through_function_level_imports(tmp_path):
    root = tmp_path / "xla_costmodel"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("from ._a import f\n")
    (root / "pkg" / "_a.py").write_text("from ._b import g\n")
    (root / "pkg" / "_b.py").write_text("def g():\n    from . import _c\n")
    (root / "pkg" / "_c.py").write_text("import xla_costmodel.pkg._a\n")
    (root / "pkg" / "_d.py").write_text("from ._a import f\nfrom .. import pkg\n")
    modules = sorted(root.rglob("*.py"))
    assert imported_modules(root / "pkg" / "_d.py", root) == [root / "pkg" / "_a.py", root / "pkg" / "__init__.py"]
    assert import_cycles(modules, root) == [("pkg/_a.py", "pkg/_b.py", "pkg/_c.py")]
    (root / "pkg" / "_b.py").write_text("def g():\n    pass\n")
    assert import_cycles(modules, root) == []
