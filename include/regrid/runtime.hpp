// Runtime controls: threading.
#pragma once

namespace regrid {

/// Threads used by regrid's operators. Starts as REGRID_NUM_THREADS from the
/// environment, else the number of hardware threads.
int num_threads() noexcept;

/// Sets the number of threads (>= 1); 1 runs everything on the calling thread.
void set_num_threads(int count);

}  // namespace regrid
