"""regrid: SpaceToDepth, DepthToSpace and ROI max pooling, exactly as the ML frameworks define them.

Every function takes NumPy arrays or any DLPack producer (PyTorch, JAX, ...) without copying,
non-contiguous views included, and returns NumPy arrays (or writes into ``out=``). The dtype is
kept: bool, all integer widths, float16, ``ml_dtypes.bfloat16``, float32/64, complex64/128.
The C++ core runs with the GIL released. Any invalid argument raises ``ValueError`` carrying one
sentence that names the operation, the values and the rule, and nothing is written.

Semantics (b = block_size, K spatial dims, off = block offset, outer spatial dim first)::

    space_to_depth:  y[n, c_d, o_1..o_K] = x[n, c_s, o_1*b + beta_1, ..., o_K*b + beta_K]
    depth_to_space:  y[n, c_s, y_1..y_K] = x[n, c_d, y_1 // b, ..., y_K // b]
    DCR (blocks_first; TF, NNAPI, ONNX default): c_d = off * C_s + c_s
    CRD (depth_first; PyTorch pixel_shuffle):     c_d = c_s * b**K + off

See ``include/regrid/space_depth.hpp`` and ``include/regrid/roi_pool.hpp`` for the full rules.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _regrid

__all__ = [
    "space_to_depth",
    "depth_to_space",
    "output_shape",
    "roi_pool",
    "roi_pool_backward",
    "roi_batch_indices",
    "num_threads",
    "set_num_threads",
    "memory_cache_limit",
    "set_memory_cache_limit",
    "cached_memory_bytes",
    "release_cached_memory",
    "__version__",
]
__version__ = _regrid.version()


def num_threads() -> int:
    """Threads regrid's operators use (REGRID_NUM_THREADS at start-up, else all hardware threads)."""
    return _regrid.num_threads()


def set_num_threads(count: int) -> None:
    """Sets the number of threads (>= 1) regrid's operators use."""
    _regrid.set_num_threads(int(count))


def memory_cache_limit() -> int:
    """Bytes of freed 4 MiB-or-larger results regrid keeps for reuse by the next result of the same size.

    Starts as REGRID_MEMORY_CACHE_MIB (in MiB) at start-up, else 256 MiB; 0 means off.
    """
    return _regrid.memory_cache_limit()


def set_memory_cache_limit(bytes: int) -> None:  # noqa: A002  (the unit is the name users look for)
    """Sets the cache limit in bytes, freeing the oldest cached blocks over it; 0 turns the cache off."""
    _regrid.set_memory_cache_limit(int(bytes))


def cached_memory_bytes() -> int:
    """Bytes the memory cache holds now."""
    return _regrid.cached_memory_bytes()


def release_cached_memory() -> None:
    """Frees every cached block; the limit stays."""
    _regrid.release_cached_memory()


def _bfloat16_dtype():
    try:
        import ml_dtypes
    except ImportError as missing:  # pragma: no cover - depends on the environment
        raise TypeError("bfloat16 arrays need the ml_dtypes package (pip install ml_dtypes)") from missing
    return np.dtype(ml_dtypes.bfloat16)


def _intake(x: Any) -> Tuple[Any, np.dtype, Optional[str]]:
    """Returns (array for the core, NumPy dtype of results, dtype name hint for the core)."""
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":
            return x.view(np.uint16), x.dtype, "bfloat16"
        return x, x.dtype, None
    if hasattr(x, "__dlpack__"):
        try:
            view = np.from_dlpack(x)  # zero-copy, strides kept
            return view, view.dtype, None
        except (TypeError, BufferError, RuntimeError, ValueError):
            if "bfloat16" in str(getattr(x, "dtype", "")):
                return x, _bfloat16_dtype(), "bfloat16"  # the core reads DLPack's bfloat16 directly
            raise
    array = np.asarray(x)
    return _intake(array)


def _empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialized array in regrid's storage (64-byte aligned, reused through the memory cache)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    return _regrid.empty_bytes(count * dtype.itemsize).view(dtype).reshape(tuple(shape))


def _output(out: Any, shape: Sequence[int], dtype: np.dtype, hint: Optional[str]):
    """Returns (array the core writes, array the caller gets)."""
    if out is None:
        result = _empty(shape, dtype)
    else:
        result = out
    if isinstance(result, np.ndarray):
        if not result.flags.writeable:
            raise ValueError("out: the output array is read-only")
        target = result.view(np.uint16) if result.dtype.name == "bfloat16" else result
    else:
        target = result
    return target, result


def output_shape(op: str, shape: Sequence[int], block_size: int, layout: Optional[str] = None,
                 mode: Optional[str] = None, framework: str = "default") -> Tuple[int, ...]:
    """Output shape of ``op`` ("space_to_depth" or "depth_to_space") for an input shape, without data.

    Raises ValueError exactly as the operation would for that shape.
    """
    if op not in ("space_to_depth", "depth_to_space"):
        raise ValueError(f"output_shape: op '{op}' is not space_to_depth or depth_to_space")
    return tuple(_regrid.space_depth_shape(op == "space_to_depth", list(shape), block_size, layout, mode, framework))


def _space_depth(to_depth: bool, x, block_size, layout, mode, framework, out):
    array, dtype, hint = _intake(x)
    shape = _regrid.space_depth_shape(to_depth, list(np.shape(array)) if isinstance(array, np.ndarray)
                                      else list(array.shape), block_size, layout, mode, framework)
    target, result = _output(out, shape, dtype, hint)
    _regrid.space_depth(to_depth, array, target, block_size, layout, mode, framework, hint)
    return result


def space_to_depth(x, block_size: int, layout: Optional[str] = None, mode: Optional[str] = None,
                   framework: str = "default", out=None):
    """Moves spatial blocks into channels (TF SpaceToDepth, ONNX SpaceToDepth, pixel_unshuffle).

    Args:
      x: array of any dtype; layouts "NHWC", "NCHW", "NCHW_VECT_C" ([N, C/4, H, W, 4], 1-byte),
        "channels_first" ([N, C, D1..DK]) or "channels_last" ([N, D1..DK, C]).
      block_size: b; every spatial extent must be divisible by it.
      layout, mode: default to the framework's ("DCR"/"blocks_first" or "CRD"/"depth_first").
      framework: rule set, one of "default", "tf", "onnx", "openvino", "nnapi", "torch", "directml".
      out: optional array (or DLPack tensor) of the output shape and dtype to write into.
    Returns:
      the output array (``out`` when given).
    """
    return _space_depth(True, x, block_size, layout, mode, framework, out)


def depth_to_space(x, block_size: int, layout: Optional[str] = None, mode: Optional[str] = None,
                   framework: str = "default", out=None):
    """Moves channels into spatial blocks (TF DepthToSpace, ONNX DepthToSpace, pixel_shuffle).

    The channel count must be divisible by block_size**K. Arguments as for space_to_depth.
    """
    return _space_depth(False, x, block_size, layout, mode, framework, out)


def _pair(pooled_size) -> Tuple[int, int]:
    if isinstance(pooled_size, (int, np.integer)):
        return int(pooled_size), int(pooled_size)
    height, width = pooled_size
    return int(height), int(width)


def roi_pool(x, rois, pooled_size, spatial_scale: float = 1.0, layout: Optional[str] = None,
             framework: str = "directml", batch_indices=None, return_argmax: bool = False,
             rounding: Optional[str] = None, height_stride: Optional[float] = None,
             width_stride: Optional[float] = None, zero_point: Optional[int] = None,
             scale: Optional[float] = None, out=None):
    """ROI max pooling (Fast R-CNN RoIPool), DirectML semantics by default.

    Per ROI r, channel c and cell (ph, pw): corners round(coordinate * spatial_scale), region
    RH = y2 - y1 + 1, bins [y1 + floor(ph*RH/PH), y1 + ceil((ph+1)*RH/PH)) clamped to the image
    (the framework presets change the bin arithmetic, rounding, NaN rule and validation), and
    out = max over the bin; an empty bin gives 0 (the zero point for quantized data).

    Args:
      x: [N, C, H, W] ("NCHW") or [N, H, W, C] ("NHWC", the nnapi default); float32, float16,
        bfloat16, float64, or uint8/int8 with ``zero_point`` under "nnapi".
      rois: [R, 5] rows [batch, x1, y1, x2, y2] in x's dtype ([1, 1, R, 5] also taken); under
        "nnapi" [R, 4] rows [x1, y1, x2, y2] plus int32 ``batch_indices`` [R] (uint16 quant16 ROIs
        with scale 0.125 for quantized input).
      pooled_size: PH or (PH, PW).
      framework: "directml", "onnx", "caffe", "torchvision", "nnapi" or "openvino".
      rounding: "half_away_from_zero" or "half_to_even" overrides the preset's.
      height_stride, width_stride: nnapi's scales as image / feature size.
      return_argmax: also return int32 argmax (h * W + w within the plane, -1 for an empty bin).
    Returns:
      output, or (output, argmax).
    """
    height, width = _pair(pooled_size)
    array, dtype, hint = _intake(x)
    box_array, _, _ = _intake(rois)
    indices = None if batch_indices is None else _intake(batch_indices)[0]
    if zero_point is not None or scale is not None:
        if dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
            raise ValueError(f"roi_pool: zero_point needs uint8 or int8 input, got {dtype}")
        hint = "quint8" if dtype == np.dtype(np.uint8) else "qint8"
    roi_count = np.shape(box_array)[-2] if np.ndim(box_array) >= 2 else 0
    shape = _regrid.roi_pool_shape(list(np.shape(array)), int(roi_count), height, width, layout, framework)
    target, result = _output(out, shape, dtype, hint)
    argmax = _empty(shape, np.int32) if return_argmax else None
    _regrid.roi_pool(array, box_array, target, argmax, indices, height, width, float(spatial_scale), layout, framework,
                     rounding, height_stride, width_stride, hint, scale, zero_point)
    return (result, argmax) if return_argmax else result


def roi_batch_indices(rois, batch: int, framework: str = "directml", batch_indices=None):
    """The validated batch index of each ROI as an int64 array [R] (what roi_pool_backward needs)."""
    box_array, _, hint = _intake(rois)
    indices = None if batch_indices is None else _intake(batch_indices)[0]
    return np.asarray(_regrid.roi_batch_indices(box_array, int(batch), indices, framework, hint), dtype=np.int64)


def roi_pool_backward(grad_output, argmax, input_shape: Sequence[int], layout: str = "NCHW", rois=None,
                      framework: str = "directml", batch_indices=None):
    """Gradient of roi_pool with respect to its input, from the output gradient and the argmax.

    grad_input[b_r, c].flat[argmax] += grad_output, accumulated in the gradient's dtype in the
    order ROI, channel, ph, pw (torchvision's). The ROIs' batch indices come from ``rois`` (and
    ``batch_indices`` under nnapi); they may be omitted when the batch is 1.
    """
    grad_array, dtype, hint = _intake(grad_output)
    argmax_array = _intake(argmax)[0]
    roi_batch = None
    if rois is not None:
        roi_batch = roi_batch_indices(rois, int(input_shape[0]), framework, batch_indices)
    result = _regrid.roi_pool_backward(grad_array, argmax_array, [int(v) for v in input_shape], roi_batch, layout, hint)
    return result.view(dtype) if hint == "bfloat16" else result
