// CUDA kernels of the sum and min segment trees. Plain CUDA, no torch headers:
// segment_tree_cuda_binding.cpp unpacks the tensors and calls the launchers below.
// The arithmetic matches segment_tree_cpu.cpp and the pure-torch fallback.
#include <cuda_runtime.h>

#include <cstdint>

namespace rl_buffers {
namespace {

constexpr int kThreads = 256;

template <typename scalar_t>
__device__ __forceinline__ scalar_t combine(scalar_t a, scalar_t b, int64_t op) {
  return op == 0 ? a + b : (b < a ? b : a);
}

template <typename scalar_t>
__global__ void set_leaves_kernel(scalar_t* tree, int64_t capacity, const int64_t* index,
                                  const scalar_t* value, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) tree[capacity + index[i]] = value[i];
}

// Recomputes the ancestor `level` levels above each updated leaf. Two threads may
// write the same parent: they write the same value, read from finished children.
template <typename scalar_t>
__global__ void update_level_kernel(scalar_t* tree, int64_t capacity, const int64_t* index,
                                    int64_t n, int level, int64_t op) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const int64_t node = (capacity + index[i]) >> level;
    tree[node] = combine<scalar_t>(tree[2 * node], tree[2 * node + 1], op);
  }
}

template <typename scalar_t>
__global__ void query_kernel(const scalar_t* tree, int64_t capacity, int64_t start, int64_t end,
                             int64_t op, scalar_t neutral, scalar_t* out) {
  scalar_t res = neutral;
  int64_t l = start + capacity;
  int64_t r = end + capacity;
  while (l < r) {
    if (l & 1) {
      res = combine<scalar_t>(res, tree[l], op);
      ++l;
    }
    if (r & 1) {
      --r;
      res = combine<scalar_t>(res, tree[r], op);
    }
    l >>= 1;
    r >>= 1;
  }
  *out = res;
}

template <typename scalar_t>
__global__ void scan_kernel(const scalar_t* tree, int64_t capacity, const scalar_t* mass,
                            int64_t* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  scalar_t x = mass[i];
  int64_t node = 1;
  while (node < capacity) {
    const int64_t left = 2 * node;
    const scalar_t lv = tree[left];
    if (x >= lv) {
      x = x - lv;
      node = left + 1;
    } else {
      node = left;
    }
  }
  out[i] = node - capacity;
}

inline unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

}  // namespace

// `index` must be free of duplicates (the Python side keeps the last write).
template <typename scalar_t>
cudaError_t launch_update(scalar_t* tree, int64_t capacity, const int64_t* index,
                          const scalar_t* value, int64_t n, int64_t op, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  set_leaves_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(tree, capacity, index,
                                                                       value, n);
  int levels = 0;
  for (int64_t c = capacity; c > 1; c >>= 1) ++levels;
  for (int level = 1; level <= levels; ++level) {
    update_level_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(tree, capacity, index,
                                                                          n, level, op);
  }
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_query(const scalar_t* tree, int64_t capacity, int64_t start, int64_t end,
                         int64_t op, scalar_t neutral, scalar_t* out, cudaStream_t stream) {
  query_kernel<scalar_t><<<1, 1, 0, stream>>>(tree, capacity, start, end, op, neutral, out);
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_scan(const scalar_t* tree, int64_t capacity, const scalar_t* mass,
                        int64_t* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scan_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(tree, capacity, mass, out, n);
  return cudaGetLastError();
}

template cudaError_t launch_update<float>(float*, int64_t, const int64_t*, const float*, int64_t,
                                          int64_t, cudaStream_t);
template cudaError_t launch_update<double>(double*, int64_t, const int64_t*, const double*,
                                           int64_t, int64_t, cudaStream_t);
template cudaError_t launch_query<float>(const float*, int64_t, int64_t, int64_t, int64_t, float,
                                         float*, cudaStream_t);
template cudaError_t launch_query<double>(const double*, int64_t, int64_t, int64_t, int64_t,
                                          double, double*, cudaStream_t);
template cudaError_t launch_scan<float>(const float*, int64_t, const float*, int64_t*, int64_t,
                                        cudaStream_t);
template cudaError_t launch_scan<double>(const double*, int64_t, const double*, int64_t*, int64_t,
                                         cudaStream_t);

}  // namespace rl_buffers
