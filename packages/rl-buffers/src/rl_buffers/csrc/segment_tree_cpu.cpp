// Sum and min segment trees for prioritized replay: the CPU kernels and the
// operator schemas. The tree is a flat tensor of 2 * capacity entries (capacity a
// power of two): the root sits at 1 and leaf i at capacity + i. Every operation
// does exactly the arithmetic of the pure-torch fallback (rl_buffers/_segment_tree_torch.py),
// in the same order, so that both give bit-identical results.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace rl_buffers {
namespace {

constexpr int64_t kSum = 0;

template <typename scalar_t>
inline scalar_t combine(scalar_t a, scalar_t b, int64_t op) {
  return op == kSum ? a + b : std::min(a, b);
}

void check_tree(const at::Tensor& tree, int64_t capacity) {
  TORCH_CHECK(tree.dim() == 1 && tree.numel() == 2 * capacity,
              "segment tree: expected a 1-d tree of 2 * capacity = ", 2 * capacity,
              " entries, got shape ", tree.sizes());
  TORCH_CHECK(tree.is_contiguous(), "segment tree: the tree tensor must be contiguous");
}

void update_cpu(at::Tensor tree, int64_t capacity, const at::Tensor& index,
                const at::Tensor& value, int64_t op) {
  check_tree(tree, capacity);
  auto idx = index.to(at::kLong).contiguous();
  auto val = value.to(tree.scalar_type()).contiguous();
  TORCH_CHECK(idx.numel() == val.numel(), "segment tree update: ", idx.numel(),
              " indices but ", val.numel(), " values");
  const int64_t* ip = idx.data_ptr<int64_t>();
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK(ip[i] >= 0 && ip[i] < capacity, "segment tree update: index ", ip[i],
                " is outside [0, ", capacity, ")");
  }
  AT_DISPATCH_FLOATING_TYPES(tree.scalar_type(), "segment_tree_update", [&] {
    scalar_t* t = tree.data_ptr<scalar_t>();
    const scalar_t* vp = val.data_ptr<scalar_t>();
    // Sequential order: the last write to a leaf wins, as in the fallback's dedup.
    for (int64_t i = 0; i < n; ++i) {
      int64_t node = ip[i] + capacity;
      t[node] = vp[i];
      node >>= 1;
      while (node >= 1) {
        t[node] = combine<scalar_t>(t[2 * node], t[2 * node + 1], op);
        node >>= 1;
      }
    }
  });
}

at::Tensor query_cpu(const at::Tensor& tree, int64_t capacity, int64_t start, int64_t end,
                     int64_t op) {
  check_tree(tree, capacity);
  TORCH_CHECK(0 <= start && start <= end && end <= capacity, "segment tree query: range [",
              start, ", ", end, ") is not inside [0, ", capacity, "]");
  at::Tensor out = at::empty({}, tree.options());
  AT_DISPATCH_FLOATING_TYPES(tree.scalar_type(), "segment_tree_query", [&] {
    const scalar_t* t = tree.data_ptr<scalar_t>();
    scalar_t res = op == kSum ? scalar_t(0) : std::numeric_limits<scalar_t>::infinity();
    int64_t l = start + capacity;
    int64_t r = end + capacity;
    while (l < r) {
      if (l & 1) {
        res = combine<scalar_t>(res, t[l], op);
        ++l;
      }
      if (r & 1) {
        --r;
        res = combine<scalar_t>(res, t[r], op);
      }
      l >>= 1;
      r >>= 1;
    }
    out.fill_(res);
  });
  return out;
}

at::Tensor scan_lower_bound_cpu(const at::Tensor& tree, int64_t capacity, const at::Tensor& mass) {
  check_tree(tree, capacity);
  auto m = mass.to(tree.scalar_type()).contiguous();
  at::Tensor out = at::empty(m.sizes(), tree.options().dtype(at::kLong));
  int64_t* op = out.data_ptr<int64_t>();
  const int64_t n = m.numel();
  AT_DISPATCH_FLOATING_TYPES(tree.scalar_type(), "segment_tree_scan", [&] {
    const scalar_t* t = tree.data_ptr<scalar_t>();
    const scalar_t* mp = m.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) {
      scalar_t x = mp[i];
      int64_t node = 1;
      while (node < capacity) {
        const int64_t left = 2 * node;
        const scalar_t lv = t[left];
        if (x >= lv) {
          x = x - lv;
          node = left + 1;
        } else {
          node = left;
        }
      }
      op[i] = node - capacity;
    }
  });
  return out;
}

}  // namespace
}  // namespace rl_buffers

TORCH_LIBRARY(rl_buffers_segtree, m) {
  m.def("update(Tensor(a!) tree, int capacity, Tensor index, Tensor value, int op) -> ()");
  m.def("query(Tensor tree, int capacity, int start, int end, int op) -> Tensor");
  m.def("scan_lower_bound(Tensor tree, int capacity, Tensor mass) -> Tensor");
}

TORCH_LIBRARY_IMPL(rl_buffers_segtree, CPU, m) {
  m.impl("update", &rl_buffers::update_cpu);
  m.impl("query", &rl_buffers::query_cpu);
  m.impl("scan_lower_bound", &rl_buffers::scan_lower_bound_cpu);
}
