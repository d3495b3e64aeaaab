"""`python -m xla_costmodel.cli ...`: what `xla-costmodel ...` runs."""

import sys

from . import main

sys.exit(main())
