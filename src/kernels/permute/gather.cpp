#include "kernels/permute/gather.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

namespace regrid::kernels {
namespace {

struct program_key {
  detail::fixed_vector<permute_axis, max_permute_axes> inner;
  std::size_t width = 0;
  std::int64_t stream_src_stride = 0;
  bool single_block = false;
  std::int64_t line_phase = unlined;
  bool lines_where_they_fit = false;
  std::int64_t joined_periods = 1;
  gather_layout layout = gather_layout::pairs_of_64;
  bool grouped = false;
  int most_group_windows = 0;  ///< grouped programs only

  bool operator==(const program_key& other) const {
    return width == other.width && stream_src_stride == other.stream_src_stride && single_block == other.single_block &&
           line_phase == other.line_phase && lines_where_they_fit == other.lines_where_they_fit &&
           joined_periods == other.joined_periods && layout == other.layout && grouped == other.grouped &&
           most_group_windows == other.most_group_windows &&
           std::equal(inner.begin(), inner.end(), other.inner.begin(), other.inner.end());
  }
};

// map[k]: the source offset of byte k of one destination block.
std::vector<std::int64_t> block_map(std::span<const permute_axis> inner, std::size_t width, std::int64_t block_bytes) {
  std::vector<std::int64_t> map(static_cast<std::size_t>(block_bytes));
  std::vector<std::int64_t> index(inner.size(), 0);
  const auto w = static_cast<std::int64_t>(width);
  for (std::int64_t element = 0; element * w < block_bytes; ++element) {
    std::int64_t src = 0;
    std::int64_t dst = 0;
    for (std::size_t a = 0; a < inner.size(); ++a) {
      src += index[a] * inner[a].src_stride;
      dst += index[a] * inner[a].dst_stride;
    }
    for (std::int64_t b = 0; b < w; ++b) map[static_cast<std::size_t>(dst + b)] = src + b;
    for (std::size_t a = inner.size(); a-- > 0;) {
      if (++index[a] < inner[a].extent) break;
      index[a] = 0;
    }
  }
  return map;
}

// Output bytes first .. first + count - 1 of a chunk, in the order of their source offsets.
std::array<int, 64> by_offset(const std::array<std::int64_t, 64>& offsets, int first, int count) {
  std::array<int, 64> order{};
  std::iota(order.begin(), order.begin() + count, first);
  std::sort(order.begin(), order.begin() + count,
            [&](int x, int y) { return offsets[static_cast<std::size_t>(x)] < offsets[static_cast<std::size_t>(y)]; });
  return order;
}

// The steps of one halves_of_16 chunk whose first `bytes` bytes come from source `offsets`: each
// half's offsets, sorted, are covered greedily by 16-byte windows starting at a needed byte (the
// fewest that cover them), and step k loads window k of each half.
void add_halves_chunk(gather_program& program, const std::array<std::int64_t, 64>& offsets, int bytes) {
  constexpr int half = 16;
  struct half_windows {
    std::vector<std::int64_t> starts;
    std::array<int, half> window_of{};  // per byte of the half
    std::array<int, half> position{};
  };
  std::array<half_windows, 2> halves;
  for (int h = 0; h < 2; ++h) {
    const int first = h * half;
    const int count = std::clamp(bytes - first, 0, half);
    const std::array<int, 64> order = by_offset(offsets, first, count);
    half_windows& made = halves[static_cast<std::size_t>(h)];
    for (int j : std::span(order).first(static_cast<std::size_t>(count))) {
      const std::int64_t offset = offsets[static_cast<std::size_t>(j)];
      if (made.starts.empty() || offset - made.starts.back() >= half) made.starts.push_back(offset);
      made.window_of[static_cast<std::size_t>(j - first)] = static_cast<int>(made.starts.size()) - 1;
      made.position[static_cast<std::size_t>(j - first)] = static_cast<int>(offset - made.starts.back());
    }
  }
  const std::size_t steps = std::max(halves[0].starts.size(), halves[1].starts.size());
  for (std::size_t k = 0; k < steps; ++k) {
    gather_step step;
    step.index.fill(0x80);
    std::array<std::int64_t*, 2> window{&step.window_a, &step.window_b};
    std::array<std::uint64_t*, 2> load{&step.load_a, &step.load_b};
    for (int h = 0; h < 2; ++h) {
      const half_windows& made = halves[static_cast<std::size_t>(h)];
      const half_windows& own = made.starts.empty() ? halves[static_cast<std::size_t>(1 - h)] : made;
      *window[static_cast<std::size_t>(h)] = k < own.starts.size() ? own.starts[k] : own.starts.front();
      const int first = h * half;
      for (int j = first; j < std::min(bytes, first + half); ++j) {
        const auto at = static_cast<std::size_t>(j - first);
        if (static_cast<std::size_t>(made.window_of[at]) != k) continue;
        step.index[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(made.position[at]);
        *load[static_cast<std::size_t>(h)] |= std::uint64_t{1} << made.position[at];
        step.take |= std::uint64_t{1} << j;
      }
    }
    program.steps.push_back(step);
  }
}

// The steps of one pairs_of_64 chunk whose first `bytes` bytes come from source `offsets`: greedy
// windows over the sorted offsets (the fewest 64-byte windows covering them, or the fewest lines),
// taken in pairs: one two-source permute per pair. Offsets are never negative (find_gathers takes
// no backward strides). With lines_where_they_fit, the windows are the fewest 64-byte ones, each
// moved back to the start of its first byte's line where its bytes all lie in that line (it then
// covers the same bytes).
void add_pairs_chunk(gather_program& program, const std::array<std::int64_t, 64>& offsets, int bytes,
                     std::int64_t line_phase, bool lines_where_they_fit) {
  const std::array<int, 64> order = by_offset(offsets, 0, bytes);
  gather_step step;
  int windows_in_step = 0;
  std::int64_t window_start = 0;
  auto flush = [&] {
    program.steps.push_back(step);
    step = gather_step{};
    windows_in_step = 0;
  };
  auto placed = [&](int n, std::int64_t offset) {
    if (line_phase == unlined) return offset;
    const std::int64_t line = (offset + line_phase) / 64;
    if (!lines_where_they_fit) return line * 64 - line_phase;
    std::int64_t last = offset;  // the last byte the window takes: every offset under offset + 64
    for (int m = n + 1; m < bytes; ++m) {
      const std::int64_t next = offsets[static_cast<std::size_t>(order[static_cast<std::size_t>(m)])];
      if (next - offset >= 64) break;
      last = next;
    }
    return (last + line_phase) / 64 == line ? line * 64 - line_phase : offset;
  };
  for (int n = 0; n < bytes; ++n) {
    const int j = order[static_cast<std::size_t>(n)];
    const std::int64_t offset = offsets[static_cast<std::size_t>(j)];
    if (windows_in_step == 0 || offset - window_start >= 64) {
      if (windows_in_step == 2) flush();
      window_start = placed(n, offset);
      (windows_in_step == 0 ? step.window_a : step.window_b) = window_start;
      ++windows_in_step;
    }
    const auto position = static_cast<int>(offset - window_start);
    const bool second = windows_in_step == 2;
    step.index[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(position + (second ? 64 : 0));
    (second ? step.load_b : step.load_a) |= std::uint64_t{1} << position;
    step.take |= std::uint64_t{1} << j;
  }
  flush();
}

// single_block: the program covers one block, rounded up to whole chunks (see
// gather_block_program_for); else one period of blocks continued at stream_src_stride. line_phase:
// see gather_program_for.
std::shared_ptr<const gather_program> build(std::span<const permute_axis> inner, std::size_t width,
                                            std::int64_t stream_src_stride, bool single_block, std::int64_t line_phase,
                                            bool lines_where_they_fit, std::int64_t joined_periods,
                                            gather_layout layout) {
  const std::int64_t chunk = chunk_bytes_of(layout);
  std::int64_t block = static_cast<std::int64_t>(width);
  for (const permute_axis& axis : inner) block *= axis.extent;
  const std::int64_t period =
      single_block ? (block + chunk - 1) / chunk * chunk : std::lcm(block, chunk) * joined_periods;
  if (period > max_gather_period_bytes) return nullptr;
  const std::vector<std::int64_t> map = block_map(inner, width, block);

  auto program = std::make_shared<gather_program>();
  program->layout = layout;
  program->chunk_bytes = chunk;
  program->period_dst_bytes = period;
  program->single_block = single_block;
  program->line_phase = line_phase;
  program->lines_where_they_fit = lines_where_they_fit && line_phase != unlined;
  program->joined_periods = single_block ? 1 : joined_periods;
  program->period_src_bytes = (period / block) * stream_src_stride;
  std::array<std::int64_t, 64> offsets{};
  for (std::int64_t c = 0; c < period / chunk; ++c) {
    // A single block's last chunk has bytes past the block: no step supplies them.
    const int bytes = static_cast<int>(std::min<std::int64_t>(chunk, (single_block ? block : period) - c * chunk));
    for (int j = 0; j < bytes; ++j) {
      const std::int64_t p = c * chunk + j;
      offsets[static_cast<std::size_t>(j)] = (p / block) * stream_src_stride + map[static_cast<std::size_t>(p % block)];
    }
    if (layout == gather_layout::halves_of_16) {
      add_halves_chunk(*program, offsets, bytes);
    } else {
      add_pairs_chunk(*program, offsets, bytes, line_phase, program->lines_where_they_fit);
    }
    program->chunk_end.push_back(static_cast<std::uint32_t>(program->steps.size()));
  }
  // The windows' union, as merged intervals: the last one ends at the program's reach. The period's
  // source start is not line-aligned, so each interval takes a prefetch every 64 bytes and at its
  // last byte. (A halves_of_16 step's window b is loaded even where it supplies nothing.)
  const std::int64_t window = window_bytes_of(layout);
  std::vector<std::pair<std::int64_t, std::int64_t>> windows;
  for (const gather_step& made : program->steps) {
    windows.emplace_back(made.window_a, made.window_a + window);
    if (made.load_b != 0 || layout == gather_layout::halves_of_16) {
      windows.emplace_back(made.window_b, made.window_b + window);
    }
  }
  std::sort(windows.begin(), windows.end());
  for (std::size_t i = 0; i < windows.size();) {
    const std::int64_t start = windows[i].first;
    std::int64_t end = windows[i].second;
    for (++i; i < windows.size() && windows[i].first <= end; ++i) end = std::max(end, windows[i].second);
    program->reach = std::max(program->reach, end);
    for (std::int64_t at = start; at < end; at += 64) program->prefetch_offsets.push_back(at);
    program->prefetch_offsets.push_back(end - 1);
  }
  return program;
}

// Throughput costs, in permutes, measured on a Zen 4 (family 19h, model 11h) by a loop of eight
// independent operations of one kind: a 64-byte load across two lines 1.8 (1.1 within one), a
// two-source byte permute 1, a 64-byte store 2 (which bounds a copy). A chunk costs the largest of
// its loads', permutes' and store's sums: they issue on separate ports.
constexpr double crossing_load_cycles = 1.8;
constexpr double lined_load_cycles = 1.1;
constexpr double permute_cycles = 1.0;
constexpr double store_cycles = 2.0;
// Groups are kept where they save at least this share of the program's estimated cycles.
constexpr double min_group_saving = 0.1;

// The source offsets (from the period's source start) of a chunk's output bytes, from its steps.
std::array<std::int64_t, 64> chunk_offsets(const gather_program& program, std::size_t chunk, std::uint64_t& bytes) {
  std::array<std::int64_t, 64> offsets{};
  bytes = 0;
  const std::uint32_t first = chunk == 0 ? 0 : program.chunk_end[chunk - 1];
  for (std::uint32_t k = first; k < program.chunk_end[chunk]; ++k) {
    const gather_step& step = program.steps[k];
    for (std::size_t j = 0; j < 64; ++j) {
      if ((step.take >> j & 1U) == 0) continue;
      const std::int64_t index = step.index[j];
      offsets[j] = index < 64 ? step.window_a + index : step.window_b + index - 64;
      bytes |= std::uint64_t{1} << j;
    }
  }
  return offsets;
}

// The fewest 64-byte windows covering `offsets`, each starting at an offset, or with a line_phase
// (see gather_program_for) at the start of the line holding it.
std::vector<std::int64_t> cover(std::vector<std::int64_t> offsets, std::int64_t line_phase) {
  std::sort(offsets.begin(), offsets.end());
  std::vector<std::int64_t> starts;
  for (std::int64_t offset : offsets) {
    if (starts.empty() || offset - starts.back() >= 64) {
      starts.push_back(line_phase == unlined ? offset : (offset + line_phase) / 64 * 64 - line_phase);
    }
  }
  return starts;
}

double chunk_cycles(double loads, double steps, std::int64_t line_phase) {
  const double load_cycles = line_phase == unlined ? crossing_load_cycles : lined_load_cycles;
  return std::max({load_cycles * loads, permute_cycles * steps, store_cycles});
}

// `program` with its chunks in groups of up to `most_windows` windows that share them
// (gather_program::chunk_groups), or null where that would not save loads (see
// grouped_gather_program_for).
std::shared_ptr<const gather_program> group_chunks(const gather_program& program, int most_windows) {
  if (program.layout != gather_layout::pairs_of_64 || program.single_block) return nullptr;
  const std::size_t chunks = program.chunk_end.size();
  std::vector<std::array<std::int64_t, 64>> offsets(chunks);
  std::vector<std::uint64_t> bytes(chunks);
  double old_cycles = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    offsets[c] = chunk_offsets(program, c, bytes[c]);
    if (bytes[c] != ~std::uint64_t{0}) return nullptr;  // whole periods have whole chunks
    const std::uint32_t first = c == 0 ? 0 : program.chunk_end[c - 1];
    double loads = 0;
    for (std::uint32_t k = first; k < program.chunk_end[c]; ++k) loads += program.steps[k].load_b != 0 ? 2 : 1;
    old_cycles += chunk_cycles(loads, program.chunk_end[c] - first, program.line_phase);
  }
  auto grouped = std::make_shared<gather_program>(program);
  double new_cycles = 0;
  for (std::size_t c0 = 0; c0 < chunks;) {
    std::vector<std::int64_t> best_windows;
    std::size_t best_count = 0;
    double best_per_chunk = 0;
    for (std::size_t count = 1; count <= static_cast<std::size_t>(max_group_chunks) && c0 + count <= chunks; ++count) {
      std::vector<std::int64_t> all;
      for (std::size_t c = c0; c < c0 + count; ++c) all.insert(all.end(), offsets[c].begin(), offsets[c].end());
      std::vector<std::int64_t> windows = cover(std::move(all), program.line_phase);
      if (windows.size() > static_cast<std::size_t>(most_windows)) break;
      const auto w = static_cast<double>(windows.size());
      const double per_chunk = chunk_cycles(w / static_cast<double>(count), std::ceil(w / 2), program.line_phase);
      if (best_count == 0 || per_chunk <= best_per_chunk) {
        best_windows = std::move(windows);
        best_count = count;
        best_per_chunk = per_chunk;
      }
    }
    if (best_count == 0) return nullptr;  // a chunk alone needs more windows than a group holds
    gather_chunk_group group;
    group.first_chunk = static_cast<std::uint32_t>(c0);
    group.chunks = static_cast<std::uint32_t>(best_count);
    group.first_window = static_cast<std::uint32_t>(grouped->group_windows.size());
    group.windows = static_cast<std::uint32_t>(best_windows.size());
    group.first_step = static_cast<std::uint32_t>(grouped->group_steps.size());
    const std::size_t steps = (best_windows.size() + 1) / 2;
    for (std::size_t c = c0; c < c0 + best_count; ++c) {
      std::vector<gather_step> made(steps);
      for (std::size_t j = 0; j < 64; ++j) {
        const std::int64_t offset = offsets[c][j];
        // The window holding the byte: the last that starts at or before it (windows are disjoint).
        const auto after = std::upper_bound(best_windows.begin(), best_windows.end(), offset);
        const auto window = static_cast<std::size_t>(after - best_windows.begin()) - 1;
        gather_step& step = made[window / 2];
        step.index[j] = static_cast<std::uint8_t>(offset - best_windows[window] + (window % 2 == 1 ? 64 : 0));
        step.take |= std::uint64_t{1} << j;
      }
      grouped->group_steps.insert(grouped->group_steps.end(), made.begin(), made.end());
    }
    for (std::int64_t start : best_windows) {
      grouped->group_windows.push_back(start);
      grouped->reach = std::max(grouped->reach, start + 64);
    }
    grouped->chunk_groups.push_back(group);
    new_cycles += best_per_chunk * static_cast<double>(best_count);
    c0 += best_count;
  }
  if (new_cycles > (1 - min_group_saving) * old_cycles) return nullptr;
  return grouped;
}

// `grouped`: the program with its chunks in groups where they pay (group_chunks), else the plain
// one.
std::shared_ptr<const gather_program> cached_program(std::span<const permute_axis> inner, std::size_t width,
                                                     std::int64_t stream_src_stride, bool single_block,
                                                     std::int64_t line_phase, gather_layout layout,
                                                     bool grouped = false, int most_group_windows = 0,
                                                     bool lines_where_they_fit = false,
                                                     std::int64_t joined_periods = 1) {
  // A few programs suffice: a process usually repeats a handful of shapes. A plan may take up to 18
  // (its program and up to 8 lined ones, each also grouped).
  constexpr std::size_t capacity = 32;
  static std::mutex mutex;
  static std::vector<std::pair<program_key, std::shared_ptr<const gather_program>>> cache;
  program_key key;
  for (const permute_axis& axis : inner) key.inner.push_back(axis);
  key.width = width;
  key.stream_src_stride = stream_src_stride;
  key.single_block = single_block;
  key.line_phase = line_phase;
  key.lines_where_they_fit = lines_where_they_fit;
  key.joined_periods = joined_periods;
  key.layout = layout;
  key.grouped = grouped;
  key.most_group_windows = most_group_windows;
  {
    const std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < cache.size(); ++i) {
      if (cache[i].first == key) {
        // Most recent first, so the oldest leaves when the cache is full.
        std::rotate(cache.begin(), cache.begin() + static_cast<std::ptrdiff_t>(i),
                    cache.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return cache.front().second;
      }
    }
  }
  std::shared_ptr<const gather_program> program;
  if (grouped) {
    std::shared_ptr<const gather_program> plain = cached_program(inner, width, stream_src_stride, single_block,
                                                                 line_phase, layout, false, 0, false, joined_periods);
    program = plain ? group_chunks(*plain, most_group_windows) : nullptr;
    if (!program) program = std::move(plain);
  } else {
    program =
        build(inner, width, stream_src_stride, single_block, line_phase, lines_where_they_fit, joined_periods, layout);
  }
  const std::lock_guard lock(mutex);
  if (cache.size() == capacity) cache.pop_back();
  cache.insert(cache.begin(), {std::move(key), program});
  return program;
}

}  // namespace

std::shared_ptr<const gather_program> gather_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                         std::int64_t stream_src_stride, std::int64_t line_phase,
                                                         gather_layout layout, bool lines_where_they_fit,
                                                         std::int64_t joined_periods) {
  // Lined windows are a pairs_of_64 refinement: a 16-byte load crosses a line a quarter as often.
  if (layout == gather_layout::halves_of_16 && line_phase != unlined) return nullptr;
  return cached_program(inner, width, stream_src_stride, false, line_phase, layout, false, 0, lines_where_they_fit,
                        joined_periods);
}

std::shared_ptr<const gather_program> grouped_gather_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                                 std::int64_t stream_src_stride,
                                                                 std::int64_t line_phase, int most_windows,
                                                                 std::int64_t joined_periods) {
  return cached_program(inner, width, stream_src_stride, false, line_phase, gather_layout::pairs_of_64, true,
                        std::clamp(most_windows, 1, max_group_windows), false, joined_periods);
}

std::shared_ptr<const gather_program> gather_block_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                               std::int64_t line_phase, gather_layout layout,
                                                               bool lines_where_they_fit) {
  if (layout == gather_layout::halves_of_16 && line_phase != unlined) return nullptr;
  return cached_program(inner, width, 0, true, line_phase, layout, false, 0, lines_where_they_fit);
}

}  // namespace regrid::kernels
