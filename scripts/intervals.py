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


def newcombe(k1, n1, k2, n2, z=1.96):
    """Newcombe's 95 % hybrid score interval of the difference k2/n2 − k1/n1 (method 10), as
    (low, high): the interval the host's `onebrain compare` reports."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p2 - p1
    return (d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2), d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2))


def p_text(p):
    """An exact p as the reports print it: three decimals, or its order where that reads 0."""
    return f"p = {p:.3f}" if p >= 0.001 else f"p = {p:.1e}"
