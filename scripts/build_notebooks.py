#!/usr/bin/env python3
"""Build `notebooks/*.ipynb` from their jupytext percent-format sources `notebooks/*.py`.

jupytext is not a dependency, so this is a small converter for the subset of
the percent format the notebooks use:

- an optional header of `# ` comment lines between `# ---` markers, holding
  YAML; only its `jupyter:` block matters, and of that only `kernelspec`
  (read with a few lines of indentation parsing, so no YAML library needed);
- `# %%` starts a code cell, `# %% [markdown]` a markdown cell (its lines
  lose their leading `# ` / `#`); `tags=["..."]` after the marker sets cell
  tags (e.g. `raises-exception`, `skip-execution` for nbmake);
- blank lines around a cell are dropped.

Cell ids are derived from the file name and cell index, so rebuilding an
unchanged source gives the same cells. `--execute` runs the built notebooks
with nbclient (figures embedded as PNG: each notebook turns on matplotlib's
inline backend) and stores their outputs: the committed notebooks are this
executed build, so that they show their tables and figures on GitHub. An
output that holds a path of this machine (the repository, the home folder)
is refused. Without `--execute` the notebooks are written without outputs.
`--check` fails (exit 1) when an `.ipynb` is missing or its cells' sources
differ from its `.py` source (outputs may differ: they hold timings of the
machine that ran them; `tests/test_plot.py` checks the same).

Usage:
    python scripts/build_notebooks.py --execute [notebooks/01_x.py ...]   # what is committed
    python scripts/build_notebooks.py [--check] [notebooks/01_x.py ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
_MARKER = re.compile(r"^# %%(?P<rest>.*)$")
_TAGS = re.compile(r"tags\s*=\s*(\[[^\]]*\])")
DEFAULT_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


class PercentFormatError(ValueError):
    """A source file that is not in the percent format this converter reads."""


def _parse_header(lines: list[str], path: Path) -> tuple[dict, int]:
    """`(kernelspec, index of the first line after the header)`."""
    if not lines or lines[0].rstrip() != "# ---":
        return dict(DEFAULT_KERNELSPEC), 0
    for end in range(1, len(lines)):
        if lines[end].rstrip() == "# ---":
            break
    else:
        raise PercentFormatError(f"{path}:1: header opened with '# ---' is never closed")
    body = [ln[2:] if ln.startswith("# ") else ln[1:] for ln in lines[1:end]]
    kernelspec: dict = {}
    inside, depth = False, None
    for ln in body:
        if not ln.strip():
            continue
        indent = len(ln) - len(ln.lstrip())
        key, _, value = ln.strip().partition(":")
        if key == "kernelspec":
            inside, depth = True, indent
            continue
        if inside:
            if indent <= depth:
                inside = False
                continue
            kernelspec[key.strip()] = value.strip().strip("'\"")
    return (kernelspec or dict(DEFAULT_KERNELSPEC)), end + 1


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _cell_id(stem: str, index: int) -> str:
    return hashlib.sha1(f"{stem}:{index}".encode()).hexdigest()[:8]


def percent_to_notebook(text: str, path: Path) -> nbformat.NotebookNode:
    """Convert percent-format source text to a notebook (no outputs)."""
    lines = text.splitlines()
    kernelspec, start = _parse_header(lines, path)
    cells: list[tuple[str, list[str], list[str], int]] = []  # (type, lines, tags, line number)
    current = None
    for number, line in enumerate(lines[start:], start=start + 1):
        m = _MARKER.match(line)
        if m:
            rest = m.group("rest")
            kind = "markdown" if "[markdown]" in rest or "[md]" in rest else "code"
            tags: list[str] = []
            t = _TAGS.search(rest)
            if t:
                try:
                    tags = [str(x) for x in json.loads(t.group(1))]
                except json.JSONDecodeError as e:
                    raise PercentFormatError(f"{path}:{number}: bad tags list {t.group(1)!r}: {e.msg}") from None
            current = (kind, [], tags, number)
            cells.append(current)
        elif current is None:
            if line.strip():
                raise PercentFormatError(f"{path}:{number}: text before the first '# %%' cell marker")
        else:
            current[1].append(line)

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = kernelspec
    nb.metadata["language_info"] = {"name": "python"}
    for index, (kind, body, tags, number) in enumerate(cells):
        body = _trim(body)
        if kind == "markdown":
            stripped = []
            for ln in body:
                if ln.startswith("# "):
                    stripped.append(ln[2:])
                elif ln.rstrip() == "#":
                    stripped.append("")
                else:
                    raise PercentFormatError(f"{path}:{number}: markdown cell line not commented: {ln!r}")
            cell = nbformat.v4.new_markdown_cell("\n".join(stripped))
        else:
            cell = nbformat.v4.new_code_cell("\n".join(body))
        cell["id"] = _cell_id(path.stem, index)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def notebook_text(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def cell_sources(nb: nbformat.NotebookNode) -> list[tuple]:
    """What a notebook's source decides, outputs left out: `(id, type, source, tags)` per cell."""
    return [(c.get("id"), c.cell_type, c.source, tuple(c.get("metadata", {}).get("tags", ()))) for c in nb.cells]


def is_stale(built: nbformat.NotebookNode, committed_path: Path) -> bool:
    """Whether the committed notebook is missing or its cells differ from the build of its source."""
    if not committed_path.exists():
        return True
    try:
        committed = nbformat.reads(committed_path.read_text(encoding="utf-8"), as_version=4)
    except Exception:  # not a notebook any more: stale
        return True
    return cell_sources(committed) != cell_sources(built)


def machine_paths() -> list[str]:
    """Paths of this machine that must not end up in a committed output: the repository, the home
    folder, the Python environment, the temporary folder."""
    import os
    import tempfile

    paths = {str(ROOT), os.path.realpath(ROOT), str(Path.home()), sys.prefix, tempfile.gettempdir()}
    return sorted((p for p in paths if len(p) > 1), key=len, reverse=True)


def leaked_paths(nb: nbformat.NotebookNode) -> list[str]:
    """`cell N: PATH` for each output that mentions a path of this machine."""
    found = []
    for index, cell in enumerate(nb.cells):
        text = json.dumps(cell.get("outputs", []))
        for path in machine_paths():
            if path in text:
                found.append(f"cell {index}: {path}")
                break
    return found


def execute(nb: nbformat.NotebookNode, src: Path, timeout: int) -> None:
    """Run every cell in `src`'s folder, the outputs stored in `nb` (no timing metadata, so that reruns
    differ only where the results do)."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout, kernel_name=nb.metadata["kernelspec"].get("name", "python3"),
                   record_timing=False, resources={"metadata": {"path": str(src.parent)}}).execute()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*", type=Path, help="percent-format .py files (default: notebooks/*.py)")
    ap.add_argument("--check", action="store_true", help="only check that every .ipynb is up to date")
    ap.add_argument("--execute", action="store_true", help="run the notebooks and store their outputs")
    ap.add_argument("--timeout", type=int, default=600, help="per-cell timeout for --execute (s)")
    args = ap.parse_args(argv)
    sources = args.sources or sorted(NOTEBOOKS.glob("[0-9]*.py"))
    if not sources:
        print("no notebook sources found", file=sys.stderr)
        return 1
    stale = 0
    for src in sources:
        try:
            nb = percent_to_notebook(src.read_text(encoding="utf-8"), src)
        except PercentFormatError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        out = src.with_suffix(".ipynb")
        text = notebook_text(nb)
        if args.check:
            if args.execute:
                ap.error("--check and --execute do not go together")
            if is_stale(nb, out):
                print(f"{out}: out of date (run scripts/build_notebooks.py --execute)", file=sys.stderr)
                stale += 1
            continue
        if args.execute:
            execute(nb, src, args.timeout)
            leaks = leaked_paths(nb)
            if leaks:
                print(f"error: {src}: outputs hold paths of this machine ({'; '.join(leaks)}); "
                      "print relative paths or names instead", file=sys.stderr)
                return 1
            text = notebook_text(nb)
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
