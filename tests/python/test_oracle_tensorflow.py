"""regrid against TensorFlow: tf.nn.space_to_depth / depth_to_space, NHWC on the CPU kernels,
NCHW and NCHW_VECT_C through XLA (jit_compile=True) where the CPU kernels refuse them."""
import numpy as np

try:
    import tensorflow as tf
except ImportError as missing:  # the suite fails, it never skips an oracle
    raise ImportError(f"oracle tensorflow-cpu is not installed: {missing}") from missing

import ml_dtypes

import regrid
from conftest import depth_case, random_values, regrid_or_error, space_case

ORACLE = "tensorflow " + tf.__version__
CPU_TYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
             np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128]
XLA_TYPES = [np.int8, np.int32, np.uint8, np.float16, ml_dtypes.bfloat16, np.float32, np.float64]

_xla = {}


def tf_op(to_depth, data_format, block):
    key = (to_depth, data_format, block)
    if key not in _xla:
        op = tf.nn.space_to_depth if to_depth else tf.nn.depth_to_space
        _xla[key] = tf.function(lambda v: op(v, block, data_format=data_format), jit_compile=True)
    return _xla[key]


def run_case(ledger, rng, to_depth, index):
    layout = ["NHWC", "NHWC", "NCHW", "NCHW_VECT_C"][index % 4]
    block = int(rng.choice([2, 2, 3, 4]))
    divisible = rng.random() > 0.1
    if layout == "NCHW_VECT_C":
        dtype = np.int8
    elif layout == "NCHW":
        dtype = XLA_TYPES[int(rng.integers(len(XLA_TYPES)))]
    else:
        dtype = CPU_TYPES[int(rng.integers(len(CPU_TYPES)))]
    make = space_case if to_depth else depth_case
    shape = make(rng, block, layout, 2, divisible=divisible)
    x = random_values(rng, shape, dtype)
    name = "space_to_depth" if to_depth else "depth_to_space"

    def oracle():
        if layout == "NHWC":
            return (tf.nn.space_to_depth if to_depth else tf.nn.depth_to_space)(x, block).numpy()
        return tf_op(to_depth, layout, block)(x).numpy()

    fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
    ledger.compare(name, layout, oracle, lambda: fn(x, block, layout=layout, framework="tf"),
                   f"{layout} {np.dtype(dtype).name} b={block} shape={shape}")


def test_space_to_depth_and_depth_to_space_match_tensorflow(ledger):
    rng = np.random.default_rng(2024)
    for index in range(440):
        run_case(ledger, rng, True, index)
        run_case(ledger, rng, False, index)
    # block_size 1 is below TensorFlow's minimum of 2: both refuse.
    x = np.zeros((1, 2, 2, 4), np.float32)
    for to_depth in (True, False):
        op = tf.nn.space_to_depth if to_depth else tf.nn.depth_to_space
        try:
            op(x, 1)
            refused = False
        except (tf.errors.InvalidArgumentError, ValueError):
            refused = True
        _, error = regrid_or_error(lambda: (regrid.space_to_depth if to_depth else regrid.depth_to_space)(x, 1, framework="tf"))
        ledger.check(("space_to_depth" if to_depth else "depth_to_space") + " (rejections)", refused and error is not None,
                     f"block_size 1: tf refused={refused} regrid={error}")
    ledger.assert_all_matched()
