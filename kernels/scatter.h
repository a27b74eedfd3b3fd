// Row scatter-add: out's rows take src's rows added at their indices, in src's order (np.add.at's).
#pragma once
#include <cstddef>
#include <cstdint>

#include "types.h"

namespace gt {

// out [rows, width] += src [count, width] row i at row index[i], i = 0, 1, ... in order (a repeated
// index adds up in that order, as np.add.at); every index must lie in [0, rows) (checked by the caller).
void index_add_rows(void* out, const int64_t* index, const void* src, size_t count, size_t width, int32_t dtype);

}  // namespace gt
