"""Shared test helpers: fixture discovery and XLA's own parser as the oracle."""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "hlo_fixtures"

# The tests read and write calibrations and datasets in a data directory of their own (empty at
# the start), never in the user's (`datasets.user_data_dir()`): what a user calibrated must not
# change what the tests see, nor the tests what the user has. Subprocesses inherit it.
_DATA_DIR = tempfile.mkdtemp(prefix="xla_costmodel_test_data_")
os.environ["XLA_COSTMODEL_DATA_DIR"] = _DATA_DIR
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)

# One memory-bound elementwise kernel (8 MiB read, 4 MiB written), priced by several test modules.
ADD = """HloModule t
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  ROOT c = f32[1024,1024]{1,0} add(a, b)
}"""


def load_temp_install():
    """`tests/plugin_example/temp_install.py` as a module (tests/ is not a package)."""
    name = "_xla_costmodel_plugin_temp_install"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "plugin_example" / "temp_install.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def load_script(name: str):
    """`scripts/<name>.py` as a module (scripts/ is not a package), for tests of the benchmarks and converters."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture_paths(pattern: str = "*.hlo") -> list[Path]:
    return sorted(FIXTURES.glob(pattern))


def fixture_ids(paths) -> list[str]:
    return [p.name for p in paths]


_XLA_LINE = re.compile(r"\s*(?:ROOT )?%(\S+) = (.*?) ([a-z][a-z0-9\-]*)\(")
_INDEX_COMMENT = re.compile(r"/\*index=\d+\*/")


def xla_instruction_view(text: str) -> dict:
    """{(computation, instruction): (opcode, operand names, shape text)} as XLA's own parser reads `text`."""
    from jax._src.lib import hlo as xla_hlo

    module = xla_hlo.hlo_module_from_text(text)
    view = {}
    for comp in module.computations():
        for instr in comp.instructions():
            m = _XLA_LINE.match(instr.to_string())
            assert m, instr.to_string()
            view[(comp.name, instr.name)] = (
                m.group(3),
                [op.name for op in instr.operands()],
                _INDEX_COMMENT.sub("", m.group(2)),
            )
    return view


def our_instruction_view(module) -> dict:
    return {
        (comp.name, instr.name): (instr.opcode, [op.name for op in instr.operands], str(instr.shape))
        for comp in module.computations
        for instr in comp.instructions
    }


@pytest.fixture(scope="session")
def xla_view():
    return xla_instruction_view


def module_signature(module) -> tuple:
    """Everything a parse decides, as plain data: for comparing two readings of one text."""
    comps = []
    for comp in module.computations:
        instrs = []
        for instr in comp.instructions:
            instrs.append(
                (
                    instr.name,
                    instr.opcode,
                    instr.shape,
                    str(instr.shape),
                    tuple(op.name for op in instr.operands),
                    tuple(user.name for user in instr.users),
                    instr.parameter_number,
                    instr.literal_text,
                    tuple(instr.raw_attributes.items()),
                    tuple(c.name for c in instr.called_computations),
                )
            )
        comps.append((comp.name, comp.is_entry, comp.execution_thread, comp.root.name, tuple(instrs)))
    return (module.name, tuple(module.header_attributes.items()), module._stack_frame_text, module.entry.name, tuple(comps))


def _test_cpu():
    from xla_costmodel.devices import DeviceSpec

    return DeviceSpec(
        name="test-cpu", kind="cpu", core_count=2, fpus_per_core=8, clock_rate_ghz=2.0,
        memory_bandwidth_bytes_per_s=1e10, l1_cache_bytes_per_core=32768, l2_cache_bytes=1 << 20,
        l3_cache_bytes=32 << 20, kernel_launch_overhead_s=3e-7,
        peak_matmul_flops_per_s={"f32": 1e11},
    )


# A small made-up CPU for the fitting tests (fixed numbers, unlike the measured host).
TEST_CPU = _test_cpu()
