"""regrid against ONNX Runtime's CPU kernels: DepthToSpace (DCR and CRD), SpaceToDepth and
MaxRoiPool, under regrid's onnx rules and ROI preset."""
import numpy as np

try:
    import onnxruntime as ort
except ImportError as missing:
    raise ImportError(f"oracle onnxruntime is not installed: {missing}") from missing

import regrid
from conftest import depth_case, random_values, space_case
from onnx_models import max_roi_pool_model, space_depth_model

ORACLE = "onnxruntime " + ort.__version__
_sessions = {}


def session(key, build):
    if key not in _sessions:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        _sessions[key] = ort.InferenceSession(build().SerializeToString(), options, providers=["CPUExecutionProvider"])
    return _sessions[key]


def test_space_depth_match_onnxruntime(ledger):
    rng = np.random.default_rng(11)
    for index in range(240):
        for to_depth in (True, False):
            block = int(rng.choice([1, 2, 3, 4]))
            mode = "DCR" if to_depth or index % 2 == 0 else "CRD"
            # ORT's CPU kernels: SpaceToDepth float/double; DepthToSpace float/double, uint8 DCR too.
            types = [np.float32, np.float64] + ([np.uint8] if not to_depth and mode == "DCR" else [])
            dtype = types[index % len(types)]
            shape = (space_case if to_depth else depth_case)(rng, block, "NCHW", 2, divisible=rng.random() > 0.1)
            x = random_values(rng, shape, dtype)
            name = "space_to_depth" if to_depth else "depth_to_space"
            runner = session((to_depth, np.dtype(dtype).name, block, mode),
                             lambda: space_depth_model(to_depth, dtype, block, mode))
            fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
            ledger.compare(name, mode, lambda: runner.run(None, {"x": x})[0],
                           lambda: fn(x, block, mode=mode, framework="onnx"),
                           f"{mode} {np.dtype(dtype).name} b={block} shape={shape}")
    ledger.assert_all_matched()


def random_rois(rng, count, batch, height, width, scale):
    rois = np.empty((count, 5), np.float32)
    rois[:, 0] = rng.integers(0, batch, count)
    span_x, span_y = (width + 6) / scale, (height + 6) / scale
    rois[:, 1] = rng.uniform(-3 / scale, span_x, count)
    rois[:, 2] = rng.uniform(-3 / scale, span_y, count)
    rois[:, 3] = rois[:, 1] + rng.uniform(-2 / scale, span_x / 2, count)  # some malformed (x2 < x1)
    rois[:, 4] = rois[:, 2] + rng.uniform(-2 / scale, span_y / 2, count)
    halves = rng.random(count) < 0.2  # exact .5 products exercise the rounding rule
    rois[halves, 1:] = np.round(rois[halves, 1:] * scale * 2) / (2 * scale)
    return rois


def test_max_roi_pool_matches_onnxruntime(ledger):
    rng = np.random.default_rng(12)
    for index in range(220):
        batch, channels = int(rng.integers(1, 3)), int(rng.integers(1, 20))
        height, width = int(rng.integers(1, 20)), int(rng.integers(1, 20))
        x = random_values(rng, (batch, channels, height, width), np.float32)
        pooled = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
        scale = float(rng.choice([1.0, 0.5, 0.25, 0.0625, 2.0]))
        rois = random_rois(rng, int(rng.integers(1, 8)), batch, height, width, scale)
        if index % 25 == 0:
            rois[0, 0] = batch  # out of range: both must refuse
        runner = session(("roi", pooled, scale), lambda: max_roi_pool_model(pooled, scale))
        ledger.compare("roi_pool", "MaxRoiPool", lambda: runner.run(None, {"x": x, "rois": rois})[0],
                       lambda: regrid.roi_pool(x, rois, pooled, scale, framework="onnx"),
                       f"x={x.shape} rois={rois.tolist()} pooled={pooled} scale={scale}")
    ledger.assert_all_matched()
