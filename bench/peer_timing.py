"""Timing shared by the peer comparison scripts."""
import statistics
import time


def median_ms(fn, repeat):
    """Median wall time of fn() in milliseconds over `repeat` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
