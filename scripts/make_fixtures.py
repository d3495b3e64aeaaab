#!/usr/bin/env python
"""Regenerate ``hlo_fixtures/``: HLO text and XLA's own cost numbers for every zoo program.

For each program ``NAME`` of ``xla_costmodel.zoo.PROGRAMS`` this writes

- ``NAME.pre.hlo``: ``jax.jit(fn).lower(*args).as_text(dialect="hlo")``, the
  unoptimized module;
- ``NAME.post.hlo``: ``lowered.compile().as_text()``, the module after XLA's
  CPU pipeline (fusion, layout assignment, scheduling), metadata included;
- ``NAME.cost.json``: ``Compiled.cost_analysis()``, ``Lowered.cost_analysis()``
  and jaxlib's ``hlo_module_cost_analysis`` on both texts re-parsed by
  ``hlo_module_from_text``, plus the jax/jaxlib versions and the backend;

and ``MANIFEST.json`` listing every program with its files, byte sizes,
sha256 digests, computation/instruction counts and opcodes.

Usage::

    python scripts/make_fixtures.py                 # all programs into hlo_fixtures/
    python scripts/make_fixtures.py --only mlp_grad  # one program, MANIFEST entry updated
    python scripts/make_fixtures.py --out /tmp/fx    # somewhere else

Output is deterministic for a given jax/jaxlib and host: arguments are built
from fixed seeds, and source paths in the compiled module's metadata are made
relative to the repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402

from xla_costmodel import _jaxlib_oracle as oracle  # noqa: E402
from xla_costmodel.zoo import PROGRAMS  # noqa: E402

# Fixtures are committed: keep any one file and the whole directory small.
# Large modules (e.g. zoo.transformer_grad(48)) are built on the fly instead.
MAX_FILE_BYTES = 600_000
MAX_TOTAL_BYTES = 3_000_000

SUFFIXES = (".pre.hlo", ".post.hlo", ".cost.json")


def _canonical_paths() -> None:
    # Compiled modules carry a FileNames table of the Python sources that built
    # them; strip the checkout location so the text is the same on any machine.
    pattern = r".*/(site-packages|dist-packages)/|^" + re.escape(str(ROOT) + os.sep)
    jax.config.update("jax_hlo_source_file_canonicalization_regex", pattern)


def _cost_dict(result) -> dict[str, float]:
    if isinstance(result, (list, tuple)):  # jax < 0.4.30 returned one dict per device
        result = result[0] if result else {}
    return {str(k): float(v) for k, v in sorted(dict(result or {}).items())}


def _text_stats(text: str) -> dict:
    instrs = oracle.xla_instructions(text)
    computations = {i["computation"] for i in instrs}
    data = text.encode("utf-8")
    return {
        "bytes": len(data),
        "lines": text.count("\n"),
        "sha256": hashlib.sha256(data).hexdigest(),
        "computations": len(computations),
        "instructions": len(instrs),
        "entry_instructions": sum(1 for i in instrs if i["is_entry"]),
        "opcodes": sorted({i["opcode"] for i in instrs}),
    }


def _backend_info() -> dict:
    client = oracle.cpu_client()
    return {"platform": client.platform, "platform_version": client.platform_version}


def _versions() -> dict:
    v = oracle.jaxlib_versions()
    return {"jax": v.get("jax"), "jaxlib": v.get("jaxlib")}


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))


def _json_text(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


def make_one(name: str, out: Path) -> dict:
    """Write the three fixture files of one program; return its MANIFEST entry."""
    prog = PROGRAMS[name]
    fn, args = prog.build()
    lowered = jax.jit(fn).lower(*args)
    pre = lowered.as_text(dialect="hlo")
    compiled = lowered.compile()
    post = compiled.as_text()

    too_big = [tag for tag, t in (("pre", pre), ("post", post)) if len(t.encode()) > MAX_FILE_BYTES]
    if too_big:
        raise SystemExit(
            f"make_fixtures: {name}: {'/'.join(too_big)} text exceeds {MAX_FILE_BYTES} bytes; "
            "shrink the program in xla_costmodel/zoo rather than committing it"
        )

    try:
        lowered_cost = _cost_dict(lowered.cost_analysis())
    except NotImplementedError:
        lowered_cost = None
    cost = {
        "name": name,
        **_versions(),
        "backend": _backend_info(),
        "pre": {
            "file": f"{name}.pre.hlo",
            "hlo_module_cost_analysis": oracle.xla_cost_analysis(pre),
            "lowered_cost_analysis": lowered_cost,
        },
        "post": {
            "file": f"{name}.post.hlo",
            "hlo_module_cost_analysis": oracle.xla_cost_analysis(post),
            "compiled_cost_analysis": _cost_dict(compiled.cost_analysis()),
        },
        "notes": (
            "hlo_module_cost_analysis = jaxlib._jax.hlo_module_cost_analysis(cpu client, "
            "jaxlib._hlo.hlo_module_from_text(file text)); lowered_cost_analysis = "
            "jax Lowered.cost_analysis(); compiled_cost_analysis = jax Compiled.cost_analysis()"
        ),
    }
    files = {"pre": f"{name}.pre.hlo", "post": f"{name}.post.hlo", "cost": f"{name}.cost.json"}
    _write(out / files["pre"], pre)
    _write(out / files["post"], post)
    cost_text = _json_text(cost)
    _write(out / files["cost"], cost_text)
    return {
        "name": name,
        "description": prog.description,
        "tags": list(prog.tags),
        "files": files,
        "pre": _text_stats(pre),
        "post": _text_stats(post),
        "cost_bytes": len(cost_text.encode()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="regenerate just this program (repeatable)")
    ap.add_argument("--out", type=Path, default=ROOT / "hlo_fixtures",
                    help="output directory (default: hlo_fixtures/)")
    ns = ap.parse_args(argv)

    names = ns.only or list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s) {', '.join(unknown)}; valid: {', '.join(PROGRAMS)}")

    out: Path = ns.out
    out.mkdir(parents=True, exist_ok=True)
    _canonical_paths()

    manifest_path = out / "MANIFEST.json"
    entries: dict[str, dict] = {}
    if ns.only and manifest_path.exists():
        entries = {e["name"]: e for e in json.loads(manifest_path.read_text())["programs"]}

    for name in names:
        entry = make_one(name, out)
        entries[name] = entry
        pre, post = entry["pre"], entry["post"]
        print(f"{name:22s} pre {pre['instructions']:6d} instr {pre['bytes']:8d} B   "
              f"post {post['instructions']:6d} instr {post['bytes']:8d} B", flush=True)

    if not ns.only:  # a full run owns the directory: drop fixtures of programs no longer in the zoo
        for path in sorted(out.iterdir()):
            stem = next((path.name[: -len(s)] for s in SUFFIXES if path.name.endswith(s)), None)
            if stem is not None and stem not in PROGRAMS:
                print(f"removing stale {path.name}")
                path.unlink()

    ordered = [entries[n] for n in PROGRAMS if n in entries]
    total = sum(e["pre"]["bytes"] + e["post"]["bytes"] + e["cost_bytes"] for e in ordered)
    manifest = {
        "generator": "scripts/make_fixtures.py",
        **_versions(),
        "backend": _backend_info(),
        "naming": "<name>.pre.hlo = Lowered.as_text(dialect='hlo'); <name>.post.hlo = "
                  "Compiled.as_text() on CPU; <name>.cost.json = XLA cost analyses of both",
        "total_bytes": total,
        "programs": ordered,
    }
    _write(manifest_path, _json_text(manifest))
    print(f"{len(ordered)} programs, {total} bytes of fixtures in {out}")
    if total > MAX_TOTAL_BYTES:
        print(f"make_fixtures: fixtures total {total} bytes > budget {MAX_TOTAL_BYTES}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
