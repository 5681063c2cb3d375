"""The mean of a sample with its 95% Student-t interval, as evaluations,
sweeps and the results page report it. Imports only numpy."""

import math
from typing import Sequence, Tuple

import numpy as np

# Student's t 0.975 quantiles for 1..30 degrees of freedom.
_T_975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912,
          2.364624, 2.306004, 2.262157, 2.228139, 2.200985, 2.178813,
          2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922,
          2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
          2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
_Z_975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
  """Student's t 0.975 quantile with `df` degrees of freedom (the table to
  30, then the Cornish-Fisher expansion, within 1e-5); nan for df < 1."""
  if df < 1:
    return math.nan
  if df <= len(_T_975):
    return _T_975[df - 1]
  z = _Z_975
  return (z + (z**3 + z) / (4 * df)
          + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
          + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def mean_interval(values: Sequence[float]) -> Tuple[float, float, float]:
  """(mean, low, high): the mean of `values` and its 95% interval, mean ±
  t(0.975, n - 1) · s / √n with s the sample standard deviation. The bounds
  are nan for fewer than two values, the mean for none."""
  x = np.asarray(values, dtype=np.float64)
  if x.size == 0:
    return math.nan, math.nan, math.nan
  mean = float(x.mean())
  if x.size < 2:
    return mean, math.nan, math.nan
  half = t_quantile_975(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
  return mean, mean - half, mean + half
