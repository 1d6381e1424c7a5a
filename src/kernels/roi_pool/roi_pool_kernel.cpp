#include "kernels/roi_pool/roi_pool_kernel.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cfloat>
#include <cstring>
#include <limits>
#include <string>

#include "core/checked.hpp"
#include "core/float16.hpp"
#include "core/scratch.hpp"
#include "kernels/permute/permute.hpp"
#include "kernels/stream_store.hpp"
#include "runtime/thread_pool.hpp"

namespace regrid::kernels {
namespace {

// Channels pooled together per ROI. NHWC stores each block's results straight from its buffer,
// so wide blocks (fewer passes over the ROI's bins) win; NCHW transposes them first, and a
// narrower block keeps the results, the transposed copy and the run being streamed out in L1/L2.
constexpr std::int64_t nhwc_channel_block = 256;
constexpr std::int64_t nchw_channel_block = 128;

roi_lane lane_of(dtype type) {
  switch (type) {
    case dtype::float64: return roi_lane::f64;
    case dtype::quint8: return roi_lane::u8;
    case dtype::qint8: return roi_lane::i8;
    default: return roi_lane::f32;
  }
}

std::size_t lane_size(roi_lane lane) {
  switch (lane) {
    case roi_lane::f32: return 4;
    case roi_lane::f64: return 8;
    default: return 1;
  }
}

roi_block_fn select_block(roi_lane lane, roi_max_rule rule, bool track) {
  switch (active_isa()) {
    case isa::avx512vbmi:
    case isa::avx512: return roi_block_avx512(lane, rule, track);
    case isa::avx2: return roi_block_avx2(lane, rule, track);
    case isa::scalar: break;
  }
  return roi_block_scalar(lane, rule, track);
}

// Lane values of the seeds for a dtype: T(-FLT_MAX) and numeric_limits<T>::lowest().
struct lane_constants {
  alignas(8) std::byte seed[8]{};
  alignas(8) std::byte empty[8]{};
};

lane_constants constants_for(dtype type, roi_max_rule rule, std::int32_t zero_point) {
  lane_constants k;
  auto put = [](std::byte* to, auto value) { std::memcpy(to, &value, sizeof value); };
  switch (type) {
    case dtype::float64:
      put(k.seed, rule == roi_max_rule::std_max_from_lowest ? std::numeric_limits<double>::lowest()
                                                            : static_cast<double>(-FLT_MAX));
      put(k.empty, 0.0);
      break;
    case dtype::float32:
      put(k.seed, -FLT_MAX);
      put(k.empty, 0.0f);
      break;
    case dtype::float16:  // -FLT_MAX overflows to -inf in half; lowest() is -65504
      put(k.seed, rule == roi_max_rule::std_max_from_lowest ? -65504.0f : -std::numeric_limits<float>::infinity());
      put(k.empty, 0.0f);
      break;
    case dtype::bfloat16:  // -FLT_MAX rounds to -inf in bfloat16; lowest() is 0xFF7F
      put(k.seed, rule == roi_max_rule::std_max_from_lowest ? detail::bfloat16_to_float(0xFF7F)
                                                            : -std::numeric_limits<float>::infinity());
      put(k.empty, 0.0f);
      break;
    case dtype::quint8: put(k.empty, static_cast<std::uint8_t>(zero_point)); break;
    case dtype::qint8: put(k.empty, static_cast<std::int8_t>(zero_point)); break;
    default: break;
  }
  return k;
}

// NCHW 32-bit planes -> NHWC: per batch, a [C][H*W] -> [H*W][C] transpose done in register
// blocks, split over threads by pixel ranges when the planes are packed; otherwise in tiles of
// 16 channels x 16 pixels so the rows read and the runs written both stay in L1.
roi_transpose_fn select_transpose();

void transpose_planes_to_nhwc(const ops::roi_problem& p, const tensor_view& input, std::byte* out, int max_threads) {
  const std::int64_t pixels = p.height * p.width;
  const std::int64_t* s = input.strides().data();
  const bool packed_planes =
      s[3] == 1 && s[2] == p.width && s[1] == pixels && reinterpret_cast<std::uintptr_t>(input.data()) % 4 == 0;
  const int threads = input.numel() < 65536 ? 1 : max_threads;
  if (packed_planes) {
    const roi_transpose_fn transpose = select_transpose();
    constexpr std::int64_t pixel_block = 256;
    const std::int64_t blocks = (pixels + pixel_block - 1) / pixel_block;
    runtime::parallel_for(p.batch * blocks, threads, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t n = item / blocks;
        const std::int64_t first = (item % blocks) * pixel_block;
        const std::int64_t count = std::min(pixel_block, pixels - first);
        const auto* planes = reinterpret_cast<const std::uint32_t*>(input.data()) + n * s[0] + first;
        auto* pixels_out = reinterpret_cast<std::uint32_t*>(out) + (n * pixels + first) * p.channels;
        // Rows = channels (stride H*W), columns = this block's pixels.
        transpose(planes, p.channels, count, pixels, pixels_out, p.channels);
      }
    });
    return;
  }
  constexpr std::int64_t tile = 16;
  const std::int64_t tiles_per_batch = (p.channels + tile - 1) / tile;
  runtime::parallel_for(p.batch * tiles_per_batch, threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t n = item / tiles_per_batch;
      const std::int64_t c0 = (item % tiles_per_batch) * tile;
      const std::int64_t c1 = std::min(p.channels, c0 + tile);
      auto* dst = reinterpret_cast<float*>(out) + n * pixels * p.channels;
      for (std::int64_t h = 0; h < p.height; ++h) {
        for (std::int64_t w0 = 0; w0 < p.width; w0 += tile) {
          const std::int64_t w1 = std::min(p.width, w0 + tile);
          for (std::int64_t c = c0; c < c1; ++c) {
            const std::byte* row = input.data() + (n * s[0] + c * s[1] + h * s[2]) * 4;
            for (std::int64_t w = w0; w < w1; ++w) {
              float value;
              std::memcpy(&value, row + w * s[3] * 4, 4);
              dst[(h * p.width + w) * p.channels + c] = value;
            }
          }
        }
      }
    }
  });
}

// The input's axes in NHWC order: N, H, W, C.
std::array<int, 4> nhwc_axis_order(const ops::roi_problem& p) {
  const bool nchw = p.layout == layout::nchw;
  return {0, nchw ? 2 : 1, nchw ? 3 : 2, nchw ? 1 : 3};
}

// Half-precision inputs are pooled as float32.
bool widens(dtype type) { return type == dtype::float16 || type == dtype::bfloat16; }

// Whether stage_nhwc borrows the input: it is contiguous NHWC in lane type already.
bool borrows_input(const ops::roi_problem& p, const tensor_view& input) {
  const std::array<int, 4> axis_of = nhwc_axis_order(p);
  bool packed = true;
  std::int64_t expected = 1;
  for (int k = 3; k >= 0; --k) {
    const int axis = axis_of[static_cast<std::size_t>(k)];
    if (input.shape()[axis] != 1 && input.strides()[axis] != expected) packed = false;
    expected *= input.shape()[axis];
  }
  // Borrowing is only legal when the base is aligned for the lane type; otherwise copy.
  const bool aligned = reinterpret_cast<std::uintptr_t>(input.data()) % input.element_size() == 0;
  return packed && !widens(input.type()) && aligned;
}

// The input as contiguous NHWC in lane type, staged in the calling thread's scratch memory on up to
// `threads` threads (where borrows_input, the caller uses the input itself).
const std::byte* stage_nhwc(const ops::roi_problem& p, const tensor_view& input, int threads) {
  const std::size_t width = input.element_size();
  const std::array<int, 4> axis_of = nhwc_axis_order(p);
  const std::int64_t count = input.numel();
  std::byte* raw = detail::thread_scratch(detail::scratch_slot::first, static_cast<std::size_t>(count) * width);
  if (p.layout == layout::nchw && width == 4) {
    transpose_planes_to_nhwc(p, input, raw, threads);
  } else {
    std::vector<permute_axis> axes;
    std::int64_t stride = static_cast<std::int64_t>(width);
    std::vector<std::int64_t> dst_stride(4);
    for (int k = 3; k >= 0; --k) {
      dst_stride[static_cast<std::size_t>(k)] = stride;
      stride *= input.shape()[axis_of[static_cast<std::size_t>(k)]];
    }
    for (int k = 0; k < 4; ++k) {
      const int axis = axis_of[static_cast<std::size_t>(k)];
      axes.push_back({input.shape()[axis], input.strides()[axis] * static_cast<std::int64_t>(width),
                      dst_stride[static_cast<std::size_t>(k)]});
    }
    run_permute(plan_permute(axes, width), input.data(), raw, threads);
  }
  if (!widens(input.type())) return raw;
  std::byte* wide = detail::thread_scratch(detail::scratch_slot::second, static_cast<std::size_t>(count) * 4);
  const bool half = input.type() == dtype::float16;
  runtime::parallel_for(count, count < 65536 ? 1 : threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, raw + i * 2, 2);
      const float value = half ? detail::half_to_float(bits) : detail::bfloat16_to_float(bits);
      std::memcpy(wide + i * 4, &value, 4);
    }
  });
  return wide;
}

template <class Lane>
void store_typed(const std::byte* values, std::int64_t from_step, std::byte* first, std::int64_t step, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(first + i * step, values + i * from_step, sizeof(Lane));
}

// Writes n lane values, `from_step` bytes apart, as the output dtype `step` bytes apart (exact:
// each is an input value, a seed or 0).
void store_channels(dtype type, roi_lane lane, const std::byte* values, std::int64_t from_step, std::byte* first,
                    std::int64_t step, std::int64_t n) {
  if (type == dtype::float16 || type == dtype::bfloat16) {
    const bool half = type == dtype::float16;
    for (std::int64_t i = 0; i < n; ++i) {
      float value = 0;
      std::memcpy(&value, values + i * from_step, 4);
      const std::uint16_t bits = half ? detail::float_to_half(value) : detail::float_to_bfloat16(value);
      std::memcpy(first + i * step, &bits, 2);
    }
    return;
  }
  switch (lane) {
    case roi_lane::f32: store_typed<float>(values, from_step, first, step, n); break;
    case roi_lane::f64: store_typed<double>(values, from_step, first, step, n); break;
    default: store_typed<std::uint8_t>(values, from_step, first, step, n); break;
  }
}

roi_transpose_fn select_transpose() {
  switch (active_isa()) {
    case isa::avx512vbmi:
    case isa::avx512: return roi_transpose_avx512;
    case isa::avx2: return roi_transpose_avx2;
    case isa::scalar: break;
  }
  return roi_transpose_scalar;
}

// Writes a block's results, [cells][n] lane values (and int32 argmax), into packed outputs.
// With `stream`, every output byte goes through one streaming copy of a contiguous run: NHWC
// cells are runs of n channels, and an NCHW block is first transposed into `scratch` because
// out[r, c0 .. c0 + n, :, :] is one contiguous run.
template <class Lane>
void store_block_typed(bool nchw, bool stream, const Lane* values, const std::int32_t* args, std::int64_t cells,
                       std::int64_t n, std::int64_t channels, std::int64_t r, std::int64_t c0, Lane* out,
                       std::int32_t* out_args, std::vector<std::uint32_t>& scratch) {
  auto copy = [stream](void* to, const void* from, std::size_t bytes) {
    if (stream) {
      stream_copy(static_cast<std::byte*>(to), static_cast<const std::byte*>(from), bytes);
    } else {
      std::memcpy(to, from, bytes);
    }
  };
  const auto run_bytes = static_cast<std::size_t>(n * cells) * sizeof(Lane);
  if (nchw && sizeof(Lane) == 4) {  // 32-bit lanes: in-register block transposes
    const roi_transpose_fn transpose = select_transpose();
    auto put = [&](const void* from, void* to) {
      if (!stream) {
        transpose(static_cast<const std::uint32_t*>(from), cells, n, n, static_cast<std::uint32_t*>(to), cells);
        return;
      }
      scratch.resize(static_cast<std::size_t>(n * cells));
      transpose(static_cast<const std::uint32_t*>(from), cells, n, n, scratch.data(), cells);
      copy(to, scratch.data(), run_bytes);
    };
    put(values, out + (r * channels + c0) * cells);
    if (out_args) put(args, out_args + (r * channels + c0) * cells);
  } else if (nchw) {  // [cells][n] -> out[r, c0 + c, cell]: a small transpose in 16-channel strips, so each
                      // read is a cache line and the 16 output runs are written in order
    constexpr std::int64_t strip = 16;
    Lane* to = out + (r * channels + c0) * cells;
    std::int32_t* to_args = out_args ? out_args + (r * channels + c0) * cells : nullptr;
    for (std::int64_t first = 0; first < n; first += strip) {
      const std::int64_t last = std::min(n, first + strip);
      for (std::int64_t cell = 0; cell < cells; ++cell) {
        for (std::int64_t c = first; c < last; ++c) to[c * cells + cell] = values[cell * n + c];
      }
      if (to_args) {
        for (std::int64_t cell = 0; cell < cells; ++cell) {
          for (std::int64_t c = first; c < last; ++c) to_args[c * cells + cell] = args[cell * n + c];
        }
      }
    }
  } else {  // out[r, cell, c0 .. c0 + n): one run per cell, or one run for the block if n == C
    const std::int64_t runs = n == channels ? 1 : cells;
    const std::int64_t run = n == channels ? n * cells : n;
    for (std::int64_t i = 0; i < runs; ++i) {
      copy(out + (r * cells + i) * channels + c0, values + i * n, static_cast<std::size_t>(run) * sizeof(Lane));
      if (out_args) copy(out_args + (r * cells + i) * channels + c0, args + i * n, static_cast<std::size_t>(run) * 4);
    }
  }
}

void store_block_packed(bool nchw, bool stream, std::size_t lane_bytes, const std::byte* values,
                        const std::int32_t* args, std::int64_t cells, std::int64_t n, std::int64_t channels,
                        std::int64_t r, std::int64_t c0, std::byte* out, std::byte* out_args,
                        std::vector<std::uint32_t>& scratch) {
  auto* arg_out = reinterpret_cast<std::int32_t*>(out_args);
  switch (lane_bytes) {
    case 4:
      store_block_typed(nchw, stream, reinterpret_cast<const float*>(values), args, cells, n, channels, r, c0,
                        reinterpret_cast<float*>(out), arg_out, scratch);
      break;
    case 8:
      store_block_typed(nchw, stream, reinterpret_cast<const double*>(values), args, cells, n, channels, r, c0,
                        reinterpret_cast<double*>(out), arg_out, scratch);
      break;
    default:
      store_block_typed(nchw, stream, reinterpret_cast<const std::uint8_t*>(values), args, cells, n, channels, r, c0,
                        reinterpret_cast<std::uint8_t*>(out), arg_out, scratch);
      break;
  }
}

}  // namespace

// A forward call counts as a permute of 1 / this of the bytes it reads and writes when it decides
// whether to wake sleeping workers (runtime::call_threads): its reads come from cache, about twice
// as fast per byte. Calls 1 ms apart, float32, 64 channels of 50 x 50, 7 x 7 bins, torchvision,
// ROIs random in the image, two threads (one thread beside): 2 ROIs NCHW 28-40 -> 18 us (18-20),
// NHWC 12-16 -> 3.7 (3.5); 32 ROIs NCHW 85-104 -> 84 (82), NHWC 67-70 -> 60-62 (60-62); from 64
// ROIs (12 MB read) the call is shared as before (NCHW 64 ROIs 126-133 us, one thread 143-194);
// back to back, where the workers still poll, every call is shared as before. With the bytes
// counted whole, 32 ROIs in NHWC were shared after a pause and ran 69-71 us.
constexpr std::int64_t pooled_bytes_per_permuted_byte = 2;

void roi_pool_forward(const ops::roi_problem& p, const std::vector<ops::roi_box>& boxes, const tensor_view& input,
                      const mutable_tensor_view& output, const std::optional<mutable_tensor_view>& argmax) {
  if (output.numel() == 0) return;
  const roi_lane lane = lane_of(p.type);
  const std::size_t lane_bytes = lane_size(lane);
  const lane_constants constants = constants_for(p.type, p.semantics.max_rule, p.zero_point);
  const bool track = argmax.has_value();
  const roi_block_fn block = select_block(lane, p.semantics.max_rule, track);
  const auto out_size = static_cast<std::int64_t>(output.element_size());
  const std::int64_t output_bytes = output.numel() * (out_size + (track ? 4 : 0));
  const bool borrowed = input.numel() > 0 && borrows_input(p, input);
  // Staging the input and pooling are two pool jobs, shared or not as one (runtime::call_threads)
  // by the bytes the call reads and writes: the input's pixels once for each bin that covers them.
  std::int64_t moved_bytes = output_bytes;
  if (input.numel() > 0 && !borrowed) moved_bytes += 2 * input.numel() * static_cast<std::int64_t>(lane_bytes);
  for (const ops::roi_box& box : boxes) {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    for (std::size_t k = 0; k < box.hstart.size(); ++k) rows += std::max<std::int64_t>(0, box.hend[k] - box.hstart[k]);
    for (std::size_t k = 0; k < box.wstart.size(); ++k) cols += std::max<std::int64_t>(0, box.wend[k] - box.wstart[k]);
    moved_bytes += rows * cols * p.channels * static_cast<std::int64_t>(lane_bytes);
  }
  const runtime::call_threads call(moved_bytes / pooled_bytes_per_permuted_byte);
  const std::byte* staged = input.numel() == 0 ? nullptr : borrowed ? input.data() : stage_nhwc(p, input, call.count());
  const std::int64_t plane = p.height * p.width * p.channels;
  const std::int64_t cells = p.pooled_height * p.pooled_width;
  const std::int64_t channel_block = p.layout == layout::nchw ? nchw_channel_block : nhwc_channel_block;
  const std::int64_t blocks = (p.channels + channel_block - 1) / channel_block;
  const std::int64_t items = p.roi_count * blocks;
  const bool nchw = p.layout == layout::nchw;
  // Output element (r, c, cell) -> offset in elements, for either layout.
  const std::int64_t* os = output.strides().data();
  auto out_offset = [&](std::int64_t r, std::int64_t c, std::int64_t ph, std::int64_t pw) {
    return nchw ? r * os[0] + c * os[1] + ph * os[2] + pw * os[3] : r * os[0] + ph * os[1] + pw * os[2] + c * os[3];
  };
  const std::int64_t* as = track ? argmax->strides().data() : nullptr;
  auto arg_offset = [&](std::int64_t r, std::int64_t c, std::int64_t ph, std::int64_t pw) {
    return nchw ? r * as[0] + c * as[1] + ph * as[2] + pw * as[3] : r * as[0] + ph * as[1] + pw * as[2] + c * as[3];
  };
  // Packed outputs whose dtype is the lane type take the typed block store.
  const bool same_width = !widens(p.type);
  auto aligned = [](const std::byte* pointer, std::size_t alignment) {
    return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
  };
  const bool packed_output = same_width && output.is_contiguous() && aligned(output.data(), lane_bytes) &&
                             (!track || (argmax->is_contiguous() && aligned(argmax->data(), 4)));
  const bool stream = packed_output && static_cast<std::size_t>(output_bytes) >= streaming_output_bytes;
  const std::int64_t work = p.roi_count * p.channels * cells * 16;
  const int threads = work < (1 << 16) ? 1 : call.count();
  // ROIs of one image together: with several images, consecutive ROIs then share cached pixels.
  std::vector<std::int64_t> order(static_cast<std::size_t>(p.roi_count));
  for (std::int64_t r = 0; r < p.roi_count; ++r) order[static_cast<std::size_t>(r)] = r;
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return boxes[static_cast<std::size_t>(a)].batch < boxes[static_cast<std::size_t>(b)].batch;
  });

  runtime::parallel_for(items, threads, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::byte> cell_values(static_cast<std::size_t>(cells * channel_block) * lane_bytes);
    std::vector<std::int32_t> cell_args(track ? static_cast<std::size_t>(cells * channel_block) : 0);
    std::vector<std::uint32_t> scratch;
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t r = order[static_cast<std::size_t>(item / blocks)];
      const std::int64_t c0 = (item % blocks) * channel_block;
      const std::int64_t n = std::min(channel_block, p.channels - c0);
      const ops::roi_box& box = boxes[static_cast<std::size_t>(r)];
      if (box.batch < 0) {  // terminated by OpenVINO's -1 sentinel: zeros
        for (std::int64_t i = 0; i < cells * n; ++i) {
          std::memcpy(cell_values.data() + i * static_cast<std::int64_t>(lane_bytes), constants.empty, lane_bytes);
          if (track) cell_args[static_cast<std::size_t>(i)] = -1;
        }
      } else {
        roi_block_args args;
        args.image = staged + box.batch * plane * static_cast<std::int64_t>(lane_bytes);
        args.width = p.width;
        args.channels = p.channels;
        args.first_channel = c0;
        args.block_channels = n;
        args.hstart = box.hstart.data();
        args.hend = box.hend.data();
        args.wstart = box.wstart.data();
        args.wend = box.wend.data();
        args.pooled_height = p.pooled_height;
        args.pooled_width = p.pooled_width;
        args.cells = cell_values.data();
        args.argmax = track ? cell_args.data() : nullptr;
        args.seed = constants.seed;
        args.empty = constants.empty;
        block(args);
      }
      if (packed_output) {
        store_block_packed(nchw, stream, lane_bytes, cell_values.data(), track ? cell_args.data() : nullptr, cells, n,
                           p.channels, r, c0, output.data(), track ? argmax->data() : nullptr, scratch);
      } else if (nchw) {
        // out[r, c, :, :] is a run of cells per channel: write each run in order.
        for (std::int64_t c = 0; c < n; ++c) {
          for (std::int64_t ph = 0; ph < p.pooled_height; ++ph) {
            const std::int64_t cell = ph * p.pooled_width;
            store_channels(p.type, lane, cell_values.data() + (cell * n + c) * static_cast<std::int64_t>(lane_bytes),
                           n * static_cast<std::int64_t>(lane_bytes),
                           output.data() + out_offset(r, c0 + c, ph, 0) * out_size, os[3] * out_size, p.pooled_width);
            if (track) {
              std::byte* to = argmax->data() + arg_offset(r, c0 + c, ph, 0) * 4;
              for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
                std::memcpy(to + pw * as[3] * 4, cell_args.data() + (cell + pw) * n + c, 4);
              }
            }
          }
        }
      } else {
        for (std::int64_t cell = 0; cell < cells; ++cell) {
          const std::int64_t ph = cell / p.pooled_width;
          const std::int64_t pw = cell % p.pooled_width;
          store_channels(p.type, lane, cell_values.data() + cell * n * static_cast<std::int64_t>(lane_bytes),
                         static_cast<std::int64_t>(lane_bytes), output.data() + out_offset(r, c0, ph, pw) * out_size,
                         os[3] * out_size, n);
          if (track) {
            std::byte* to = argmax->data() + arg_offset(r, c0, ph, pw) * 4;
            for (std::int64_t c = 0; c < n; ++c) std::memcpy(to + c * as[3] * 4, cell_args.data() + cell * n + c, 4);
          }
        }
      }
    }
    if (stream) stream_fence();
  });
  detail::release_large_scratch();
}

namespace {

template <class Index>
std::int64_t load_index(const std::byte* at) {
  Index value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

template <class T>
void add_stored(std::byte* target, const std::byte* g) {
  T a, b;
  std::memcpy(&a, target, sizeof a);
  std::memcpy(&b, g, sizeof b);
  a += b;
  std::memcpy(target, &a, sizeof a);
}

// grad += g in the gradient's dtype, rounding after each addition as the frameworks do.
void accumulate(dtype type, std::byte* target, const std::byte* g) {
  switch (type) {
    case dtype::float32: add_stored<float>(target, g); break;
    case dtype::float64: add_stored<double>(target, g); break;
    default: {
      const bool half = type == dtype::float16;
      std::uint16_t a, b;
      std::memcpy(&a, target, 2);
      std::memcpy(&b, g, 2);
      const float sum = half ? detail::half_to_float(a) + detail::half_to_float(b)
                             : detail::bfloat16_to_float(a) + detail::bfloat16_to_float(b);
      const std::uint16_t bits = half ? detail::float_to_half(sum) : detail::float_to_bfloat16(sum);
      std::memcpy(target, &bits, 2);
      break;
    }
  }
}

// Packed float32/float64 gradients with packed int32 argmax: typed loops. Threads take channel
// ranges; each thread walks ROI, cell, channel so reads are sequential and every (batch,
// channel) plane still receives its additions in the order ROI, ph, pw. Each index is checked
// where it is used (one unsigned compare covers both ends); returns false at the first index
// outside [-1, plane), with grad_in partly written.
template <class T>
bool scatter_packed(const T* grad_out, const std::int32_t* argmax, const std::vector<std::int64_t>& batch_of,
                    T* grad_in, bool nchw, std::int64_t rois, std::int64_t channels, std::int64_t cells,
                    std::int64_t plane, std::int64_t batches, int threads, runtime::sleeping_workers sleeping) {
  // Indices are int32, so a plane past 2^31 - 1 elements can only be violated by values < -1.
  const auto limit = static_cast<std::uint32_t>(std::min<std::int64_t>(plane, std::int64_t{128} << 31));
  std::atomic<bool> valid{true};
  // NCHW threads take channel ranges (whole planes). NHWC threads take whole images (ROIs of
  // different images never share an element): splitting every pixel's channels between two
  // cores made the scatter slower than one core, so a single image runs on one thread.
  const bool by_image = !nchw;
  const std::int64_t parts = by_image ? batches : channels;
  runtime::parallel_for(
      parts, threads,
      [&](std::int64_t part_begin, std::int64_t part_end) {
        const std::int64_t c_begin = by_image ? 0 : part_begin;
        const std::int64_t c_end = by_image ? channels : part_end;
        for (std::int64_t r = 0; r < rois; ++r) {
          const std::int64_t b = batch_of[static_cast<std::size_t>(r)];
          if (b < 0 || (by_image && (b < part_begin || b >= part_end))) continue;
          bool ok = true;
          if (nchw) {
            for (std::int64_t c = c_begin; c < c_end; ++c) {
              const T* g = grad_out + (r * channels + c) * cells;
              const std::int32_t* index = argmax + (r * channels + c) * cells;
              T* target = grad_in + (b * channels + c) * plane;
              for (std::int64_t cell = 0; cell < cells; ++cell) {
                const std::int32_t i = index[cell];
                if (static_cast<std::uint32_t>(i) < limit)
                  target[i] += g[cell];
                else
                  ok &= i == -1;
              }
            }
          } else {
            for (std::int64_t cell = 0; cell < cells; ++cell) {
              const T* g = grad_out + (r * cells + cell) * channels;
              const std::int32_t* index = argmax + (r * cells + cell) * channels;
              T* target = grad_in + b * plane * channels;
              for (std::int64_t c = c_begin; c < c_end; ++c) {
                const std::int32_t i = index[c];
                if (static_cast<std::uint32_t>(i) < limit)
                  target[static_cast<std::int64_t>(i) * channels + c] += g[c];
                else
                  ok &= i == -1;
              }
            }
          }
          if (!ok || !valid.load(std::memory_order_relaxed)) {
            valid.store(false, std::memory_order_relaxed);
            return;
          }
        }
      },
      sleeping);
  return valid.load();
}

}  // namespace

void roi_pool_backward(const tensor_view& grad_output, const tensor_view& argmax,
                       const std::optional<tensor_view>& roi_batch, const mutable_tensor_view& grad_input,
                       regrid::layout layout) {
  const bool nchw = layout == layout::nchw;
  const shape_t& in = grad_input.shape();
  const shape_t& go = grad_output.shape();
  const std::int64_t batch = in[0];
  const std::int64_t channels = nchw ? in[1] : in[3];
  const std::int64_t height = nchw ? in[2] : in[1];
  const std::int64_t width = nchw ? in[3] : in[2];
  const std::int64_t rois = go[0];
  const std::int64_t ph_count = nchw ? go[2] : go[1];
  const std::int64_t pw_count = nchw ? go[3] : go[2];
  const std::int64_t plane = height * width;
  auto at = [&](const auto& view, std::int64_t r, std::int64_t c, std::int64_t ph, std::int64_t pw) {
    const std::int64_t* s = view.strides().data();
    const std::int64_t offset =
        nchw ? r * s[0] + c * s[1] + ph * s[2] + pw * s[3] : r * s[0] + ph * s[1] + pw * s[2] + c * s[3];
    return view.data() + offset * static_cast<std::int64_t>(view.element_size());
  };
  auto index_at = [&](std::int64_t r, std::int64_t c, std::int64_t ph, std::int64_t pw) {
    const std::byte* p = at(argmax, r, c, ph, pw);
    return argmax.type() == dtype::int32 ? load_index<std::int32_t>(p) : load_index<std::int64_t>(p);
  };
  std::vector<std::int64_t> batch_of(static_cast<std::size_t>(rois), 0);
  for (std::int64_t r = 0; r < rois && roi_batch; ++r) {
    const std::byte* p =
        roi_batch->data() + r * roi_batch->strides()[0] * static_cast<std::int64_t>(roi_batch->element_size());
    batch_of[static_cast<std::size_t>(r)] =
        roi_batch->type() == dtype::int32 ? load_index<std::int32_t>(p) : load_index<std::int64_t>(p);
    if (batch_of[static_cast<std::size_t>(r)] < -1 || batch_of[static_cast<std::size_t>(r)] >= batch) {
      detail::fail_invalid("roi_pool_backward: ROI " + std::to_string(r) + " has batch index " +
                           std::to_string(batch_of[static_cast<std::size_t>(r)]) + ", outside [0, " +
                           std::to_string(batch) + ")");
    }
  }
  // The element-wise check, which names the first offender in (r, c, ph, pw) order.
  auto check_every_index = [&] {
    for (std::int64_t r = 0; r < rois; ++r) {
      for (std::int64_t c = 0; c < channels; ++c) {
        for (std::int64_t ph = 0; ph < ph_count; ++ph) {
          for (std::int64_t pw = 0; pw < pw_count; ++pw) {
            const std::int64_t index = index_at(r, c, ph, pw);
            if (index < -1 || index >= plane) {
              detail::fail_invalid("roi_pool_backward: argmax " + std::to_string(index) + " at [" + std::to_string(r) +
                                   ", " + std::to_string(c) + ", " + std::to_string(ph) + ", " + std::to_string(pw) +
                                   "] is outside [-1, " + std::to_string(plane) + ") for a " + std::to_string(height) +
                                   "x" + std::to_string(width) + " plane");
            }
          }
        }
      }
    }
  };
  const std::int64_t work = rois * channels * ph_count * pw_count;
  const int threads = work < (1 << 16) ? 1 : num_threads();
  // One pool job, which leaves sleeping workers be as a permute of twice its bytes would (each
  // gradient and index read, and the element it adds to read and written): its adds land
  // scattered. Calls 1 ms apart on two threads (float32, 64 channels of 50 x 50, 7 x 7 bins,
  // NCHW): 32 ROIs 61 -> 54 us (one thread 53); 64 ROIs shared as before, 89 us (one thread 99),
  // which the bytes counted once kept on the caller.
  const runtime::sleeping_workers sleeping =
      runtime::sleeping_workers_for_bytes(2 * work * (static_cast<std::int64_t>(grad_output.element_size()) * 3 + 4));
  auto aligned = [](const std::byte* pointer, std::size_t alignment) {
    return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
  };
  const bool packed = grad_output.is_contiguous() && argmax.is_contiguous() && argmax.type() == dtype::int32 &&
                      aligned(grad_output.data(), grad_output.element_size()) && aligned(argmax.data(), 4);
  const auto* indices = reinterpret_cast<const std::int32_t*>(argmax.data());
  const std::int64_t cells = ph_count * pw_count;
  // grad_input is the caller's fresh tensor, returned only on success: the packed scatters check
  // indices as they go and, on a bad one, leave the message to the element-wise check.
  if (packed && (grad_output.type() == dtype::float32 || grad_output.type() == dtype::float64)) {
    const bool valid = grad_output.type() == dtype::float32
                           ? scatter_packed(reinterpret_cast<const float*>(grad_output.data()), indices, batch_of,
                                            reinterpret_cast<float*>(grad_input.data()), nchw, rois, channels, cells,
                                            plane, batch, threads, sleeping)
                           : scatter_packed(reinterpret_cast<const double*>(grad_output.data()), indices, batch_of,
                                            reinterpret_cast<double*>(grad_input.data()), nchw, rois, channels, cells,
                                            plane, batch, threads, sleeping);
    if (!valid) check_every_index();
    return;
  }
  check_every_index();
  const auto size = static_cast<std::int64_t>(grad_input.element_size());
  // Channels never share an input element, so threads split channels and each plane keeps the
  // sequential order ROI, ph, pw: the sums are deterministic and identical to a serial loop.
  runtime::parallel_for(
      channels, threads,
      [&](std::int64_t c_begin, std::int64_t c_end) {
        for (std::int64_t c = c_begin; c < c_end; ++c) {
          for (std::int64_t r = 0; r < rois; ++r) {
            const std::int64_t b = batch_of[static_cast<std::size_t>(r)];
            if (b < 0) continue;
            for (std::int64_t ph = 0; ph < ph_count; ++ph) {
              for (std::int64_t pw = 0; pw < pw_count; ++pw) {
                const std::int64_t index = index_at(r, c, ph, pw);
                if (index < 0) continue;
                const std::int64_t offset =
                    nchw ? (b * channels + c) * plane + index : (b * plane + index) * channels + c;
                accumulate(grad_input.type(), grad_input.data() + offset * size, at(grad_output, r, c, ph, pw));
              }
            }
          }
        }
      },
      sleeping);
}

}  // namespace regrid::kernels
