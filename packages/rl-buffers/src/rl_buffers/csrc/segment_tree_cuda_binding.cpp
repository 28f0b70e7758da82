// Registers the CUDA implementations of the rl_buffers_segtree operators declared
// in segment_tree_cpu.cpp (that library must be loaded first).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <torch/library.h>

#include <limits>

namespace rl_buffers {

template <typename scalar_t>
cudaError_t launch_update(scalar_t* tree, int64_t capacity, const int64_t* index,
                          const scalar_t* value, int64_t n, int64_t op, cudaStream_t stream);
template <typename scalar_t>
cudaError_t launch_query(const scalar_t* tree, int64_t capacity, int64_t start, int64_t end,
                         int64_t op, scalar_t neutral, scalar_t* out, cudaStream_t stream);
template <typename scalar_t>
cudaError_t launch_scan(const scalar_t* tree, int64_t capacity, const scalar_t* mass,
                        int64_t* out, int64_t n, cudaStream_t stream);

namespace {

void check(cudaError_t err) {
  TORCH_CHECK(err == cudaSuccess, "segment tree CUDA kernel failed: ", cudaGetErrorString(err));
}

void check_tree(const at::Tensor& tree, int64_t capacity) {
  TORCH_CHECK(tree.dim() == 1 && tree.numel() == 2 * capacity && tree.is_contiguous(),
              "segment tree: expected a contiguous 1-d tree of ", 2 * capacity, " entries");
}

void update_cuda(at::Tensor tree, int64_t capacity, const at::Tensor& index,
                 const at::Tensor& value, int64_t op) {
  check_tree(tree, capacity);
  c10::cuda::CUDAGuard guard(tree.device());
  auto idx = index.to(tree.device(), at::kLong).contiguous();
  auto val = value.to(tree.device(), tree.scalar_type()).contiguous();
  TORCH_CHECK(idx.numel() == val.numel(), "segment tree update: index and value sizes differ");
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(tree.scalar_type(), "segment_tree_update_cuda", [&] {
    check(launch_update<scalar_t>(tree.data_ptr<scalar_t>(), capacity, idx.data_ptr<int64_t>(),
                                  val.data_ptr<scalar_t>(), idx.numel(), op, stream));
  });
}

at::Tensor query_cuda(const at::Tensor& tree, int64_t capacity, int64_t start, int64_t end,
                      int64_t op) {
  check_tree(tree, capacity);
  TORCH_CHECK(0 <= start && start <= end && end <= capacity, "segment tree query: bad range");
  c10::cuda::CUDAGuard guard(tree.device());
  at::Tensor out = at::empty({}, tree.options());
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(tree.scalar_type(), "segment_tree_query_cuda", [&] {
    const scalar_t neutral =
        op == 0 ? scalar_t(0) : std::numeric_limits<scalar_t>::infinity();
    check(launch_query<scalar_t>(tree.data_ptr<scalar_t>(), capacity, start, end, op, neutral,
                                 out.data_ptr<scalar_t>(), stream));
  });
  return out;
}

at::Tensor scan_lower_bound_cuda(const at::Tensor& tree, int64_t capacity, const at::Tensor& mass) {
  check_tree(tree, capacity);
  c10::cuda::CUDAGuard guard(tree.device());
  auto m = mass.to(tree.device(), tree.scalar_type()).contiguous();
  at::Tensor out = at::empty(m.sizes(), tree.options().dtype(at::kLong));
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(tree.scalar_type(), "segment_tree_scan_cuda", [&] {
    check(launch_scan<scalar_t>(tree.data_ptr<scalar_t>(), capacity, m.data_ptr<scalar_t>(),
                                out.data_ptr<int64_t>(), m.numel(), stream));
  });
  return out;
}

}  // namespace
}  // namespace rl_buffers

TORCH_LIBRARY_IMPL(rl_buffers_segtree, CUDA, m) {
  m.impl("update", &rl_buffers::update_cuda);
  m.impl("query", &rl_buffers::query_cuda);
  m.impl("scan_lower_bound", &rl_buffers::scan_lower_bound_cuda);
}
