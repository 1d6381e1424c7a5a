// Exercises the installed headers and library: the TensorFlow seed example, and an error.
#include <regrid/regrid.hpp>

#include <cstdio>
#include <numeric>

int main() {
  regrid::tensor x(regrid::dtype::int32, {1, 4, 4, 1});
  const int values[] = {1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16};
  std::copy(std::begin(values), std::end(values), x.data_as<int>());
  const regrid::tensor y = regrid::space_to_depth(x, {.block_size = 2, .framework = regrid::framework::tf});
  for (int i = 0; i < 16; ++i) {
    if (y.data_as<int>()[i] != i + 1) {
      std::printf("wrong value %d at %d\n", y.data_as<int>()[i], i);
      return 1;
    }
  }
  try {
    (void)regrid::depth_to_space_shape(std::vector<std::int64_t>{1, 12, 2, 2}, {.block_size = 3});
    return 1;
  } catch (const regrid::error& failure) {
    std::printf("consumer ok: %s\n", failure.what());
  }
  return 0;
}
