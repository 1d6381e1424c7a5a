#!/usr/bin/env python3
"""regrid's SpaceToDepth / DepthToSpace next to PyTorch, ONNX Runtime and OpenVINO on identical
inputs, single-threaded, in one run, with a memcpy (numpy.copyto) of the same bytes as the yardstick.

    build/pyenv/bin/python bench/space_depth_vs_peers.py [--repeat 15]

Peers: torch pixel_shuffle / pixel_unshuffle and reshape + permute + contiguous (CRD), ONNX Runtime
DepthToSpace / SpaceToDepth (DCR, CRD), OpenVINO DepthToSpace-1 / SpaceToDepth-1. Every peer's
output is checked bit for bit against regrid's before it is timed.
"""
import argparse

import numpy as np

from peer_timing import median_ms

import regrid


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    import onnxruntime as ort
    import openvino as ov
    import openvino.opset1 as opset1
    import torch

    from onnx import TensorProto, helper

    torch.set_num_threads(1)
    regrid.set_num_threads(1)
    core = ov.Core()

    def ort_session(to_depth, mode, block, dtype):
        element = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8}[np.dtype(dtype)]
        attributes = {"blocksize": block} if to_depth else {"blocksize": block, "mode": mode}
        node = helper.make_node("SpaceToDepth" if to_depth else "DepthToSpace", ["x"], ["y"], **attributes)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", element, None)],
                                  [helper.make_tensor_value_info("y", element, None)])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def ov_compiled(to_depth, mode, block, x):
        parameter = ov.op.Parameter(ov.Type.f32 if x.dtype == np.float32 else ov.Type.u8, ov.PartialShape(list(x.shape)))
        op = opset1.space_to_depth if to_depth else opset1.depth_to_space
        return core.compile_model(ov.Model([op(parameter, "blocks_first" if mode == "DCR" else "depth_first", block)],
                                           [parameter]), "CPU", {"INFERENCE_NUM_THREADS": 1})

    cases = [  # (op, mode, block, NCHW shape of the input, dtype)
        ("d2s", "CRD", 2, (1, 256, 128, 128), np.float32),
        ("s2d", "CRD", 2, (1, 64, 256, 256), np.float32),
        ("d2s", "DCR", 2, (1, 256, 128, 128), np.float32),
        ("s2d", "DCR", 2, (1, 64, 256, 256), np.float32),
        ("d2s", "CRD", 3, (1, 27, 360, 360), np.float32),
        ("d2s", "DCR", 4, (1, 48, 270, 480), np.uint8),
        ("s2d", "DCR", 4, (1, 3, 1080, 1920), np.uint8),
    ]
    print("single thread, median ms; ratio = peer time / regrid time (> 1: regrid faster); "
          "memcpy = numpy.copyto of the same bytes; out@64 = where regrid's out= array starts within a cache line")
    print(f"{'case':40} {'MB':>6} {'memcpy':>7} {'regrid':>7} {'r/cpy':>6} {'out@64':>6}  peers (ms, ratio)")
    rng = np.random.default_rng(5)
    for op, mode, block, shape, dtype in cases:
        x = (rng.integers(0, 255, size=shape).astype(dtype))
        to_depth = op == "s2d"
        fn = regrid.space_to_depth if to_depth else regrid.depth_to_space
        reference = fn(x, block, layout="NCHW", mode=mode)
        out = np.empty_like(reference)
        regrid_ms = median_ms(lambda: fn(x, block, layout="NCHW", mode=mode, out=out), args.repeat)
        copy_target = np.empty_like(x)
        copy_ms = median_ms(lambda: np.copyto(copy_target, x), args.repeat)
        peers = []
        if mode == "CRD":
            tx = torch.from_numpy(x)
            torch_op = torch.nn.functional.pixel_unshuffle if to_depth else torch.nn.functional.pixel_shuffle
            assert np.array_equal(torch_op(tx, block).numpy(), reference)
            peers.append(("torch pixel_" + ("unshuffle" if to_depth else "shuffle"), median_ms(lambda: torch_op(tx, block), args.repeat)))
            n, c, h, w = shape
            if to_depth:
                permute = lambda: tx.reshape(n, c, h // block, block, w // block, block).permute(0, 1, 3, 5, 2, 4).contiguous()
            else:
                permute = lambda: tx.reshape(n, c // block ** 2, block, block, h, w).permute(0, 1, 4, 2, 5, 3).contiguous()
            assert np.array_equal(permute().numpy().reshape(reference.shape), reference)
            peers.append(("torch permute+contiguous", median_ms(permute, args.repeat)))
        if not (to_depth and mode == "CRD") and (dtype == np.float32 or (not to_depth and mode == "DCR")):
            session = ort_session(to_depth, mode, block, dtype)
            assert np.array_equal(session.run(None, {"x": x})[0], reference)
            peers.append(("onnxruntime", median_ms(lambda: session.run(None, {"x": x}), args.repeat)))
        compiled = ov_compiled(to_depth, mode, block, x)
        assert np.array_equal(compiled(x)[0], reference)
        request = compiled.create_infer_request()
        peers.append(("openvino", median_ms(lambda: request.infer([x]), args.repeat)))
        name = f"{op} {mode} b{block} {'x'.join(map(str, shape))} {np.dtype(dtype).name}"
        text = "  ".join(f"{peer} {ms:.2f} ({ms / regrid_ms:.1f}x)" for peer, ms in peers)
        line_offset = out.ctypes.data % 64
        print(f"{name:40} {x.nbytes / 1e6:6.1f} {copy_ms:7.2f} {regrid_ms:7.2f} {copy_ms / regrid_ms:6.2f} {line_offset:6d}  {text}")


if __name__ == "__main__":
    main()
