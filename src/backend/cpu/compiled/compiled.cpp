// CPU kernels of compile's primitives (tessera/primitives/compiled.h). Compiled runs the kernel
// built for its program and the layout of its inputs, split over the intra-op pool; when no
// kernel can be built it runs the steps one by one with the eager kernels (same values, more memory traffic).
#include <algorithm>
#include <functional>
#include <iostream>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "backend/cpu/compiled/codegen.h"
#include "backend/cpu/compiled/jit.h"
#include "backend/cpu/elementwise.h"
#include "tessera/primitives/compiled.h"
#include "core/thread_pool.h"

namespace tessera {

namespace {

constexpr int kMaxDims = 32;  // the generated kernels' position array

bool row_dense(const array& a, size_t n) {
  return a.flags().row_contiguous && a.size() == n && a.data_size() == n;
}

// Dims merged where every input's strides allow it (size-1 dims dropped); false when more than
// kMaxDims remain.
bool collapse(const Shape& shape, const std::vector<array>& inputs, std::vector<int64_t>& cshape,
              std::vector<std::vector<int64_t>>& cstrides) {
  cshape.clear();
  cstrides.assign(inputs.size(), {});
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !cshape.empty();
    for (size_t k = 0; merge && k < inputs.size(); ++k) {
      merge = cstrides[k].back() == inputs[k].strides()[d] * shape[d];
    }
    if (merge) {
      cshape.back() *= shape[d];
      for (size_t k = 0; k < inputs.size(); ++k) cstrides[k].back() = inputs[k].strides()[d];
    } else {
      cshape.push_back(shape[d]);
      for (size_t k = 0; k < inputs.size(); ++k) cstrides[k].push_back(inputs[k].strides()[d]);
    }
  }
  if (cshape.empty()) {
    cshape.push_back(1);
    for (auto& s : cstrides) s.push_back(0);
  }
  return cshape.size() <= static_cast<size_t>(kMaxDims);
}

// Step by step with the eager kernels (no compiler, or a layout the kernels do not take).
// `shapes`: each step's output shape (CompiledRows); empty: every step has the output's.
void run_unfused(const Compiled& c, const std::vector<array>& inputs, std::vector<array>& outputs,
                 const std::vector<Shape>& shapes = {}) {
  std::vector<array> values;
  for (auto& st : c.steps()) {
    std::vector<array> args;
    for (int a : st.args) args.push_back(a < 0 ? inputs[-a - 1] : values[a]);
    array v(shapes.empty() ? outputs[0].shape() : shapes[values.size()], st.dtype, st.primitive,
            args);
    std::vector<array> outs{v};
    st.primitive->eval_cpu(args, outs);
    values.push_back(v);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    outputs[o].copy_shared_buffer(values[c.output_steps()[o]]);
  }
}

// The CPU's kernels of one Compiled (its kernel_cache): by input layout, null where none could be
// built (the steps then run one by one).
struct CpuKernels : Compiled::KernelCache {
  std::mutex mutex;
  std::unordered_map<std::string, cpu::FusedKernel> by_layout;
};

// The kernel of `c` for `layout`, built on first use; null when none can be built (warned once:
// no compiler, or the compiler failed). "reduce:<layout>" asks for a CompiledReduce's kernel,
// "rows" for a CompiledRows'.
cpu::FusedKernel kernel_for(Compiled& c, const std::string& layout) {
  auto& cache = c.kernel_cache<CpuKernels>();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.by_layout.find(layout);
  if (it != cache.by_layout.end()) return it->second;
  cpu::FusedKernel k = nullptr;
  if (cpu::jit::compiler_available()) {
    try {
      if (layout == "rows") {
        k = cpu::jit::load(cpu::fused_rows_source(dynamic_cast<CompiledRows&>(c)));
      } else if (layout.rfind("reduce:", 0) == 0) {
        k = cpu::jit::load(
            cpu::fused_reduce_source(dynamic_cast<CompiledReduce&>(c), layout.substr(7)));
      } else {
        k = cpu::jit::load(cpu::fused_source(c, layout));
      }
    } catch (const std::exception& e) {
      static std::once_flag warned;
      std::call_once(warned, [&] {
        std::cerr << e.what() << "\n[compile] warning: fused kernels that fail to build run "
                                 "step by step (same values, slower).\n";
      });
    }
  }
  cache.by_layout.emplace(layout, k);
  return k;
}

}  // namespace

void Compiled::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const size_t n = outputs[0].size();
  std::vector<int64_t> cshape;
  std::vector<std::vector<int64_t>> cstrides;
  if (n == 0 || !collapse(outputs[0].shape(), inputs, cshape, cstrides)) {
    run_unfused(*this, inputs, outputs);
    return;
  }
  std::string layout;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int64_t inner = cstrides[k].back();
    layout += row_dense(inputs[k], n)          ? 'd'
              : cpu::is_scalar_like(inputs[k]) ? 's'
              : inner == 1                     ? 'r'
              : inner == 0                     ? 'b'
                                               : 'g';
  }
  cpu::FusedKernel kernel = kernel_for(*this, layout);
  if (!kernel) {
    run_unfused(*this, inputs, outputs);
    return;
  }
  // Outputs take over dense inputs that nothing else holds (each input at most once): element i
  // of an input is read before element i of the output is written.
  std::vector<bool> taken(inputs.size(), false);
  std::vector<void*> out_ptrs;
  for (auto& o : outputs) {
    bool donated = false;
    for (size_t k = 0; k < inputs.size() && !donated; ++k) {
      const array& in = inputs[k];
      if (!taken[k] && layout[k] == 'd' && in.is_donatable() && in.dtype() == o.dtype()) {
        o.copy_shared_buffer(in, in.strides(), in.flags(), n, in.offset());
        taken[k] = donated = true;
      }
    }
    if (!donated) o.set_data(allocator::malloc(o.nbytes()));
    out_ptrs.push_back(o.raw_data());
  }
  std::vector<const void*> in_ptrs;
  std::vector<int64_t> flat_strides;
  for (size_t k = 0; k < inputs.size(); ++k) {
    in_ptrs.push_back(inputs[k].raw_data());
    flat_strides.insert(flat_strides.end(), cstrides[k].begin(), cstrides[k].end());
  }
  const int nd = static_cast<int>(cshape.size());
  detail::parallel_for(n, cpu::kElementwiseGrain, [&](size_t b, size_t e) {
    kernel(in_ptrs.data(), out_ptrs.data(), static_cast<int64_t>(b), static_cast<int64_t>(e), nd,
           cshape.data(), flat_strides.data());
  });
}

namespace {

constexpr size_t kReduceBlock = size_t{1} << 14;  // the eager reduction's block (reduce.cpp)

template <typename T>
T combine(Primitive::FusedReduce op, T a, T b) {
  switch (op) {
    case Primitive::FusedReduce::max: return ((b > a) | (b != b)) ? b : a;
    case Primitive::FusedReduce::min: return ((b < a) | (b != b)) ? b : a;
    default: return a + b;
  }
}

// out[o] = reduction of the fused value over the flat elements [o * R, (o + 1) * R), blocked
// and combined as the eager reduction blocks and combines a contiguous row.
template <typename T>
void reduce_rows(cpu::FusedKernel kernel, Primitive::FusedReduce op,
                 const std::vector<const void*>& in, T* out, size_t O, size_t R) {
  auto one = [&](size_t b, size_t e) {
    T r;
    void* o[1] = {&r};
    kernel(in.data(), o, static_cast<int64_t>(b), static_cast<int64_t>(e), 0, nullptr, nullptr);
    return r;
  };
  if (R <= 2 * kReduceBlock) {
    const size_t grain = std::max<size_t>(1, (size_t{1} << 15) / std::max<size_t>(R, 1));
    detail::parallel_for(O, grain, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) out[i] = one(i * R, (i + 1) * R);
    });
    return;
  }
  const size_t nblocks = (R + kReduceBlock - 1) / kReduceBlock;
  std::vector<T> partial(nblocks);
  for (size_t i = 0; i < O; ++i) {
    cpu::parallel_blocks(R, kReduceBlock, [&](size_t lo, size_t hi) {
      partial[lo / kReduceBlock] = one(i * R + lo, i * R + hi);
    });
    for (size_t w = 1; w < nblocks; w *= 2) {
      for (size_t k = 0; k + w < nblocks; k += 2 * w) {
        partial[k] = combine(op, partial[k], partial[k + w]);
      }
    }
    out[i] = partial[0];
  }
}

}  // namespace

// Flat layouts whose reduced dims all follow the kept ones take the fused kernel; anything else
// computes the value step by step and reduces it with the reduction's own kernel.
void CompiledReduce::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  const Shape& shape = inputs[0].shape();
  const size_t n = inputs[0].size();
  bool trailing = n > 0, reducing = false;
  size_t R = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const bool red = std::find(axes_.begin(), axes_.end(), static_cast<int>(d)) != axes_.end();
    if (red) R *= static_cast<size_t>(shape[d]);
    trailing = trailing && (red || !reducing);
    reducing = reducing || red;
  }
  std::string layout;
  for (auto& in : inputs) {
    layout += row_dense(in, n) ? 'd' : cpu::is_scalar_like(in) ? 's' : 'g';
  }
  cpu::FusedKernel kernel = nullptr;
  if (trailing && layout.find('g') == std::string::npos) {
    kernel = kernel_for(*this, "reduce:" + layout);
  }
  if (!kernel) {
    array v(shape, steps()[output_steps()[0]].dtype, nullptr, {});
    std::vector<array> vs{v};
    run_unfused(*this, inputs, vs);
    std::vector<array> rin{vs[0]}, routs{out};
    reduce_->eval_cpu(rin, routs);
    return;
  }
  std::vector<const void*> in_ptrs;
  for (auto& in : inputs) in_ptrs.push_back(in.raw_data());
  out.set_data(allocator::malloc(out.nbytes()));
  const size_t O = n / R;
  if (out.dtype() == float32) {
    reduce_rows(kernel, op_, in_ptrs, out.data<float>(), O, R);
  } else {
    reduce_rows(kernel, op_, in_ptrs, out.data<double>(), O, R);
  }
}

// Inputs as their roles say (dense rows, dense per-row values, single values) and rows of at
// most 2 * kReduceBlock elements take the kernel, one row per call, rows split over the pool;
// anything else runs the steps one by one with the eager kernels (the same values).
void CompiledRows::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  auto [row, per_row] = row_shapes(inputs);
  const size_t n = static_cast<size_t>(std::accumulate(row.begin(), row.end(), int64_t{1},
                                                       std::multiplies<int64_t>()));
  size_t R = 1;
  for (int a : axes_) R *= static_cast<size_t>(row[static_cast<size_t>(a)]);
  const size_t O = R == 0 ? 0 : n / R;
  bool dense = n > 0 && R <= 2 * kReduceBlock;
  for (size_t k = 0; k < inputs.size() && dense; ++k) {
    const array& in = inputs[k];
    dense = roles_[k] == 'd'   ? row_dense(in, n)
            : roles_[k] == 'w' ? row_dense(in, O)
                               : cpu::is_scalar_like(in);
  }
  cpu::FusedKernel kernel = dense ? kernel_for(*this, "rows") : nullptr;
  if (!kernel) {
    std::vector<Shape> shapes;
    for (char level : levels_) shapes.push_back(level == 'R' ? row : per_row);
    run_unfused(*this, inputs, outputs, shapes);
    return;
  }
  // No output takes over an input's buffer: the kernel's last block of a row recomputes some
  // elements from the inputs after writing them (codegen.h).
  std::vector<void*> out_ptrs;
  for (auto& o : outputs) {
    o.set_data(allocator::malloc(o.nbytes()));
    out_ptrs.push_back(o.raw_data());
  }
  std::vector<const void*> in_ptrs;
  for (auto& in : inputs) in_ptrs.push_back(in.raw_data());
  const int64_t len = static_cast<int64_t>(R);
  const size_t grain = std::max<size_t>(1, (size_t{1} << 15) / std::max<size_t>(R, 1));
  detail::parallel_for(O, grain, [&](size_t b, size_t e) {
    kernel(in_ptrs.data(), out_ptrs.data(), static_cast<int64_t>(b), static_cast<int64_t>(e), 1,
           &len, nullptr);
  });
}

void CompileInput::eval_cpu(const std::vector<array>&, array&) {
  throw std::invalid_argument(
      "[compile] cannot evaluate an array computed from an input of a compiled function while "
      "the function is traced (eval, item or data inside it): its value is not known yet. Return "
      "it from the function instead, or call the function without compile.");
}

}  // namespace tessera
