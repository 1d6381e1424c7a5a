"""regrid against the ONNX reference evaluator (onnx.reference): DepthToSpace DCR/CRD and
SpaceToDepth over every dtype the operators list."""
import numpy as np

try:
    import onnx
    from onnx.reference import ReferenceEvaluator
except ImportError as missing:
    raise ImportError(f"oracle onnx (reference evaluator) is not installed: {missing}") from missing

import regrid
from conftest import depth_case, random_values, regrid_or_error, same, space_case
from onnx_models import space_depth_model

ORACLE = "onnx reference " + onnx.__version__
TYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]


def test_space_depth_match_onnx_reference(ledger):
    rng = np.random.default_rng(13)
    for index in range(220):
        for to_depth in (True, False):
            block = int(rng.choice([1, 2, 3, 4]))
            mode = "DCR" if to_depth or index % 2 == 0 else "CRD"
            dtype = TYPES[index % len(TYPES)]
            shape = (space_case if to_depth else depth_case)(rng, block, "NCHW", 2)
            x = random_values(rng, shape, dtype)
            expected = ReferenceEvaluator(space_depth_model(to_depth, dtype, block, mode)).run(None, {"x": x})[0]
            fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
            actual, error = regrid_or_error(lambda: fn(x, block, mode=mode, framework="onnx"))
            name = "space_to_depth" if to_depth else "depth_to_space"
            ledger.check(f"{name} {mode}", error is None and same(actual, expected),
                         f"{mode} {np.dtype(dtype).name} b={block} shape={shape}: regrid={error or 'ok'}")
    ledger.assert_all_matched()
