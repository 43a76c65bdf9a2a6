"""The 95 % Wilson interval the result scripts share (`from intervals import wilson`: a
script's own folder is first on Python's path when it runs)."""
import math


def wilson(k, n, z=1.96):
    """The Wilson score interval of k successes in n, as (low, high); NaN for n = 0."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def mcnemar_exact(gained, lost):
    """The two-sided exact McNemar p of paired outcomes: `gained` tasks right only in the
    second, `lost` only in the first (a binomial test of the discordant pairs at 1/2)."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2 ** n
    return min(1.0, 2 * tail)
