"""regrid against PyTorch and torchvision (Debian's python3-torch / python3-torchvision):
pixel_shuffle / pixel_unshuffle with any leading dims and dtypes, and torchvision's roi_pool
forward (values and argmax) and backward."""
import numpy as np

try:
    import torch
    import torchvision  # noqa: F401  (registers torch.ops.torchvision)
except ImportError as missing:
    raise ImportError(f"oracle torch / torchvision is not installed (Debian python3-torchvision): {missing}") from missing

import ml_dtypes

import regrid
from conftest import random_values, regrid_or_error, same

ORACLE = f"torch {torch.__version__} / torchvision {torchvision.__version__}"
TYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int16, np.int32, np.int64,
         np.bool_, np.complex64]


def to_torch(x):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def to_numpy(t, like):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(like.dtype)
    return t.contiguous().numpy()


def test_pixel_shuffle_and_unshuffle_match(ledger):
    rng = np.random.default_rng(31)
    for index in range(230):
        for to_depth in (True, False):
            factor = int(rng.choice([1, 2, 3, 4]))
            leading = [int(rng.integers(1, 3)) for _ in range(int(rng.integers(0, 3)))]
            dtype = TYPES[index % len(TYPES)]
            if to_depth:
                shape = leading + [int(rng.integers(1, 4)), factor * int(rng.integers(1, 4)), factor * int(rng.integers(1, 4))]
                if rng.random() < 0.1:
                    shape[-1] += 1 if factor > 1 else 0
            else:
                shape = leading + [factor * factor * int(rng.integers(1, 4)) + (1 if rng.random() < 0.1 and factor > 1 else 0),
                                   int(rng.integers(1, 4)), int(rng.integers(1, 4))]
            x = random_values(rng, shape, dtype)
            op = torch.nn.functional.pixel_unshuffle if to_depth else torch.nn.functional.pixel_shuffle
            fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
            ledger.compare("space_to_depth" if to_depth else "depth_to_space",
                           "pixel_unshuffle" if to_depth else "pixel_shuffle",
                           lambda: to_numpy(op(to_torch(x), factor), x), lambda: fn(x, factor, framework="torch"),
                           f"{np.dtype(dtype).name} r={factor} shape={shape}")
    ledger.assert_all_matched()


def test_roi_pool_forward_and_backward_match_torchvision(ledger):
    rng = np.random.default_rng(32)
    for index in range(210):
        dtype = [np.float32, np.float64, np.float16][index % 3]
        batch, channels = int(rng.integers(1, 3)), int(rng.integers(1, 24))
        height, width = int(rng.integers(1, 16)), int(rng.integers(1, 16))
        x = random_values(rng, (batch, channels, height, width), dtype)
        # Small integers make ties common; NaN and -inf come from random_values.
        x = np.where(np.isfinite(x), np.round(x / 40), x).astype(dtype)
        pooled = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
        scale = float(rng.choice([1.0, 0.5, 0.25, 0.0625]))
        count = int(rng.integers(1, 8))
        rois = np.empty((count, 5), dtype)
        rois[:, 0] = rng.integers(0, batch, count)
        rois[:, 1] = rng.uniform(-3, width + 3, count) / scale
        rois[:, 2] = rng.uniform(-3, height + 3, count) / scale
        rois[:, 3] = rois[:, 1] + rng.uniform(-2, width / 2, count) / scale
        rois[:, 4] = rois[:, 2] + rng.uniform(-2, height / 2, count) / scale
        tx, troi = torch.from_numpy(x), torch.from_numpy(rois)
        expected, expected_argmax = torch.ops.torchvision.roi_pool(tx, troi, scale, pooled[0], pooled[1])
        actual, argmax = regrid.roi_pool(x, rois, pooled, scale, framework="torchvision", return_argmax=True)
        name = np.dtype(dtype).name
        detail = f"{name} x={x.shape} rois={rois.tolist()} pooled={pooled} scale={scale}"
        ledger.check(f"roi_pool forward {name}", same(actual, expected.numpy()) and same(argmax, expected_argmax.numpy()),
                     detail)
        grad = np.round(random_values(rng, actual.shape, np.float64)).astype(dtype)
        grad = np.where(np.isfinite(grad), grad, 1).astype(dtype)
        expected_grad = torch.ops.torchvision._roi_pool_backward(
            torch.from_numpy(grad), troi, expected_argmax, scale, pooled[0], pooled[1], batch, channels, height, width)
        actual_grad, error = regrid_or_error(
            lambda: regrid.roi_pool_backward(grad, argmax, x.shape, rois=rois, framework="torchvision"))
        ledger.check(f"roi_pool_backward {name}", error is None and same(actual_grad, expected_grad.numpy()),
                     f"{detail}: regrid={error or 'ok'}")
    ledger.assert_all_matched()
