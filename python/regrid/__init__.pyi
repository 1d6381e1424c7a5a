from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

ArrayLike = Any  # numpy.ndarray or any DLPack producer (torch.Tensor, jax.Array, ...)

def output_shape(op: str, shape: Sequence[int], block_size: int, layout: Optional[str] = ...,
                 mode: Optional[str] = ..., framework: str = ...) -> Tuple[int, ...]: ...
def space_to_depth(x: ArrayLike, block_size: int, layout: Optional[str] = ..., mode: Optional[str] = ...,
                   framework: str = ..., out: Optional[ArrayLike] = ...) -> np.ndarray: ...
def depth_to_space(x: ArrayLike, block_size: int, layout: Optional[str] = ..., mode: Optional[str] = ...,
                   framework: str = ..., out: Optional[ArrayLike] = ...) -> np.ndarray: ...
def roi_pool(x: ArrayLike, rois: ArrayLike, pooled_size: Union[int, Tuple[int, int]], spatial_scale: float = ...,
             layout: Optional[str] = ..., framework: str = ..., batch_indices: Optional[ArrayLike] = ...,
             return_argmax: bool = ..., rounding: Optional[str] = ..., height_stride: Optional[float] = ...,
             width_stride: Optional[float] = ..., zero_point: Optional[int] = ..., scale: Optional[float] = ...,
             out: Optional[ArrayLike] = ...) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]: ...
def roi_batch_indices(rois: ArrayLike, batch: int, framework: str = ...,
                      batch_indices: Optional[ArrayLike] = ...) -> np.ndarray: ...
def roi_pool_backward(grad_output: ArrayLike, argmax: ArrayLike, input_shape: Sequence[int], layout: str = ...,
                      rois: Optional[ArrayLike] = ..., framework: str = ...,
                      batch_indices: Optional[ArrayLike] = ...) -> np.ndarray: ...
