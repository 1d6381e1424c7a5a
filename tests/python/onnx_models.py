"""Single-node ONNX models for the ONNX Runtime and ONNX reference oracles."""
import numpy as np

from onnx import TensorProto, helper

# IR version 8 is read by every onnxruntime of the last years (the newest onnx writes 14).
IR_VERSION = 8

ELEMENT_TYPE = {
    np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint16): TensorProto.UINT16, np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64, np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.complex64): TensorProto.COMPLEX64, np.dtype(np.complex128): TensorProto.COMPLEX128,
}


def space_depth_model(to_depth, dtype, block, mode, opset=13):
    attributes = {"blocksize": block}
    if not to_depth:
        attributes["mode"] = mode
    node = helper.make_node("SpaceToDepth" if to_depth else "DepthToSpace", ["x"], ["y"], **attributes)
    element = ELEMENT_TYPE[np.dtype(dtype)]
    graph = helper.make_graph([node], "regrid_conformance", [helper.make_tensor_value_info("x", element, None)],
                              [helper.make_tensor_value_info("y", element, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def max_roi_pool_model(pooled, scale):
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=list(pooled), spatial_scale=scale)
    graph = helper.make_graph([node], "regrid_conformance",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("rois", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
