"""The package's layers (docs/CONTRIBUTING.md): no package imports a package above it, no modules import
each other in a loop.

Every module of `xla_costmodel` is parsed, not imported, and every import in
it (at the top or inside a function, absolute or relative, and the module
names given as constants to `importlib.import_module` or `__import__`) is
resolved to the package it names, and to the module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "xla_costmodel"

#: Bottom to top. A module may import modules of its own package and of lower layers only. The
#: private top-level helpers that import nothing of the package are the floor; the package's
#: `__init__` and the command line (the main job its `demo` runs included) are the roof.
LAYERS = (
    ("_atomic", "_gc", "_jaxlib_oracle", "_lapack", "_progress", "_quiet_jax", "_text", "_user_program", "_worker"),
    ("hlo", "zoo", "corpus"),
    ("fusion_engine",),
    ("devices",),
    ("gpu_compile",),
    ("analysis",),
    ("models",),
    ("fusion",),
    ("measure",),
    ("metrics",),
    ("datasets",),
    ("features",),
    ("fit",),
    ("compare", "plot"),
    ("front",),
    ("scale",),
    ("cli", "__init__"),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit_of(path: Path, root: Path = ROOT) -> str:
    """A module's layer unit: its top-level package, or a top-level module's own name."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _module_name(path: Path, root: Path) -> list[str]:
    """The dotted name of the module at `path` (a package's `__init__`: the package's), as parts."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _dynamic_imports(tree: ast.AST, path: Path, root: Path) -> list[tuple[list[str], list[str], int]]:
    """`importlib.import_module(NAME[, package])` and `__import__(NAME)` calls whose NAME is a string
    constant, as `imports` gives them; a relative NAME is resolved against `__name__` as the call does."""
    out = []
    here = _module_name(path, root)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        f = node.func
        called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        name = node.args[0]
        if called not in ("import_module", "__import__") or not isinstance(name, ast.Constant) \
                or not isinstance(name.value, str):
            continue
        text = name.value
        level = len(text) - len(text.lstrip("."))
        rest = [p for p in text[level:].split(".") if p]
        if level:  # relative to the `package` argument: `__name__` or a constant
            anchor = node.args[1] if len(node.args) > 1 else None
            if isinstance(anchor, ast.Name) and anchor.id == "__name__":
                base = here
            elif isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
                base = anchor.value.split(".")
            else:
                continue
            rest = base[: len(base) - (level - 1)] + rest
        out.append((rest, [], node.lineno))
    return out


def imports(path: Path, root: Path = ROOT) -> list[tuple[list[str], list[str], int]]:
    """`(module, names, line)` for every import of the package's modules in the module at `path`:
    `module` as dotted parts, `names` those of a `from module import a, b` (else empty)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = [root.name, *path.relative_to(root).parts[:-1]]  # the package `path` is in
    out: list[tuple[list[str], list[str], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            out.append((target, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            out.extend((a.name.split("."), [], node.lineno) for a in node.names)
    out += _dynamic_imports(tree, path, root)
    return [(t, names, line) for t, names, line in out if t and t[0] == root.name]


def imported_units(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """`(unit, line)` for every import of the package's modules in the module at `path`."""

    def unit_of_name(name: str) -> str:  # `from xla_costmodel import <name>`
        return name if (root / name).is_dir() or (root / f"{name}.py").is_file() else "__init__"

    out: list[tuple[str, int]] = []
    for target, names, line in imports(path, root):
        if len(target) > 1:
            out.append((target[1], line))
        elif names:
            out.extend((unit_of_name(n), line) for n in names)
        else:
            out.append(("__init__", line))
    return out


def imported_files(path: Path, root: Path = ROOT) -> set[Path]:
    """The package's files the module at `path` imports (`from A import b`: `A/b.py` when that is a
    module, else `A`'s file); the package's root `__init__` is left out (it imports everything and
    nothing in the package imports it: the layers)."""
    files = set()
    for module, names, _ in imports(path, root):
        for target in ([module + [n] for n in names] or [module]):
            found = _file_of(target, root)
            if found is not None:
                files.add(found)
    return files - {path}


def _file_of(target: list[str], root: Path) -> Path | None:
    """The file of the longest prefix of `target` (dotted parts) that is a module or package."""
    for n in range(len(target), 1, -1):
        base = root.joinpath(*target[1:n])
        found = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if found.is_file():
            return found
    return None


def import_cycles(paths, root: Path = ROOT) -> list[list[str]]:
    """The groups of modules that import each other in a loop (strongly connected components of two or
    more modules, Tarjan's algorithm), each as sorted paths relative to `root`."""
    graph = {p: imported_files(p, root) for p in paths}
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    groups: list[list[str]] = []

    def visit(v: Path) -> None:  # recursion depth: the longest import chain, a few dozen
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(str(g.relative_to(root)) for g in group))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(groups)


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


#: Loops that other work is breaking (none left: issue 25 §4 broke the last). A loop not listed here fails.
KNOWN_CYCLES: tuple = ()


def test_no_modules_import_each_other_in_a_loop():
    new = [g for g in import_cycles(MODULES) if not any(set(g) <= known for known in KNOWN_CYCLES)]
    assert not new, "modules that import each other in a loop: " + "; ".join(" <-> ".join(g) for g in new)


def test_dynamic_imports_are_followed(tmp_path):
    root = tmp_path / "xla_costmodel"
    for package in ("plot", "compare", "fit"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "compare" / "_a.py").write_text("from ..plot import _b\n")
    (root / "plot" / "_b.py").write_text(
        "import importlib\n"
        "def f():\n"
        "    importlib.import_module('xla_costmodel.compare._a')\n"
        "    importlib.import_module('...fit', __name__)\n"  # `xla_costmodel.plot._b` up two: `xla_costmodel.fit`
        "    __import__('xla_costmodel.compare')\n"
        "    importlib.import_module(f'{__name__}.x')\n"  # not a constant: not resolved
    )
    b = root / "plot" / "_b.py"
    assert imported_units(b, root) == [("compare", 3), ("fit", 4), ("compare", 5)]
    assert imported_files(b, root) == {root / "compare" / "_a.py", root / "fit" / "__init__.py",
                                       root / "compare" / "__init__.py"}
    assert import_cycles(sorted(root.rglob("*.py")), root) == [["compare/_a.py", "plot/_b.py"]]


# ---------------------------------------------------------------------------
# Private names across packages (issue 34 §2)
#
# A package states what it offers in its `__init__` (or an internal API module without an underscore); its
# underscore modules and names are its own business. An import from another package of an underscore
# module, or of an underscore name, is a private import. The floor helpers (`_atomic`, `_gc`, `_text`, ...,
# LAYERS[0]) are not: they are private to the distribution, not to one package, and exist to be shared by
# every package above them, so importing them from anywhere is allowed. Imports within one package are that
# package's business and allowed too.

FLOOR = frozenset(LAYERS[0])


def _private_key(module: list[str], name: str | None) -> str | None:
    """What an import of `name` (None: the module itself) from `module` (dotted parts below the root)
    reaches privately, dotted: the underscore name itself when `name` is one (`analysis._rules._attr_tuple`,
    `analysis._opcodes` for `from ..analysis import _opcodes`), else the module when a part of its path has
    an underscore (`analysis._opcodes` for `from ..analysis._opcodes import X`); None when all is public."""
    if name is not None and name.startswith("_"):
        return ".".join([*module, name])
    if any(part.startswith("_") for part in module):
        return ".".join(module)
    return None


def private_imports(path: Path, root: Path = ROOT) -> list[tuple[str, str, int]]:
    """`(importing file, imported private module or name, line)` for every private import in the module
    at `path` of another package (not of the floor helpers); the file relative to `root`."""
    unit = unit_of(path, root)
    here = path.relative_to(root).as_posix()
    out = []
    for target, names, line in imports(path, root):
        for name in names or [None]:
            key = _private_key(target[1:], name)
            if key is not None and key.split(".")[0] not in (unit, *FLOOR):
                out.append((here, key, line))
    return out


def test_private_imports_are_found(tmp_path):
    root = tmp_path / "xla_costmodel"
    for package in ("analysis", "models", "zoo"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    probe = root / "models" / "_probe.py"
    probe.write_text(
        "from ..analysis._opcodes import ELEMENTWISE, is_fusible\n"  # a private module: once per name
        "from ..analysis import _shapes, cost_analysis\n"  # a private module by name, a public name
        "from ..analysis._rules import _attr_tuple\n"  # a private name
        "from .._atomic import write_text_atomic\n"  # a floor helper: shared on purpose
        "from . import _base\n"  # its own package
        "from ._base import _helper\n"
        "def f():\n"
        "    import xla_costmodel.zoo._programs\n"
        "    from xla_costmodel.zoo import get_program\n"
    )
    assert private_imports(probe, root) == [
        ("models/_probe.py", "analysis._opcodes", 1), ("models/_probe.py", "analysis._opcodes", 1),
        ("models/_probe.py", "analysis._shapes", 2), ("models/_probe.py", "analysis._rules._attr_tuple", 3),
        ("models/_probe.py", "zoo._programs", 8),
    ]


#: The private imports across packages still allowed (issue 34 §2), as (importing file, imported private
#: module or name): none. A new private import fails `test_no_new_private_imports_across_packages`: give
#: what is imported a public name in its package's `__init__` (or an internal API module without an
#: underscore: `analysis.interpreter`, `devices.host`, `models.pricing`, ...) and import that. An entry
#: ever added here and no longer used fails `test_the_allowlist_has_no_stale_entries`.
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str]] = set()


def test_no_new_private_imports_across_packages():
    new = [f"{f}:{line} imports {key}" for p in MODULES for f, key, line in private_imports(p)
           if (f, key) not in PRIVATE_IMPORTS_ALLOWED]
    assert not new, ("imports of another package's underscore module or name (import what its __init__ "
                     "offers, or give the thing a public name there): " + "; ".join(new))


def test_the_allowlist_has_no_stale_entries():
    used = {(f, key) for p in MODULES for f, key, _ in private_imports(p)}
    stale = sorted(PRIVATE_IMPORTS_ALLOWED - used)
    assert not stale, f"no longer imported: delete from PRIVATE_IMPORTS_ALLOWED: {stale}"


# ---------------------------------------------------------------------------
# Scripts call the library (issue 34 §7)
#
# A script is a user of the package: it imports what a package's `__init__` or internal API module
# offers (`datasets`, `features`, `fit.calibration`, `compare.scoring`, `models.pricing`,
# `fusion.conformance`, `measure.programs`, `analysis.library`, ...), never an underscore module or name of
# a package. The floor helpers (LAYERS[0]: `_jaxlib_oracle`, `_progress`, ...) are shared by the whole
# distribution, scripts included, as they are by every package; `scripts/_bench_common.py` is the
# scripts' own.

SCRIPTS = sorted((ROOT.parent / "scripts").glob("*.py"))


def script_private_imports(path: Path) -> list[tuple[str, int]]:
    """`(private module or name, line)` for every import in the script at `path` of an underscore module
    or name of one of the package's packages (one per imported name; floor helpers left out)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            module, names = node.module.split("."), [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            module, names = None, None
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == ROOT.name and len(parts) > 1 and parts[1] not in FLOOR:
                    key = _private_key(parts[1:], None)
                    if key is not None:
                        out.append((key, node.lineno))
            continue
        else:
            continue
        if module[0] != ROOT.name:
            continue
        for name in names:
            key = _private_key(module[1:], name)
            if key is not None and key.split(".")[0] not in FLOOR:
                out.append((key, node.lineno))
    return out


def test_script_private_imports_are_found(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from xla_costmodel.features._prepare import prepare, Prepared\n"  # a private module: once per name
        "from xla_costmodel.datasets import load_rows\n"  # the package's __init__: public
        "from xla_costmodel.compare.scoring import fit_model as _fit\n"  # a public name, bound privately
        "from xla_costmodel.fusion import _conformance as conf\n"  # a private module by name
        "from xla_costmodel import _jaxlib_oracle, analyze\n"  # a floor helper, a public name
        "def f():\n"
        "    import xla_costmodel.models._dot_fusion as dot\n"
        "    from _bench_common import _sources\n"  # the scripts' own
    )
    assert script_private_imports(probe) == [("features._prepare", 1), ("features._prepare", 1),
                                             ("fusion._conformance", 4), ("models._dot_fusion", 7)]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_import_no_private_names(path):
    found = [f"line {line}: {key}" for key, line in script_private_imports(path)]
    assert not found, (f"scripts/{path.name} imports private modules or names of the package (import what "
                       "the package's __init__ or internal API module offers, or name it there): " + "; ".join(found))


# The notebooks are what a new user copies first: they import as a script does (notebook 04 imported
# `models._gemm_table` where `models.pricing` offers the same names).
NOTEBOOKS = sorted((ROOT.parent / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_import_no_private_names(path):
    found = [f"line {line}: {key}" for key, line in script_private_imports(path)]
    assert not found, (f"notebooks/{path.name} imports private modules or names of the package (import what "
                       "the package's __init__ or internal API module offers): " + "; ".join(found))


def _first_import_line(tree: ast.AST, package: str) -> int | None:
    lines = [n.lineno for n in ast.walk(tree)
             if (isinstance(n, ast.Import) and any(a.name.split(".")[0] == package for a in n.names))
             or (isinstance(n, ast.ImportFrom) and not n.level and (n.module or "").split(".")[0] == package)]
    return min(lines, default=None)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_import_xla_costmodel_before_jax(path):
    # jax's own import prints the CUDA plugin's log lines where it is installed without a GPU; imported
    # after xla_costmodel, it is quiet (`_quiet_jax`). Notebooks 01 and 02 imported jax first.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ours, jax = _first_import_line(tree, ROOT.name), _first_import_line(tree, "jax")
    assert ours is not None
    assert jax is None or ours < jax, f"notebooks/{path.name}: jax imported (line {jax}) before xla_costmodel ({ours})"
