"""Figures: predicted against measured time, the roofline, error per model, fusion savings; and
`readable(table)`, a table shown with its times in µs (or ns, ms), counts as integers.

Every function draws with matplotlib on `ax` (or a new figure when `ax` is
None), never calls `plt.show()`, and returns the Axes, so notebooks can
arrange them and tests can inspect the artists. Metrics in annotations come
from `xla_costmodel.fit.accuracy`, as in `compare`'s tables.
"""

from ._bars import error_by_model as error_by_model
from ._common import decade_limits as decade_limits
from ._bars import fusion_savings as fusion_savings
from ._roofline import roofline as roofline
from ._scatter import predicted_vs_measured as predicted_vs_measured
from ._tables import readable as readable

__all__ = ["decade_limits", "error_by_model", "fusion_savings", "predicted_vs_measured", "readable", "roofline"]
