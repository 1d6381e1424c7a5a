"""regrid against TFLite's SPACE_TO_DEPTH / DEPTH_TO_SPACE kernels through LiteRT
(ai-edge-litert): NHWC, float32, int32, int64, and quantized int8 / uint8 (full-integer quantized
models, whose scale and zero point pass through), with NNAPI's rule set."""
import numpy as np

try:
    from ai_edge_litert.interpreter import Interpreter
    import ai_edge_litert
    import tensorflow as tf
except ImportError as missing:
    raise ImportError(f"oracle ai-edge-litert (with tensorflow-cpu for model conversion) is not installed: {missing}") from missing

import regrid
from conftest import depth_case, random_values, space_case

ORACLE = "tflite (ai-edge-litert)"
TYPES = [np.float32, np.int8, np.uint8, np.int32, np.int64]
QUANTIZED = (np.dtype(np.int8), np.dtype(np.uint8))

_interpreters = {}


def interpreter(to_depth, dtype, block):
    """One converted model per (op, dtype, block), with a fully dynamic input shape."""
    key = (to_depth, np.dtype(dtype).name, block)
    if key not in _interpreters:
        op = tf.nn.space_to_depth if to_depth else tf.nn.depth_to_space
        quantized = np.dtype(dtype) in (np.dtype(np.int8), np.dtype(np.uint8))
        spec = tf.TensorSpec([None, None, None, None], tf.float32 if quantized else tf.as_dtype(dtype))
        function = tf.function(lambda v: op(v, block), input_signature=[spec])
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], function)
        if quantized:  # TFLite's 8-bit kernels run on quantized tensors
            sample = (1, 2 * block, 2 * block, block * block)
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = lambda: ([np.random.default_rng(0).uniform(-4, 4, sample).astype(np.float32)]
                                                         for _ in range(4))
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.as_dtype(dtype)
            converter.inference_output_type = tf.as_dtype(dtype)
        _interpreters[key] = Interpreter(model_content=converter.convert())
    return _interpreters[key]


def run_tflite(to_depth, x, block):
    runner = interpreter(to_depth, x.dtype, block)
    index = runner.get_input_details()[0]["index"]
    runner.resize_tensor_input(index, list(x.shape))
    runner.allocate_tensors()
    runner.set_tensor(index, x)
    runner.invoke()
    return runner.get_tensor(runner.get_output_details()[0]["index"])


def test_tflite_kernels_match(ledger):
    rng = np.random.default_rng(77)
    for index in range(220):
        for to_depth in (True, False):
            block = int(rng.choice([2, 3, 4]))
            dtype = TYPES[index % len(TYPES)]
            shape = (space_case if to_depth else depth_case)(rng, block, "NHWC", 2, divisible=rng.random() > 0.1)
            x = random_values(rng, shape, dtype)
            name = "space_to_depth" if to_depth else "depth_to_space"
            fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
            ledger.compare(name, f"NHWC {np.dtype(dtype).name}", lambda: run_tflite(to_depth, x, block),
                           lambda: fn(x, block, framework="nnapi"), f"{np.dtype(dtype).name} b={block} shape={shape}")
    ledger.assert_all_matched()
