// CPU kernel of FFT: our own transforms, O(n log n) for every length. A plan factors n into
// radices 4, 2, 3, 5, 7, 11, 13 (recursive decimation in time, out of place, twiddles computed
// in double); a length with a larger prime factor runs Bluestein's algorithm (a chirp
// convolution through a power-of-two transform). Only forward plans exist: the inverse is
// conj(F(conj(x))) / n. Multi-axis transforms run one axis at a time, each line gathered into a
// contiguous buffer, the lines of an axis spread over the pool. Plans are cached per length.
#include <cmath>
#include <complex>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <type_traits>
#include <vector>

#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "core/thread_pool.h"
#include "ops/fft.h"

namespace tessera {

namespace {

using cf = std::complex<float>;

constexpr int kLargestRadix = 13;

class Plan {
 public:
  explicit Plan(int n) : n_(n) {
    int rest = n;
    for (int p : {4, 2, 3, 5, 7, 11, 13}) {
      while (rest % p == 0) {
        factors_.push_back(p);
        rest /= p;
      }
    }
    if (rest > 1) {
      init_bluestein();
      return;
    }
    twiddles_.resize(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      const double angle = -2.0 * std::numbers::pi * j / n;
      twiddles_[j] = cf(static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle)));
    }
  }

  int size() const { return n_; }
  // Elements of scratch execute needs beside the output.
  size_t scratch_size() const { return bluestein_ ? 2 * static_cast<size_t>(m_) + sub_->scratch_size() : 0; }

  // out[k] = sum_j in[j] exp(-2 pi i jk / n); `in` and `out` must not overlap.
  void forward(const cf* in, cf* out, cf* scratch) const {
    if (n_ == 1) {
      out[0] = in[0];
      return;
    }
    if (bluestein_) {
      run_bluestein(in, out, scratch);
      return;
    }
    work(out, in, 1, 0, n_);
  }

 private:
  // Below this many points a (sub-)transform runs on one thread.
  static constexpr int kParallelPoints = 1 << 15;

  void work(cf* out, const cf* in, int fstride, size_t f, int n) const {
    const int p = factors_[f], m = n / p;
    const bool parallel = n >= kParallelPoints && detail::num_threads() > 1;
    if (m == 1) {
      for (int q = 0; q < p; ++q) out[q] = in[static_cast<size_t>(q) * fstride];
    } else if (parallel) {
      // The p sub-transforms are independent (large transforms: the outermost levels).
      detail::parallel_for(static_cast<size_t>(p), 1, [&](size_t q0, size_t q1) {
        for (size_t q = q0; q < q1; ++q) {
          work(out + q * m, in + q * fstride, fstride * p, f + 1, m);
        }
      });
    } else {
      for (int q = 0; q < p; ++q) work(out + static_cast<size_t>(q) * m, in + static_cast<size_t>(q) * fstride, fstride * p, f + 1, m);
    }
    if (parallel) {
      cpu::parallel_blocks(static_cast<size_t>(m), 4096, [&](size_t k0, size_t k1) {
        butterflies(out, fstride, p, m, static_cast<int>(k0), static_cast<int>(k1));
      });
    } else {
      butterflies(out, fstride, p, m, 0, m);
    }
  }

  // The radix-p butterflies k0..k1 of a sub-transform of p * m points.
  void butterflies(cf* out, int fstride, int p, int m, int k0, int k1) const {
    const cf* tw = twiddles_.data();
    if (p == 2) {
      for (int k = k0; k < k1; ++k) {
        const cf a = out[k], b = out[k + m] * tw[static_cast<size_t>(k) * fstride];
        out[k] = a + b;
        out[k + m] = a - b;
      }
    } else if (p == 4) {
      for (int k = k0; k < k1; ++k) {
        const size_t s = static_cast<size_t>(k) * fstride;
        const cf t0 = out[k], t1 = out[k + m] * tw[s], t2 = out[k + 2 * m] * tw[2 * s],
                 t3 = out[k + 3 * m] * tw[3 * s];
        const cf a = t0 + t2, b = t0 - t2, c = t1 + t3, d = t1 - t3;
        const cf mid(d.imag(), -d.real());  // -i * d
        out[k] = a + c;
        out[k + m] = b + mid;
        out[k + 2 * m] = a - c;
        out[k + 3 * m] = b - mid;
      }
    } else {
      // A p-point DFT per butterfly: its roots are every (n_ / p)-th twiddle.
      cf t[kLargestRadix];
      const size_t root = static_cast<size_t>(n_ / p);
      for (int k = k0; k < k1; ++k) {
        for (int q = 0; q < p; ++q) {
          t[q] = q == 0 ? out[k] : out[k + q * m] * tw[static_cast<size_t>(q) * k * fstride];
        }
        for (int u = 0; u < p; ++u) {
          cf acc = t[0];
          for (int q = 1; q < p; ++q) acc += t[q] * tw[(static_cast<size_t>(u) * q % p) * root];
          out[k + u * m] = acc;
        }
      }
    }
  }

  void init_bluestein() {
    bluestein_ = true;
    m_ = 1;
    while (m_ < 2 * n_ - 1) m_ *= 2;
    sub_ = std::make_unique<Plan>(m_);
    chirp_.resize(static_cast<size_t>(n_));
    for (int64_t k = 0; k < n_; ++k) {
      // exp(-pi i k^2 / n), with k^2 reduced mod 2n so the angle stays accurate.
      const double angle = -std::numbers::pi * static_cast<double>((k * k) % (2 * int64_t{n_})) / n_;
      chirp_[k] = cf(static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle)));
    }
    std::vector<cf> b(static_cast<size_t>(m_), cf(0.0f));
    for (int k = 0; k < n_; ++k) {
      b[k] = std::conj(chirp_[k]);
      if (k > 0) b[m_ - k] = std::conj(chirp_[k]);
    }
    kernel_.resize(static_cast<size_t>(m_));
    std::vector<cf> scratch(sub_->scratch_size());
    sub_->forward(b.data(), kernel_.data(), scratch.data());
  }

  // X = chirp * conv(x * chirp, conj(chirp)), the convolution as a product of transforms.
  void run_bluestein(const cf* in, cf* out, cf* scratch) const {
    cf* a = scratch;
    cf* fa = scratch + m_;
    cf* rest = scratch + 2 * static_cast<size_t>(m_);
    for (int k = 0; k < n_; ++k) a[k] = in[k] * chirp_[k];
    std::fill(a + n_, a + m_, cf(0.0f));
    sub_->forward(a, fa, rest);
    // The inverse transform as conj(F(conj(.))) / m.
    for (int k = 0; k < m_; ++k) a[k] = std::conj(fa[k] * kernel_[k]);
    sub_->forward(a, fa, rest);
    const float inv_m = 1.0f / static_cast<float>(m_);
    for (int k = 0; k < n_; ++k) out[k] = chirp_[k] * std::conj(fa[k]) * inv_m;
  }

  int n_;
  std::vector<int> factors_;
  std::vector<cf> twiddles_;
  bool bluestein_ = false;
  int m_ = 0;
  std::unique_ptr<Plan> sub_;
  std::vector<cf> chirp_, kernel_;
};

std::shared_ptr<const Plan> plan_for(int n) {
  static std::mutex mu;
  static std::map<int, std::shared_ptr<const Plan>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 32) cache.erase(cache.begin());
  auto plan = std::make_shared<const Plan>(n);
  cache.emplace(n, plan);
  return plan;
}

// Element offsets of the first element of every line along `axis` of a row-contiguous shape.
std::vector<int64_t> line_starts(const Shape& shape, int axis) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  std::vector<int64_t> starts;
  starts.reserve(static_cast<size_t>(outer * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) starts.push_back(o * inner * shape[axis] + i);
  }
  return starts;
}

int64_t stride_of(const Shape& shape, int axis) {
  int64_t s = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) s *= shape[d];
  return s;
}

// The complex transform of every line along `axis` of `data` (row-contiguous, `shape`), in place.
void transform_axis(cf* data, const Shape& shape, int axis, bool inverse) {
  const int n = shape[axis];
  if (n <= 1 && !inverse) return;
  auto plan = plan_for(n);
  const auto starts = line_starts(shape, axis);
  const int64_t stride = stride_of(shape, axis);
  const float scale = inverse ? 1.0f / static_cast<float>(n) : 1.0f;
  cpu::parallel_blocks(starts.size(), std::max<size_t>(1, 16384 / static_cast<size_t>(n)), [&](size_t b, size_t e) {
    std::vector<cf> in(static_cast<size_t>(n)), out(static_cast<size_t>(n)), scratch(plan->scratch_size());
    for (size_t l = b; l < e; ++l) {
      cf* line = data + starts[l];
      for (int k = 0; k < n; ++k) in[k] = inverse ? std::conj(line[k * stride]) : line[k * stride];
      plan->forward(in.data(), out.data(), scratch.data());
      for (int k = 0; k < n; ++k) line[k * stride] = inverse ? std::conj(out[k]) * scale : out[k];
    }
  });
}

}  // namespace

void FFT::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const array& in = inputs[0];
  const int last = axes_.back();
  if (!real_) {
    cpu::copy_into(in, out);
    for (int ax : axes_) transform_axis(out.data<cf>(), out.shape(), ax, inverse_);
    return;
  }
  if (!inverse_) {
    // Real lines along the last axis into their n/2+1 frequencies, then the other axes.
    const array x = cpu::ensure_row_contiguous(in);
    const int n = x.shape(last), half = n / 2 + 1;
    auto plan = plan_for(n);
    const auto src_starts = line_starts(x.shape(), last);
    const auto dst_starts = line_starts(out.shape(), last);
    const int64_t ss = stride_of(x.shape(), last), ds = stride_of(out.shape(), last);
    const float* src = x.data<float>();
    cf* dst = out.data<cf>();
    cpu::parallel_blocks(src_starts.size(), std::max<size_t>(1, 16384 / static_cast<size_t>(n)), [&](size_t b, size_t e) {
      std::vector<cf> buf(static_cast<size_t>(n)), res(static_cast<size_t>(n)), scratch(plan->scratch_size());
      for (size_t l = b; l < e; ++l) {
        for (int k = 0; k < n; ++k) buf[k] = cf(src[src_starts[l] + k * ss], 0.0f);
        plan->forward(buf.data(), res.data(), scratch.data());
        for (int k = 0; k < half; ++k) dst[dst_starts[l] + k * ds] = res[k];
      }
    });
    for (int ax : axes_) {
      if (ax != last) transform_axis(dst, out.shape(), ax, false);
    }
    return;
  }
  // Complex to real: the other axes first (on a copy), then each Hermitian line of the last
  // axis completed to n frequencies and inverted (the imaginary parts of DC and Nyquist are
  // ignored, as NumPy does).
  array tmp(allocator::malloc(in.size() * sizeof(cf)), in.shape(), complex64, allocator::free);
  cpu::copy_into(in, tmp);
  cf* spec = tmp.data<cf>();
  for (int ax : axes_) {
    if (ax != last) transform_axis(spec, tmp.shape(), ax, true);
  }
  const int n = out.shape(last), half = tmp.shape(last);
  auto plan = plan_for(n);
  const auto src_starts = line_starts(tmp.shape(), last);
  const auto dst_starts = line_starts(out.shape(), last);
  const int64_t ss = stride_of(tmp.shape(), last), ds = stride_of(out.shape(), last);
  float* dst = out.data<float>();
  const float scale = 1.0f / static_cast<float>(n);
  cpu::parallel_blocks(src_starts.size(), std::max<size_t>(1, 16384 / static_cast<size_t>(n)), [&](size_t b, size_t e) {
    std::vector<cf> buf(static_cast<size_t>(n)), res(static_cast<size_t>(n)), scratch(plan->scratch_size());
    for (size_t l = b; l < e; ++l) {
      const cf* line = spec + src_starts[l];
      for (int k = 0; k < n; ++k) {
        // Frequency k of the full spectrum; conjugated for the inverse-by-conjugation.
        cf v;
        if (k < half) {
          v = line[k * ss];
        } else {
          v = std::conj(line[(n - k) * ss]);
        }
        if (k == 0 || (n % 2 == 0 && k == n / 2)) v = cf(v.real(), 0.0f);
        buf[k] = std::conj(v);
      }
      plan->forward(buf.data(), res.data(), scratch.data());
      for (int k = 0; k < n; ++k) dst[dst_starts[l] + k * ds] = res[k].real() * scale;
    }
  });
}

void Hadamard::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = x.shape(-1), rows = static_cast<int64_t>(x.size()) / n;
  // n = m * p, p a power of two: Sylvester butterflies inside each of the m blocks of p, then H_m
  // across the blocks. Accumulates in float (double for float64) and rounds once.
  const int m = hadamard_factor(n);
  const int64_t p = n / m;
  const uint32_t* hm = hadamard_rows(m);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    cpu::parallel_blocks(static_cast<size_t>(rows), std::max<size_t>(1, 16384 / static_cast<size_t>(n)), [&](size_t b, size_t e) {
      std::vector<A> v(static_cast<size_t>(n)), col(static_cast<size_t>(m));
      for (size_t r = b; r < e; ++r) {
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, double>) v[i] = src[r * n + i];
          else v[i] = static_cast<float>(src[r * n + i]);
        }
        // In-place butterflies: (a, b) -> (a + b, a - b) at strides 1, 2, 4, ...
        for (int64_t h = 1; h < p; h *= 2) {
          for (int64_t i = 0; i < n; i += 2 * h) {
            for (int64_t j = i; j < i + h; ++j) {
              const A a = v[j], c = v[j + h];
              v[j] = a + c;
              v[j + h] = a - c;
            }
          }
        }
        if (m > 1) {
          for (int64_t i = 0; i < p; ++i) {
            for (int k = 0; k < m; ++k) col[k] = v[i + k * p];
            for (int j = 0; j < m; ++j) {
              A acc = 0;
              for (int k = 0; k < m; ++k) {
                const bool plus = transposed_ ? (hm[k] >> j) & 1u : (hm[j] >> k) & 1u;
                acc += plus ? col[k] : -col[k];
              }
              v[i + j * p] = acc;
            }
          }
        }
        for (int64_t i = 0; i < n; ++i) dst[r * n + i] = T(v[i] * static_cast<A>(scale_));
      }
    });
  };
  const Dtype dt = out.dtype();
  if (dt == float32) run(float{});
  else if (dt == float64) run(double{});
  else if (dt == float16) run(float16_t{});
  else if (dt == bfloat16) run(bfloat16_t{});
  else throw std::invalid_argument("[hadamard_transform] no CPU kernel for dtype " + dtype_name(dt));
}

}  // namespace tessera
