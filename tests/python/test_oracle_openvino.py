"""regrid against OpenVINO's CPU plugin: DepthToSpace-1 / SpaceToDepth-1 in both modes for
K = 1, 2, 3 spatial dims, and ROIPooling (method max), including its -1 batch sentinel."""
import numpy as np

try:
    import openvino as ov
    import openvino.opset1 as opset1
    import openvino.opset2 as opset2
except ImportError as missing:
    raise ImportError(f"oracle openvino is not installed: {missing}") from missing

import regrid
from conftest import depth_case, random_values, regrid_or_error, same, space_case

ORACLE = "openvino " + ov.__version__.split("-")[0]
TYPES = {np.dtype(np.float32): ov.Type.f32, np.dtype(np.float16): ov.Type.f16, np.dtype(np.int8): ov.Type.i8,
         np.dtype(np.uint8): ov.Type.u8, np.dtype(np.int32): ov.Type.i32}
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
_core = ov.Core()
_compiled = {}


def compiled(key, build):
    if key not in _compiled:
        _compiled[key] = _core.compile_model(build(), "CPU", CONFIG)
    return _compiled[key]


def space_depth_model(to_depth, dtype, rank, block, mode):
    parameter = ov.op.Parameter(TYPES[np.dtype(dtype)], ov.PartialShape([-1] * rank))
    op = opset1.space_to_depth if to_depth else opset1.depth_to_space
    return ov.Model([op(parameter, mode, block)], [parameter])


def test_space_depth_match_openvino(ledger):
    rng = np.random.default_rng(21)
    types = list(TYPES)
    for index in range(240):
        for to_depth in (True, False):
            spatial_rank = 1 + index % 3
            block = int(rng.choice([1, 2, 3])) if spatial_rank == 3 else int(rng.choice([1, 2, 3, 4]))
            mode = "blocks_first" if rng.random() < 0.5 else "depth_first"
            dtype = types[index % len(types)]
            shape = (space_case if to_depth else depth_case)(rng, block, "channels_first", spatial_rank)
            x = random_values(rng, shape, dtype)
            runner = compiled((to_depth, np.dtype(dtype).name, len(shape), block, mode),
                              lambda: space_depth_model(to_depth, dtype, len(shape), block, mode))
            expected = runner(x)[0]
            fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
            actual, error = regrid_or_error(lambda: fn(x, block, mode=mode, framework="openvino"))
            name = "space_to_depth" if to_depth else "depth_to_space"
            ledger.check(f"{name} K={spatial_rank} {mode}", error is None and same(actual, expected),
                         f"{mode} {np.dtype(dtype).name} b={block} shape={shape}: regrid={error or 'ok'}")
    ledger.assert_all_matched()


def roi_model(pooled, scale):
    x = ov.op.Parameter(ov.Type.f32, ov.PartialShape([-1, -1, -1, -1]))
    rois = ov.op.Parameter(ov.Type.f32, ov.PartialShape([-1, 5]))
    return ov.Model([opset2.roi_pooling(x, rois, output_roi=list(pooled), spatial_scale=scale, method="max")], [x, rois])


def test_roi_pooling_matches_openvino(ledger):
    rng = np.random.default_rng(22)
    for index in range(220):
        batch, channels = int(rng.integers(1, 3)), int(rng.integers(1, 40))
        height, width = int(rng.integers(1, 16)), int(rng.integers(1, 16))
        x = random_values(rng, (batch, channels, height, width), np.float32)
        pooled = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
        scale = float(rng.choice([1.0, 0.5, 0.25, 0.0625]))
        count = int(rng.integers(1, 8))
        rois = np.empty((count, 5), np.float32)
        rois[:, 0] = rng.integers(0, batch, count)
        rois[:, 1] = rng.uniform(-3, width + 3, count) / scale
        rois[:, 2] = rng.uniform(-3, height + 3, count) / scale
        rois[:, 3] = rois[:, 1] + rng.uniform(-2, width / 2, count) / scale
        rois[:, 4] = rois[:, 2] + rng.uniform(-2, height / 2, count) / scale
        if index % 10 == 0:
            rois[int(rng.integers(0, count)), 0] = -1  # the sentinel: zeros from here on
        expected = compiled(("roi", pooled, scale), lambda: roi_model(pooled, scale))([x, rois])[0]
        actual, error = regrid_or_error(lambda: regrid.roi_pool(x, rois, pooled, scale, framework="openvino"))
        ledger.check("roi_pool ROIPooling max", error is None and same(actual, expected),
                     f"x={x.shape} rois={rois.tolist()} pooled={pooled} scale={scale}: regrid={error or 'ok'}")
    ledger.assert_all_matched()
