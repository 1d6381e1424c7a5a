// The spec of record for ROI max pooling: each output element scans its bin in row-major
// order, compares in double (exact for every supported type) and copies the raw bytes of
// the element it selected, so NaN payloads and signed zeros survive untouched.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/float16.hpp"
#include "ops/roi_pool_plan.hpp"
#include "regrid/roi_pool.hpp"

namespace regrid::reference {
namespace {

double load(dtype type, const std::byte* at) {
  switch (type) {
    case dtype::quint8: return static_cast<double>(std::to_integer<std::uint8_t>(*at));
    case dtype::qint8: return static_cast<double>(static_cast<std::int8_t>(std::to_integer<std::uint8_t>(*at)));
    default: return detail::floating_value(type, at);
  }
}

// The seed of the strict_from_flt_max and std_max_from_lowest rules, as stored bytes and value.
struct seed_value {
  std::byte bytes[8]{};
  double value = 0;
};

seed_value seed_for(dtype type, roi_max_rule rule) {
  seed_value seed;
  const bool lowest = rule == roi_max_rule::std_max_from_lowest;
  auto put16 = [&](std::uint16_t bits, double value) {
    std::memcpy(seed.bytes, &bits, 2);
    seed.value = value;
  };
  switch (type) {
    case dtype::float32: {
      const float v = -FLT_MAX;
      std::memcpy(seed.bytes, &v, 4);
      seed.value = v;
      break;
    }
    case dtype::float64: {
      const double v = lowest ? std::numeric_limits<double>::lowest() : static_cast<double>(-FLT_MAX);
      std::memcpy(seed.bytes, &v, 8);
      seed.value = v;
      break;
    }
    case dtype::float16: lowest ? put16(0xFBFF, -65504.0) : put16(0xFC00, -INFINITY); break;
    case dtype::bfloat16: lowest ? put16(0xFF7F, detail::bfloat16_to_float(0xFF7F)) : put16(0xFF80, -INFINITY); break;
    default: break;
  }
  return seed;
}

}  // namespace

void roi_pool(const tensor_view& input, const tensor_view& rois, const mutable_tensor_view& output,
              const roi_pool_options& options, const std::optional<tensor_view>& batch_indices,
              const std::optional<mutable_tensor_view>& argmax) {
  ops::roi_problem p = ops::plan_roi_pool(input.shape(), input.type(), rois, batch_indices, options);
  if (is_quantized(input.type()) && input.quant()) p.zero_point = input.quant()->zero_point;
  ops::check_roi_outputs(p, input, output, argmax);
  const std::vector<ops::roi_box> boxes = ops::compute_boxes(p, rois, batch_indices);
  const roi_max_rule rule = p.semantics.max_rule;
  const seed_value seed = seed_for(p.type, rule);
  const std::size_t width = input.element_size();
  const bool nchw = p.layout == layout::nchw;
  const std::int64_t* is = input.strides().data();
  auto input_at = [&](std::int64_t b, std::int64_t c, std::int64_t h, std::int64_t w) {
    const std::int64_t offset =
        nchw ? b * is[0] + c * is[1] + h * is[2] + w * is[3] : b * is[0] + h * is[1] + w * is[2] + c * is[3];
    return input.data() + offset * static_cast<std::int64_t>(width);
  };
  auto place = [&](const auto& view, std::int64_t r, std::int64_t c, std::int64_t ph, std::int64_t pw) {
    const std::int64_t* s = view.strides().data();
    const std::int64_t offset =
        nchw ? r * s[0] + c * s[1] + ph * s[2] + pw * s[3] : r * s[0] + ph * s[1] + pw * s[2] + c * s[3];
    return view.data() + offset * static_cast<std::int64_t>(view.element_size());
  };
  std::byte empty[8]{};
  if (is_quantized(p.type)) empty[0] = static_cast<std::byte>(p.zero_point & 0xff);

  for (std::int64_t r = 0; r < p.roi_count; ++r) {
    const ops::roi_box& box = boxes[static_cast<std::size_t>(r)];
    for (std::int64_t c = 0; c < p.channels; ++c) {
      for (std::int64_t ph = 0; ph < p.pooled_height; ++ph) {
        for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
          const std::byte* chosen = empty;
          std::int32_t index_of_max = -1;
          const bool live = box.batch >= 0;
          const std::int64_t h0 = live ? box.hstart[static_cast<std::size_t>(ph)] : 0;
          const std::int64_t h1 = live ? box.hend[static_cast<std::size_t>(ph)] : 0;
          const std::int64_t w0 = live ? box.wstart[static_cast<std::size_t>(pw)] : 0;
          const std::int64_t w1 = live ? box.wend[static_cast<std::size_t>(pw)] : 0;
          if (h0 < h1 && w0 < w1) {
            double best = seed.value;
            chosen = seed.bytes;
            bool first = true;
            for (std::int64_t h = h0; h < h1; ++h) {
              for (std::int64_t w = w0; w < w1; ++w) {
                const std::byte* element = input_at(box.batch, c, h, w);
                const double v = load(p.type, element);
                const auto index = static_cast<std::int32_t>(h * p.width + w);
                bool take_value = false;
                bool take_index = false;
                switch (rule) {
                  case roi_max_rule::fmax:
                    take_value = take_index = first || v > best || (std::isnan(best) && !std::isnan(v));
                    break;
                  case roi_max_rule::strict_from_first: take_value = take_index = first || v > best; break;
                  case roi_max_rule::strict_from_flt_max: take_value = take_index = v > best; break;
                  case roi_max_rule::std_max_from_lowest:
                    take_value = !(v < best);
                    take_index = take_value && !(v == best);
                    break;
                }
                first = false;
                if (take_value) {
                  best = v;
                  chosen = element;
                }
                if (take_index) index_of_max = index;
              }
            }
          }
          std::memcpy(place(output, r, c, ph, pw), chosen, width);
          if (argmax) std::memcpy(place(*argmax, r, c, ph, pw), &index_of_max, 4);
        }
      }
    }
  }
}

}  // namespace regrid::reference
