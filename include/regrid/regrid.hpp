// regrid: the tensor regridding operators of the major ML frameworks, exact and fast.
#pragma once

#include "regrid/dtype.hpp"        // IWYU pragma: export
#include "regrid/roi_pool.hpp"     // IWYU pragma: export
#include "regrid/runtime.hpp"      // IWYU pragma: export
#include "regrid/space_depth.hpp"  // IWYU pragma: export
#include "regrid/status.hpp"       // IWYU pragma: export
#include "regrid/tensor.hpp"       // IWYU pragma: export
#include "regrid/version.hpp"      // IWYU pragma: export
