"""This machine's CPU facts and the measured host's cache (an internal API for `measure`, which measures
the host, and `fit`, which checks which machine a calibration's rows were timed on; users get the host
through `get_device("host")` and `describe_machine()`):

- The CPU as the OS reports it: `cpu_model`, `core_count`, `clock_ghz`, `cache_sizes`, `memory_bytes`.
- The machine a calibration records: `machine_record`, `machine_differences`, its facts `MACHINE_FACTS`,
  `UNKNOWN` for one not recorded.
- The measured host's cache: `cached_host`, `save_host_cache`, `host_cache_path`.
"""

from ._host import MACHINE_FACTS as MACHINE_FACTS
from ._host import UNKNOWN as UNKNOWN
from ._host import cache_sizes as cache_sizes
from ._host import cached_host as cached_host
from ._host import clock_ghz as clock_ghz
from ._host import core_count as core_count
from ._host import cpu_model as cpu_model
from ._host import host_cache_path as host_cache_path
from ._host import machine_differences as machine_differences
from ._host import machine_record as machine_record
from ._host import memory_bytes as memory_bytes
from ._host import save_host_cache as save_host_cache
