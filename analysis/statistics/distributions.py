"""The distributions the views test with: Student's t, the normal, chi-squared, F, and Spearman's rank test.

They are scipy.special's functions, which scipy.stats's distributions call too, to the last digit here.
Importing scipy.stats takes a fresh process about 0.3 s of a CPU more than scipy.special.
Every command that prints a view would pay it.
"""

import math

import numpy as np
from scipy import special


def t_ppf(q: float, df: float) -> float:
    """Student's t quantile: scipy.stats.t.ppf(q, df)."""
    return float(special.stdtrit(df, q))


def t_sf(x: float, df: float) -> float:
    """Student's t survival function, P(T > x): scipy.stats.t.sf(x, df)."""
    return float(special.stdtr(df, -x))


def norm_sf(z: float) -> float:
    """The standard normal's survival function, P(Z > z): scipy.stats.norm.sf(z)."""
    return float(special.ndtr(-z))


def norm_ppf(q: float) -> float:
    """The standard normal's quantile: scipy.stats.norm.ppf(q)."""
    return float(special.ndtri(q))


def chi2_ppf(q: float, df: float) -> float:
    """The chi-squared quantile: scipy.stats.chi2.ppf(q, df), its inverse regularized gamma function."""
    return float(2 * special.gammaincinv(df / 2, q))


def f_ppf(q: float, dfn: float, dfd: float) -> float:
    """The F quantile: scipy.stats.f.ppf(q, dfn, dfd)."""
    return float(special.fdtri(dfn, dfd, q))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank."""
    _, where, counts = np.unique(values, return_inverse=True, return_counts=True)
    below = np.cumsum(counts) - counts
    return (below + (counts + 1) / 2)[where.ravel()]


def spearman_rho(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> float:
    """Spearman's rank correlation: NaN where either side has a single rank."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.clip(np.corrcoef(rx, ry)[0, 1], -1.0, 1.0))


def spearman(x: np.ndarray | list[float], y: np.ndarray | list[float]) -> tuple[float, float]:
    """Spearman's rank correlation and its two-sided p-value: scipy.stats.spearmanr(x, y) for 3 pairs or more.

    The p-value is the t approximation's, with n - 2 degrees of freedom.
    Both are NaN where either side is constant or holds a NaN, and for fewer than 3 pairs.
    """
    if len(x) < 3 or np.isnan(x).any() or np.isnan(y).any():
        return math.nan, math.nan
    rho = spearman_rho(x, y)
    if math.isnan(rho):
        return math.nan, math.nan
    df = len(x) - 2
    if abs(rho) == 1.0:
        return rho, 0.0
    t = rho * math.sqrt(df / ((1 + rho) * (1 - rho)))
    return rho, 2 * t_sf(abs(t), df)
