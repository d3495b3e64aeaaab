"""Make a plugin distribution visible to `importlib.metadata` without pip or network.

`importlib.metadata` finds distributions as `*.dist-info` directories on
`sys.path`; a directory holding `METADATA` and `entry_points.txt` is enough.
`installed(tmp)` writes one for the example plugin (its entry points read
from this folder's `pyproject.toml`, so that file is the one source), puts it
and the plugin's `src/` on `sys.path`, and undoes everything on exit: the
paths, the imported plugin modules and the registry entries the plugins
left in `xla_costmodel.models._base._MODELS`.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
PACKAGE = "xla_costmodel_example_plugin"
GROUP = "xla_costmodel.models"


def pyproject() -> dict:
    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))


def entry_points() -> dict[str, str]:
    """The example plugin's `xla_costmodel.models` entry points: {name: "module:attr"}."""
    return dict(pyproject()["project"]["entry-points"][GROUP])


def write_dist_info(root: Path, dist: str, version: str, eps: dict[str, str]) -> Path:
    """A minimal `<dist>-<version>.dist-info` under `root` declaring `eps` in the models group."""
    d = Path(root) / f"{dist.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    lines = [f"[{GROUP}]"] + [f"{name} = {value}" for name, value in eps.items()]
    (d / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


@contextmanager
def installed(root: Path, *, extra: dict[str, dict[str, str]] | None = None):
    """Within the block the example plugin (and `extra` distributions: {dist name: {ep: value}}) is installed.

    **Yields:** the entry-point names made visible.
    """
    from xla_costmodel.models import _base

    root = Path(root)
    meta = pyproject()["project"]
    eps = entry_points()
    write_dist_info(root, meta["name"], meta["version"], eps)
    names = set(eps)
    for i, (dist, more) in enumerate((extra or {}).items()):
        write_dist_info(root, dist, f"0.0.{i}", more)
        names |= set(more)
    before = {n: _base._MODELS[n] for n in names if n in _base._MODELS}
    added = [str(root), str(SRC)]
    for p in added:
        sys.path.insert(0, p)
    importlib.invalidate_caches()
    try:
        yield tuple(sorted(names))
    finally:
        for p in added:
            while p in sys.path:
                sys.path.remove(p)
        for mod in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[mod]
        for name in names:
            if name in before:
                _base._MODELS[name] = before[name]
            else:
                _base._MODELS.pop(name, None)
        importlib.invalidate_caches()
