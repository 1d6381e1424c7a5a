"""Shared pieces of the conformance suite: seeded case generators and a ledger that counts, per
oracle and operation, the cases run and matched, printed at the end of the run."""
import collections
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

_ledger = collections.OrderedDict()


class Ledger:
    """Counts outcomes per (oracle, op); `check` records one case and keeps its failure text."""

    def __init__(self, oracle):
        self.oracle = oracle
        self.failures = []

    def check(self, op, matched, detail=""):
        entry = _ledger.setdefault((self.oracle, op), [0, 0])
        entry[0] += 1
        entry[1] += int(bool(matched))
        if not matched:
            self.failures.append(f"{op}: {detail}")

    def compare(self, op, variant, oracle, regrid_call, detail):
        """Runs both sides of one case. oracle() returns the expected array or raises; regrid_call()
        returns regrid's. Both refusing counts as a match under "<op> (rejections)"."""
        try:
            expected, oracle_error = oracle(), None
        except Exception as error:  # each framework raises its own exception types
            expected, oracle_error = None, str(error).splitlines()[0] if str(error) else type(error).__name__
        actual, error = regrid_or_error(regrid_call)
        detail = f"{detail}: oracle={oracle_error or 'ok'} regrid={error or 'ok'}"
        if oracle_error is not None or error is not None:
            self.check(f"{op} (rejections)", oracle_error is not None and error is not None, detail)
        else:
            self.check(f"{op} {variant}", same(actual, expected), detail)

    def assert_all_matched(self, minimum_cases=200):
        # Entries are "<op> <variant>"; the minimum applies to each op over all its variants.
        totals = collections.Counter()
        for (oracle, op), (run, _) in _ledger.items():
            if oracle == self.oracle:
                totals[op.split(" ")[0]] += run
        for op, run in totals.items():
            assert run >= minimum_cases, f"{self.oracle} {op}: only {run} cases ran, at least {minimum_cases} are required"
        assert not self.failures, f"{len(self.failures)} mismatches, first ones:\n" + "\n".join(self.failures[:10])


@pytest.fixture
def ledger(request):
    return Ledger(request.module.ORACLE)


def pytest_terminal_summary(terminalreporter):
    if not _ledger:
        return
    terminalreporter.section("conformance: cases per oracle")
    terminalreporter.write_line(f"{'oracle':28} {'op':34} {'cases':>6} {'matched':>8}")
    for (oracle, op), (run, matched) in _ledger.items():
        terminalreporter.write_line(f"{oracle:28} {op:34} {run:6d} {matched:8d}")


def same(a, b):
    """Bit-identical: same dtype, shape and bytes (NaN payloads and -0.0 included)."""
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def random_values(rng, shape, dtype):
    """Random data of every bit pattern for integers; for floats a mix of ordinary values, NaN,
    +-inf and -0.0."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    if dtype.kind == "c":
        values = np.empty(shape, dtype=dtype)
        values.real = random_values(rng, shape, values.real.dtype)
        values.imag = random_values(rng, shape, values.real.dtype)
        return values
    values = rng.standard_normal(size=shape) * 100
    special = rng.random(size=shape)
    values = np.where(special < 0.02, np.nan, values)
    values = np.where((special >= 0.02) & (special < 0.03), -np.inf, values)
    values = np.where((special >= 0.03) & (special < 0.04), -0.0, values)
    return values.astype(dtype)


def space_case(rng, block, layout, spatial_rank, batch_dims=1, divisible=True, channels=None):
    """A space-side shape [N, C, D...] / [N, D..., C] / [N, C/4, H, W, 4] for block b."""
    coarse = [int(rng.integers(1, 4)) for _ in range(spatial_rank)]
    spatial = [o * block for o in coarse]
    if not divisible:
        spatial[int(rng.integers(0, spatial_rank))] += int(rng.integers(1, block)) if block > 1 else 0
    c = channels if channels is not None else int(rng.integers(1, 6))
    batch = [int(rng.integers(1, 3)) for _ in range(batch_dims)]
    if layout in ("NHWC", "channels_last"):
        return batch + spatial + [c]
    if layout == "NCHW_VECT_C":
        return batch + [c] + spatial + [4]
    return batch + [c] + spatial


def depth_case(rng, block, layout, spatial_rank, batch_dims=1, divisible=True):
    """A depth-side shape whose channel count is a multiple of block**K (or not, on request)."""
    coarse = [int(rng.integers(1, 4)) for _ in range(spatial_rank)]
    small = int(rng.integers(1, 4))
    c = small * block ** spatial_rank
    if not divisible:
        c += int(rng.integers(1, block ** spatial_rank)) if block > 1 else 0
    batch = [int(rng.integers(1, 3)) for _ in range(batch_dims)]
    if layout in ("NHWC", "channels_last"):
        return batch + coarse + [c]
    if layout == "NCHW_VECT_C":
        return batch + [c] + coarse + [4]
    return batch + [c] + coarse


def regrid_or_error(fn):
    """(result, None) or (None, message) for a regrid call."""
    try:
        return fn(), None
    except ValueError as error:
        return None, str(error)
