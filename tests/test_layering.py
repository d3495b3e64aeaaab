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
