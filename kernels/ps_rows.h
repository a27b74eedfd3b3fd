// The parameter server's row kernels: new rows' seeded values, SGD on rows, a run's row gradients summed by position.
// Callers: globaltensor/ps/init.py, ps/tables.py (servers), paddle/static/row_grads.py (trainers).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt {

// out[i, j] = lo + scale * u(i, j), float32 as numpy rounds it (u * scale, then + lo): u(i, j) the top 24 bits
// of the (j % 2) 32-bit half of splitmix64(key_i + (j / 2) * 0xD1B54A32D192ED03), times 2^-24, where
// key_i = splitmix64(ids[i] ^ table_key) (globaltensor/ps/init.py's seeded_rows for ("uniform", lo, hi)).
void ps_uniform_rows(const int64_t* ids, size_t n, uint64_t table_key, size_t dim, float scale, float lo, float* out);

// store[rows[i], c] -= lr * grads[i, c] for c < dim (float32 product, then the difference, as numpy's
// `value -= lr * grad`); rows distinct, each < the store's row count; store rows `stride` floats apart.
void ps_sgd_rows(float* store, size_t stride, const int64_t* rows, size_t n, const float* grads, size_t dim, float lr);

// out[index[i], c] += rows[i, c] for c < dim, i in order (numpy's np.add.at(out, index, rows)); index < out's rows.
void ps_add_rows(float* out, const int64_t* index, size_t n, const float* rows, size_t dim);

}  // namespace gt
