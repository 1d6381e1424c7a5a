"""The Python API itself: NumPy and DLPack intake without copies, strided views, out=, dtypes,
errors, shape inference and the GIL-free core."""
import threading

import ml_dtypes
import numpy as np
import pytest

import regrid


def test_seed_examples_through_python():
    x = np.array([[[[1], [2], [5], [6]], [[3], [4], [7], [8]], [[9], [10], [13], [14]], [[11], [12], [15], [16]]]])
    y = regrid.space_to_depth(x, 2, framework="tf")
    assert y.shape == (1, 2, 2, 4)
    assert y.ravel().tolist() == list(range(1, 17))
    assert np.array_equal(regrid.depth_to_space(y, 2, framework="tf"), x)
    assert regrid.output_shape("depth_to_space", (5, 28, 2, 3), 2, framework="openvino") == (5, 7, 4, 6)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float16, np.float32,
                                   np.float64, np.complex64, np.complex128, ml_dtypes.bfloat16])
def test_dtypes_are_kept(dtype):
    x = (np.arange(2 * 8 * 3 * 3) % 7).astype(dtype).reshape(2, 8, 3, 3)
    y = regrid.depth_to_space(x, 2, mode="CRD")
    assert y.dtype == np.dtype(dtype)
    assert np.array_equal(regrid.space_to_depth(y, 2, mode="CRD").view(np.uint8), x.view(np.uint8))


def test_strided_views_and_out():
    base = np.arange(2 * 16 * 6 * 6, dtype=np.float32).reshape(2, 16, 6, 6)
    view = base[:, ::2, :, ::-1]  # channel slice and a reversed axis
    expected = regrid.space_to_depth(np.ascontiguousarray(view), 2, mode="CRD")
    assert np.array_equal(regrid.space_to_depth(view, 2, mode="CRD"), expected)
    out_base = np.full((2, 32, 3, 6), -1.0, dtype=np.float32)
    out = out_base[:, :, :, ::2]
    result = regrid.space_to_depth(view, 2, mode="CRD", out=out)
    assert result is out
    assert np.array_equal(out, expected)
    assert np.all(out_base[:, :, :, 1::2] == -1.0)


def test_dlpack_producers_without_copy():
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")  # Debian package, see README
    t = torch.arange(2 * 12 * 2 * 3, dtype=torch.float32).reshape(2, 12, 2, 3)
    assert np.array_equal(regrid.depth_to_space(t, 2, framework="torch"), torch.pixel_shuffle(t, 2).numpy())
    bf16 = t.to(torch.bfloat16)[:, 4:]  # strided bfloat16 view
    result = regrid.depth_to_space(bf16, 2, framework="torch")
    assert result.dtype == np.dtype(ml_dtypes.bfloat16)
    assert result.view(np.uint16).tobytes() == torch.pixel_shuffle(bf16, 2).contiguous().view(torch.int16).numpy().tobytes()
    out = torch.zeros(2, 3, 4, 6)
    regrid.depth_to_space(t, 2, framework="torch", out=out)
    assert torch.equal(out, torch.pixel_shuffle(t, 2))


def test_errors_are_value_errors_with_the_sentence_and_write_nothing():
    out = np.full((1, 48, 7, 8), 3.0)
    with pytest.raises(ValueError, match=r"^space_to_depth: input height 30 is not divisible by block_size 4$"):
        regrid.space_to_depth(np.zeros((1, 30, 32, 3)), 4, framework="tf")
    with pytest.raises(ValueError, match=r"output shape \[1, 48, 7, 8\] differs from the expected"):
        regrid.space_to_depth(np.zeros((1, 3, 32, 32)), 4, out=out)
    assert np.all(out == 3.0)
    with pytest.raises(ValueError, match="layout 'NWHC' is unknown"):
        regrid.space_to_depth(np.zeros((1, 4, 4, 4)), 2, layout="NWHC")
    with pytest.raises(ValueError, match="roi_pool: ROI 0 has batch index 3, outside"):
        regrid.roi_pool(np.zeros((1, 1, 4, 4), np.float32), np.array([[3, 0, 0, 1, 1]], np.float32), 2)


def test_roi_pool_forward_backward_and_nnapi_quant():
    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    out, argmax = regrid.roi_pool(x, np.array([[0, 1, 1, 9, 9]], np.float32), 2, 0.5, return_argmax=True)
    assert out.ravel().tolist() == [21, 23, 33, 35]
    assert argmax.ravel().tolist() == [21, 23, 33, 35]
    assert regrid.roi_pool(x, np.array([[0, 1, 1, 9, 9]], np.float32), 2, 0.5, rounding="half_to_even").ravel().tolist() == [14, 16, 26, 28]
    grad = regrid.roi_pool_backward(np.ones_like(out), argmax, x.shape)
    assert grad.sum() == 4 and grad[0, 0, 3, 3] == 1
    q = np.array([7, 200, 3, 150], np.uint8).reshape(1, 2, 2, 1)
    pooled = regrid.roi_pool(q, np.array([[0, 0, 8, 8], [16, 0, 16, 0]], np.uint16), (1, 2), framework="nnapi",
                             batch_indices=np.zeros(2, np.int32), zero_point=100)
    assert pooled.ravel().tolist() == [7, 200, 100, 100]


def test_core_runs_without_the_gil():
    # While one thread is inside a long regrid call, another Python thread must keep running.
    big = np.zeros((1, 64, 1024, 512), np.float32)
    inside = threading.Event()
    finished = threading.Event()

    def work():
        inside.set()
        regrid.space_to_depth(big, 2, mode="CRD")
        finished.set()

    worker = threading.Thread(target=work)
    worker.start()
    inside.wait()
    progress = 0
    while not finished.is_set():
        progress += 1
    worker.join()
    assert progress > 1000, f"the main thread advanced only {progress} times during the call"


def test_memory_cache_reuses_a_freed_result_and_can_be_turned_off():
    limit = regrid.memory_cache_limit()
    if limit == 0:
        pytest.skip("the memory cache is off here (REGRID_MEMORY_CACHE_MIB=0 or an AddressSanitizer build); the release build runs this test")
    try:
        regrid.release_cached_memory()
        x = np.arange(8 << 20, dtype=np.uint8).reshape(1, 8, 1024, 1024)
        y = regrid.space_to_depth(x, 2, layout="NCHW")
        expected = y.copy()
        del y
        assert regrid.cached_memory_bytes() == 8 << 20
        again = regrid.space_to_depth(x, 2, layout="NCHW")
        assert regrid.cached_memory_bytes() == 0
        np.testing.assert_array_equal(again, expected)
        regrid.set_memory_cache_limit(0)
        assert regrid.memory_cache_limit() == 0 and regrid.cached_memory_bytes() == 0
        del again
        assert regrid.cached_memory_bytes() == 0
    finally:
        regrid.set_memory_cache_limit(limit)
        regrid.release_cached_memory()
