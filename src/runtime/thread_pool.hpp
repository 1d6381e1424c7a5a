// A small persistent thread pool. Operators split their work into at most
// num_threads() contiguous parts; the calling thread runs part 0.
#pragma once

#include <cstdint>
#include <functional>

namespace regrid::runtime {

/// Calls part(i) for i in [0, parts) concurrently, parts <= num_threads(), and returns when
/// all have finished. Runs serially on the caller when parts == 1, when called from inside a
/// part, or while another thread is using the pool. The first exception thrown by a part is
/// rethrown on the caller.
void run_parts(int parts, const std::function<void(int)>& part);

/// Splits [0, count) into at most `max_parts` near-equal contiguous ranges and runs
/// body(begin, end) on each through run_parts.
void parallel_for(std::int64_t count, int max_parts, const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace regrid::runtime
