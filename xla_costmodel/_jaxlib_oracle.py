"""XLA's own HLO machinery, reached through jaxlib: the reference for tests and benchmarks.

The rest of the project parses HLO text and counts costs itself; this module
gives tests and benchmarks the answers XLA's C++ code gives for the same
text, so that our parser and cost analysis are checked against something we
did not write. Nothing in the library proper may depend on it.

**What jaxlib 0.10.2 exposes** (found by inspecting the installed wheel; the
bindings are nanobind classes in ``jaxlib._hlo``, re-exported as
``jax._src.lib.hlo`` and partly as ``jax._src.lib.xla_client``):

- Parsing: ``jaxlib._hlo.hlo_module_from_text(text: str) -> HloModule``. It
  accepts both the unoptimized text of ``Lowered.as_text(dialect="hlo")``
  (no ``%`` sigils, no metadata) and the optimized text of
  ``Compiled.as_text()`` (``%`` sigils, ``metadata={...}``,
  ``backend_config``, the ``FileNames``/``FunctionNames``/``FileLocations``/
  ``StackFrames`` tables, ``is_scheduled=true``). It does not run DCE: dead
  instructions are kept. Parse errors raise ``RuntimeError`` whose message
  starts ``INVALID_ARGUMENT: Syntax error ...`` and names ``line:column``.
  (jaxlib 0.4.x had the same function as ``xla_client._xla.hlo_module_from_text``.)
- Cost analysis: ``jaxlib._jax.hlo_module_cost_analysis(client, module) -> dict``
  (also ``jax._src.lib._jax.hlo_module_cost_analysis``)
  with ``client`` a ``jaxlib._jax.Client`` (``jax.extend.backend.get_backend("cpu")``,
  the same object as ``jax.devices("cpu")[0].client``). Keys: ``flops``,
  ``transcendentals``, ``bytes accessed``, ``bytes accessed{i}{}`` per entry
  operand ``i``, ``bytes accessedout{}``, ``utilization{i}{}``, and
  ``optimal_seconds`` where the backend sets it. For a compiled module it gives
  the same numbers as ``Compiled.cost_analysis()``; ``Lowered.cost_analysis()``
  calls it on the unoptimized module. Also reachable as
  ``xla_client._xla.hlo_module_cost_analysis``.
- ``HloModule``: ``name`` (property), ``computations()`` (list, callees before
  callers, entry last), ``make_nonfusion_computations()``, ``to_string(options=HloPrintOptions())``,
  ``as_serialized_hlo_module_proto()``, ``from_serialized_hlo_module_proto``,
  ``schedule()`` (``HloSchedule`` or ``None``; set for compiled modules),
  ``set_schedule``, ``create_empty_schedule``, ``spmd_output_sharding``,
  ``spmd_parameters_shardings``. There is **no** entry-computation accessor.
- ``HloComputation``: ``name`` (property), ``instructions()`` (list, in text
  order), ``render_html(path)``, ``create_unary_instruction``,
  ``replace_instruction``. There is **no** root-instruction accessor.
- ``HloInstruction``: ``name`` (property, without ``%``), ``opcode``
  (property, an ``HloOpcode`` enum such as ``HloOpcode.kAdd``), ``operands()``,
  ``users()``, ``to_string()`` (``%name = shape opcode(operands), attrs``, never
  with the ``ROOT`` marker), ``async_wrapped_root()``. There is **no** shape,
  attribute or metadata accessor: the shape, the textual opcode
  (``get-tuple-element``, ``exponential``, ...) and every attribute have to be
  read from ``to_string()``.
- ``HloPrintOptions()`` with settable boolean properties (``print_metadata``,
  ``print_backend_config``, ``include_layout_in_shapes``, ``print_operand_shape``,
  ``print_large_constants``, ``canonicalize_instruction_names``, ...) and the
  factories ``short_parsable()``, ``canonical()``, ``fingerprint()``.
- Also in ``jaxlib._hlo``: ``hlo_module_to_dot_graph(module)``, ``HloOpcode``
  (all opcodes), ``Shape``, ``Layout``, ``XlaComputation`` (``as_hlo_module()``,
  ``as_hlo_text()``), ``HloSchedule``, ``HloSharding``.

Root instructions and the entry computation are recovered here from the
printed module (``ROOT`` markers and the ``ENTRY`` header).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "XlaVerdict",
    "cpu_client",
    "jaxlib_versions",
    "split_instruction_text",
    "xla_cost_analysis",
    "xla_instructions",
    "xla_module_to_text",
    "xla_names",
    "xla_parse",
    "xla_verdict",
]


def _find(candidates: list[tuple[str, str]], what: str) -> Callable[..., Any]:
    """First attribute that exists among ``(module path, attribute)`` candidates."""
    import importlib

    tried = []
    for mod_name, attr in candidates:
        tried.append(f"{mod_name}.{attr}")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        fn = mod
        for part in attr.split("."):
            fn = getattr(fn, part, None)
        if fn is not None:
            return fn
    raise RuntimeError(
        f"this jaxlib ({jaxlib_versions().get('jaxlib', 'unknown')}) does not expose {what}; "
        f"looked for {', '.join(tried)}"
    )


def _hlo_module_from_text() -> Callable[[str], Any]:
    return _find(
        [
            ("jaxlib._hlo", "hlo_module_from_text"),
            ("jax._src.lib", "xla_client._xla.hlo_module_from_text"),
            ("jaxlib.xla_extension", "hlo_module_from_text"),
        ],
        "hlo_module_from_text",
    )


def _hlo_module_cost_analysis() -> Callable[[Any, Any], dict]:
    return _find(
        [
            ("jaxlib._jax", "hlo_module_cost_analysis"),
            ("jax._src.lib", "xla_client._xla.hlo_module_cost_analysis"),
            ("jaxlib.xla_extension", "hlo_module_cost_analysis"),
        ],
        "hlo_module_cost_analysis",
    )


def _hlo_bindings():
    try:
        from jaxlib import _hlo  # jaxlib >= 0.7
    except ImportError:
        try:
            from jaxlib import xla_extension as _hlo  # older layout
        except ImportError as err:
            raise RuntimeError("jaxlib's HLO bindings (jaxlib._hlo) are not importable") from err
    return _hlo


def jaxlib_versions() -> dict[str, str]:
    """**Returns:** ``{"jax": version, "jaxlib": version}`` of the installed packages."""
    out = {}
    try:
        import jax

        out["jax"] = jax.__version__
    except ImportError:
        pass
    try:
        import jaxlib

        out["jaxlib"] = getattr(jaxlib, "__version__", None) or jaxlib.version.__version__
    except (ImportError, AttributeError):
        pass
    return out


def cpu_client():
    """**Returns:** jaxlib's CPU ``Client`` (needed by ``hlo_module_cost_analysis``)."""
    try:
        from jax.extend.backend import get_backend
    except ImportError:
        from jax._src.xla_bridge import get_backend
    try:
        return get_backend("cpu")
    except RuntimeError as err:
        raise RuntimeError(
            "jax has no CPU backend in this process (is JAX_PLATFORMS set without 'cpu'?)"
        ) from err


def xla_parse(text: Any, *, source: str = "<text>"):
    """Parse HLO text with XLA's own parser.

    **Arguments:** ``text``, HLO module text (an already parsed jaxlib
    ``HloModule`` is passed through); ``source``, a file name for error messages.

    **Returns:** a ``jaxlib._hlo.HloModule``. Raises ``ValueError`` with XLA's
    message (it names ``line:column``) when the text does not parse, and
    ``RuntimeError`` when jaxlib lacks the parser.
    """
    if not isinstance(text, str):
        if hasattr(text, "computations"):
            return text
        raise TypeError(f"xla_parse expects HLO text, got {type(text).__name__}")
    parse = _hlo_module_from_text()
    try:
        return parse(text)
    except RuntimeError as err:  # jaxlib raises a bare RuntimeError("INVALID_ARGUMENT: ...")
        raise ValueError(f"{source}: XLA could not parse the HLO module: {err}") from None


@dataclass(frozen=True)
class XlaVerdict:
    """What XLA's parser says of a text: accepted, or refused with a message at ``line:column``."""

    accepted: bool
    line: int | None = None
    column: int | None = None
    message: str | None = None


_XLA_ERROR = re.compile(r"was parsing (\d+):(\d+): error: ([^\n]*)")


def xla_verdict(text: str) -> XlaVerdict:
    """Parse ``text`` with XLA's parser and say what it said.

    **Returns:** an ``XlaVerdict``; for a refusal, the first error XLA reports
    (its ``line``/``column`` are None when XLA names no place, e.g. for checks
    made after parsing, and ``message`` is then XLA's whole message).
    """
    try:
        xla_parse(text)
    except ValueError as err:
        m = _XLA_ERROR.search(str(err))
        if m is None:
            return XlaVerdict(False, message=str(err).split("HLO module: ", 1)[-1])
        return XlaVerdict(False, int(m.group(1)), int(m.group(2)), m.group(3).strip())
    return XlaVerdict(True)


def xla_names(text: Any) -> dict[str, list[str]]:
    """Each computation's name and its instructions' names, as XLA's parser makes them unique.

    **Returns:** ``{computation: [instruction, ...]}`` in jaxlib's order
    (computations callees first, instructions in text order).
    """
    module = xla_parse(text)
    return {comp.name: [instr.name for instr in comp.instructions()] for comp in module.computations()}


_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(%{]+)[\s(].*\{\s*$")
_ROOT = re.compile(r"^\s+ROOT\s+%?([^\s=]+)\s*=")


def _entry_and_roots(module) -> tuple[str | None, dict[str, str]]:
    """Entry computation name and each computation's root, read from the printed module."""
    entry, roots, current = None, {}, None
    for line in module.to_string().splitlines():
        if not line or line.startswith("HloModule"):
            continue
        if not line[0].isspace():
            m = _HEADER.match(line)
            if m:
                current = m.group(2)
                if m.group(1):
                    entry = current
            continue
        m = _ROOT.match(line)
        if m and current is not None:
            roots[current] = m.group(1)
    return entry, roots


def split_instruction_text(line: str) -> tuple[str, str, str]:
    """Split ``%name = shape opcode(...)`` as printed by ``HloInstruction.to_string()``.

    **Arguments:** ``line``, one instruction's text.

    **Returns:** ``(name, shape, opcode)``; the shape is everything between
    ``=`` and the opcode at bracket depth zero (tuple shapes included).
    """
    body = line.strip()
    if body.startswith("ROOT "):
        body = body[5:]
    eq = body.find(" = ")
    if eq < 0:
        raise ValueError(f"not an HLO instruction: {line[:80]!r}")
    name = body[:eq].lstrip("%")
    rest = body[eq + 3 :]
    depth = 0
    for i, ch in enumerate(rest):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == " " and depth == 0:
            shape, tail = rest[:i], rest[i + 1 :]
            break
    else:
        raise ValueError(f"no opcode after the shape in {line[:80]!r}")
    paren = tail.find("(")
    opcode = tail[:paren] if paren >= 0 else tail.split(",", 1)[0]
    return name, shape, opcode.strip()


def xla_instructions(text: Any) -> list[dict[str, Any]]:
    """Every instruction of a module as XLA's parser sees it.

    **Arguments:** ``text``, HLO module text (or a parsed ``HloModule``).

    **Returns:** one dict per instruction, computations in jaxlib's order
    (callees first, entry last) and instructions in text order, with keys
    ``computation``, ``is_entry`` (the instruction is in the entry computation),
    ``name``, ``opcode`` (text spelling, e.g. ``get-tuple-element``),
    ``opcode_enum`` (e.g. ``kGetTupleElement``), ``operands`` (names),
    ``shape`` (text, with layout, e.g. ``f32[4,16]{1,0}``), ``is_root`` and
    ``text`` (``HloInstruction.to_string()``).
    """
    module = xla_parse(text)
    entry, roots = _entry_and_roots(module)
    out = []
    for comp in module.computations():
        cname = comp.name
        for instr in comp.instructions():
            line = instr.to_string()
            _, shape, opcode = split_instruction_text(line)
            out.append(
                {
                    "computation": cname,
                    "is_entry": cname == entry,
                    "name": instr.name,
                    "opcode": opcode,
                    "opcode_enum": instr.opcode.name,
                    "operands": [op.name for op in instr.operands()],
                    "shape": shape,
                    "is_root": roots.get(cname) == instr.name,
                    "text": line,
                }
            )
    return out


def xla_cost_analysis(text: Any, client: Any = None) -> dict[str, float]:
    """XLA's ``HloCostAnalysis`` totals for a module, as jaxlib reports them.

    **Arguments:** ``text``, HLO module text (or a parsed ``HloModule``);
    ``client``, a jaxlib ``Client`` (default: the CPU client, whose shape-size
    function uses 8-byte pointers for tuples).

    **Returns:** a dict with at least ``flops``, ``transcendentals`` and
    ``bytes accessed`` (floats), plus per-operand ``bytes accessed{i}{}``,
    ``bytes accessedout{}`` and ``utilization{i}{}`` entries.
    """
    module = xla_parse(text)
    analyse = _hlo_module_cost_analysis()
    result = analyse(client if client is not None else cpu_client(), module)
    return {str(k): float(v) for k, v in dict(result).items()}


def xla_module_to_text(text: Any, style: str = "default") -> str:
    """Re-print a module with XLA's printer.

    **Arguments:** ``text``, HLO module text (or a parsed ``HloModule``);
    ``style``, one of ``"default"`` (``HloPrintOptions()``: ``%`` sigils,
    layouts, metadata), ``"short_parsable"``, ``"canonical"``, ``"fingerprint"``
    or ``"no_metadata"`` (default without metadata and backend configs).

    **Returns:** the printed module text.
    """
    module = xla_parse(text)
    hlo = _hlo_bindings()
    opts_cls = getattr(hlo, "HloPrintOptions", None)
    if opts_cls is None:
        raise RuntimeError("this jaxlib does not expose HloPrintOptions")
    if style == "default":
        opts = opts_cls()
    elif style == "no_metadata":
        opts = opts_cls()
        opts.print_metadata = False
        opts.print_backend_config = False
    elif style in ("short_parsable", "canonical", "fingerprint"):
        opts = getattr(opts_cls, style)()
    else:
        raise ValueError(
            f"unknown print style {style!r}; valid: default, no_metadata, "
            "short_parsable, canonical, fingerprint"
        )
    return module.to_string(opts)
