// Source generation for fused kernels (codegen.h). Every step calls the functor its primitive
// names in the fusion table (fused_functor(), backend/cpu/*_ops.h), on values of the step's
// dtype, so a fused kernel rounds exactly where the eager kernels round.
#include "backend/cpu/compiled/codegen.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace tessera::cpu {

namespace {

const char* cpp_type(Dtype d) { return dtype_cpp_type(d); }  // the dtype table's spelling

// The loop body: read every non-scalar input at element `idx` (its offset expression per
// layout), run the steps, store the outputs at `out_idx`.
// With `fast`, ops with a fast form use it (fast_or_exact), and with `buffered` the outputs go
// to the block buffers b<o>. With `index`, inputs are read at that flat index and no output is
// stored (a reduction combines the last step's value).
void emit_body(std::ostringstream& os, const Compiled& c, const std::string& layout,
               bool strided, bool fast = false, const char* index = nullptr,
               bool buffered = false) {
  const auto& in = c.input_dtypes();
  for (size_t k = 0; k < in.size(); ++k) {
    const char t = layout[k];
    if (t == 's') continue;
    os << "      const " << cpp_type(in[k]) << " x" << k << " = " << (in[k] == bool_ ? "0 != " : "")
       << "p" << k << '[';
    if (index) {
      os << index;
    } else if (t == 'd') {
      os << (strided ? "i + j" : "i");
    } else if (t == 'r') {
      os << "o" << k << " + j";
    } else if (t == 'b') {
      os << "o" << k;
    } else {
      os << "o" << k << " + j * s" << k;
    }
    os << "];\n";
  }
  const auto& steps = c.steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    os << "      const " << cpp_type(steps[i].dtype) << " t" << i << " = ";
    if (fast) {
      os << "tessera::cpu::ops::fast_or_exact(" << steps[i].functor << ", slow, ";
    } else {
      os << steps[i].functor << '(';
    }
    for (size_t a = 0; a < steps[i].args.size(); ++a) {
      const int v = steps[i].args[a];
      os << (a ? ", " : "");
      if (v < 0) {
        os << 'x' << (-v - 1);
      } else {
        os << 't' << v;
      }
    }
    os << ");\n";
  }
  const auto& outs = c.output_steps();
  for (size_t o = 0; o < outs.size() && !index; ++o) {
    if (buffered) {
      os << "      b" << o << "[i - c] = t" << outs[o] << ";\n";
    } else {
      os << "      q" << o << '[' << (strided ? "i + j" : "i") << "] = t" << outs[o] << ";\n";
    }
  }
}

// The input pointers p<k>, and the single values x<k> of 's' inputs read once. Bool inputs
// are read as bytes (g++ does not vectorise loads of bool) and compared with 0.
void emit_inputs(std::ostringstream& os, const std::vector<Dtype>& in, const std::string& layout) {
  for (size_t k = 0; k < in.size(); ++k) {
    const char* t = in[k] == bool_ ? "uint8_t" : cpp_type(in[k]);
    os << "  const " << t << "* p" << k << " = static_cast<const " << t << "*>(in[" << k
       << "]);\n";
    if (layout[k] == 's') {
      os << "  const " << cpp_type(in[k]) << " x" << k << " = " << (in[k] == bool_ ? "0 != " : "")
         << "p" << k << "[0];\n";
    }
  }
}

// Whether every input, step and output of c is float32 or bfloat16 (the 16-lane loop's domain:
// bfloat16 values are held as float32 and rounded where a step of that dtype rounds).
bool all_vec16_dtypes(const Compiled& c) {
  auto ok = [](Dtype d) { return d == float32 || d == bfloat16; };
  const auto outs = c.output_dtypes();
  return std::all_of(c.input_dtypes().begin(), c.input_dtypes().end(), ok) &&
         std::all_of(outs.begin(), outs.end(), ok) &&
         std::all_of(c.steps().begin(), c.steps().end(), [&](auto& s) { return ok(s.dtype); });
}

// Names in the 16-lane code: v<k> input k's vector, w<i> step i's.
std::string vec_name(int v) { return (v < 0 ? "v" : "w") + std::to_string(v < 0 ? -v - 1 : v); }

// Input k's vector at `at` (an element offset; lanes of mask m), bfloat16 widened.
std::string vec_load(Dtype d, size_t k, const std::string& at) {
  return (d == bfloat16 ? "tessera::cpu::ops::load_bf16(m, p" : "_mm512_maskz_loadu_ps(m, p") +
         std::to_string(k) + " + " + at + ")";
}

// Step i of c on 16 lanes into w<i>, rounded to bfloat16 where that is its dtype.
void emit_vec_step(std::ostringstream& os, const Compiled& c, size_t i, const char* indent) {
  const auto& st = c.steps()[i];
  const bool bf16 = st.dtype == bfloat16;
  os << indent << "const __m512 w" << i << " = " << (bf16 ? "tessera::cpu::ops::round_bf16(" : "")
     << "tessera::cpu::ops::vec16_apply<decltype(" << st.functor << ")>(ok";
  for (int v : st.args) os << ", " << vec_name(v);
  os << (bf16 ? "));\n" : ");\n");
}

// Every output's store at `at` (lanes of mask m): a bfloat16 value (rounded by its step, or a
// bfloat16 input's) as its top half.
void emit_vec_stores(std::ostringstream& os, const Compiled& c, const std::string& at,
                     const char* indent) {
  const auto dts = c.output_dtypes();
  for (size_t o = 0; o < dts.size(); ++o) {
    os << indent << (dts[o] == bfloat16 ? "tessera::cpu::ops::store_bf16(q" : "_mm512_mask_storeu_ps(q")
       << o << " + " << at << ", m, " << vec_name(c.output_steps()[o]) << ");\n";
  }
}

// vec_ok &= no output partly overlaps dense input k's range (a donated input, the same buffer,
// is read where it is written); with `others`, no output is any other non-scalar input.
void emit_overlap_checks(std::ostringstream& os, const Compiled& c, const std::string& layout,
                         bool others) {
  for (size_t o = 0; o < c.output_dtypes().size(); ++o) {
    for (size_t k = 0; k < c.input_dtypes().size(); ++k) {
      if (layout[k] == 'd' || (layout[k] != 's' && !others)) {
        os << "  vec_ok = vec_ok && (static_cast<const void*>(q" << o << " + e) <= p" << k
           << " + b || static_cast<const void*>(p" << k << " + e) <= q" << o
           << " + b || static_cast<const void*>(q" << o << ") == p" << k << ");\n";
      } else if (layout[k] != 's') {
        os << "  vec_ok = vec_ok && static_cast<const void*>(q" << o << ") != p" << k << ";\n";
      }
    }
  }
}

// The 16-lane loop (vec16_ops.h's vec16_loop) of a float32 / bfloat16 kernel with contiguous and
// single-value inputs, in kernels built for AVX-512 CPUs, taken when every step has a 16-lane
// form (the same bits as the functor, in about half the instructions of g++'s vectorisation of
// it) and no output partly overlaps an input. A vector with a lane outside a step's fast domain
// (sin, cos) is computed again element by element with the exact functors.
void emit_vec16(std::ostringstream& os, const Compiled& c, const std::string& layout) {
  const auto& in = c.input_dtypes();
  const auto& steps = c.steps();
  const auto& outs = c.output_steps();
  os << "#if defined(__AVX512F__)\n  bool vec_ok = true;\n";
  emit_overlap_checks(os, c, layout, false);
  os << "  constexpr bool kVec = true";
  for (auto& stp : steps) {
    os << "\n      && tessera::cpu::ops::has_vec16<decltype(" << stp.functor << ")>";
  }
  os << ";\n  if (kVec && vec_ok) {\n";
  for (size_t k = 0; k < in.size(); ++k) {
    if (layout[k] == 's') {
      os << "    const __m512 v" << k << " = _mm512_set1_ps(static_cast<float>(x" << k << "));\n";
    }
  }
  // head(i) loads vector i and runs the first steps (about half the work, weighing exp-like and
  // trig steps heavily), tail(i) the rest and the stores; vec16_loop runs head(i + 16) before
  // tail(i) (software pipelining: the 10-op chain 1.44 -> 1.22 ns per element per core).
  auto weight = [](const std::string& f) {
    for (const char* heavy : {"ExpOp", "TanhOp", "SigmoidOp"}) {
      if (f.find(heavy) != std::string::npos) return 20;
    }
    // sin and cos of one argument share most of their work
    if (f.find("SinOp") != std::string::npos || f.find("CosOp") != std::string::npos) return 12;
    return f.find("DivideOp") != std::string::npos || f.find("SqrtOp") != std::string::npos ? 4 : 1;
  };
  int total = 0;
  for (auto& stp : steps) total += weight(stp.functor);
  size_t h = 0;
  for (int acc = 0; h < steps.size() && 2 * acc < total; ++h) acc += weight(steps[h].functor);
  // The values tail reads from head: inputs and head steps used by tail steps or stored.
  std::vector<std::string> carried;
  auto carry = [&](int v) {
    if (v < 0 && layout[-v - 1] == 's') return;
    if (v >= 0 && static_cast<size_t>(v) >= h) return;
    if (std::find(carried.begin(), carried.end(), vec_name(v)) == carried.end()) {
      carried.push_back(vec_name(v));
    }
  };
  for (size_t i = h; i < steps.size(); ++i) {
    for (int v : steps[i].args) carry(v);
  }
  for (int o : outs) carry(o);
  os << "    struct Carry {\n      __mmask16 ok;\n";
  for (auto& v : carried) os << "      __m512 " << v << ";\n";
  os << "    };\n    auto head = [&](int64_t i, __mmask16 m, Carry& r) "
        "__attribute__((always_inline)) {\n      __mmask16 ok = m;\n";
  for (size_t k = 0; k < in.size(); ++k) {
    if (layout[k] != 's') os << "      const __m512 v" << k << " = " << vec_load(in[k], k, "i") << ";\n";
  }
  auto emit_steps = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) emit_vec_step(os, c, i, "      ");
  };
  emit_steps(0, h);
  os << "      r.ok = ok;\n";
  for (auto& v : carried) os << "      r." << v << " = " << v << ";\n";
  os << "    };\n    auto tail = [&](int64_t i, __mmask16 m, const Carry& r) "
        "__attribute__((always_inline)) {\n      __mmask16 ok = r.ok;\n";
  for (auto& v : carried) os << "      const __m512 " << v << " = r." << v << ";\n";
  emit_steps(h, steps.size());
  os << "      if (__builtin_expect(ok != m, 0)) return false;\n";
  emit_vec_stores(os, c, "i", "      ");
  os << "      return true;\n    };\n"
     << "    tessera::cpu::ops::vec16_loop<Carry>(b, e, head, tail, [&](int64_t i0, int64_t i1) {\n"
     << "      for (int64_t i = i0; i < i1; ++i) {\n";
  emit_body(os, c, layout, false);
  os << "      }\n    });\n    return;\n  }\n#endif\n";
}

// The strided loop's inner run of `len` elements on 16 lanes, for float32 / bfloat16 kernels
// without general strides ('g'): contiguous ('d', 'r'), per-row ('b') and single ('s') inputs.
// A vector with a lane outside an op's fast domain is computed element by element. Emitted
// before the element loop, which it skips (`continue` past it) when it ran.
void emit_vec16_strided(std::ostringstream& os, const Compiled& c, const std::string& layout) {
  const auto& in = c.input_dtypes();
  os << "#if defined(__AVX512F__)\n    if (vec_ok) {\n"
     << "      for (int64_t j0 = 0; j0 < len; j0 += 16) {\n"
     << "        const __mmask16 m = len - j0 >= 16 ? __mmask16(0xffff) : "
        "static_cast<__mmask16>((1u << (len - j0)) - 1);\n        __mmask16 ok = m;\n";
  for (size_t k = 0; k < in.size(); ++k) {
    const char t = layout[k];
    os << "        const __m512 v" << k << " = ";
    if (t == 's' || t == 'b') {
      os << "_mm512_set1_ps(static_cast<float>(" << (t == 's' ? "x" : "p") << k
         << (t == 's' ? "" : "[o" + std::to_string(k) + "]") << "));\n";
    } else {
      os << vec_load(in[k], k, t == 'd' ? "i + j0" : "o" + std::to_string(k) + " + j0") << ";\n";
    }
  }
  for (size_t i = 0; i < c.steps().size(); ++i) emit_vec_step(os, c, i, "        ");
  os << "        if (__builtin_expect(ok != m, 0)) {\n"
     << "          for (int64_t j = j0; j < j0 + 16 && j < len; ++j) {\n";
  emit_body(os, c, layout, true);
  os << "          }\n          continue;\n        }\n";
  emit_vec_stores(os, c, "i + j0", "        ");
  os << "      }\n    } else\n#endif\n";
}

}  // namespace

// The fusion table names its functors bare (Primitive::fused_functor); the CPU's are these.
constexpr const char* kFunctorNames = "using namespace tessera::cpu::ops;\n\n";

std::string fused_source(const Compiled& c, const std::string& layout) {
  const auto& in = c.input_dtypes();
  const bool strided = layout.find_first_of("rbg") != std::string::npos;
  std::ostringstream os;
  os << "// Tessera fused kernel: " << c.program() << "\n// layout " << layout << "\n"
     << "#include <cstdint>\n#include \"backend/cpu/binary_ops.h\"\n"
        "#include \"backend/cpu/unary_ops.h\"\n#include \"backend/cpu/vec16_ops.h\"\n\n"
     << kFunctorNames
     << "extern \"C\" void tessera_fused(const void* const* in, void* const* out, int64_t b, "
        "int64_t e, int nd, const int64_t* shape, const int64_t* st) {\n";
  emit_inputs(os, in, layout);
  const auto dts = c.output_dtypes();
  for (size_t o = 0; o < dts.size(); ++o) {
    const char* t = cpp_type(dts[o]);
    os << "  " << t << "* q" << o << " = static_cast<" << t << "*>(out[" << o << "]);\n";
  }
  if (!strided) {
    // Blocks of kBlock elements. When a step has a fast form (sin, cos), a block first runs with
    // it, and runs again exactly when an argument was outside its range. The fast pass writes
    // the outputs themselves unless one shares its buffer with an input (a donated input the
    // exact pass would read again): then it writes block buffers, copied out when it sufficed.
    os << "  (void)nd; (void)shape; (void)st;\n  constexpr int64_t kBlock = 512;\n"
       << "  bool direct = true;\n";
    for (size_t o = 0; o < dts.size(); ++o) {
      for (size_t k = 0; k < in.size(); ++k) {
        if (layout[k] == 's') continue;
        os << "  direct = direct && (reinterpret_cast<const char*>(q" << o << " + e) <= "
           << "reinterpret_cast<const char*>(p" << k << " + b) || reinterpret_cast<const char*>(p"
           << k << " + e) <= reinterpret_cast<const char*>(q" << o << " + b));\n";
      }
    }
    if (all_vec16_dtypes(c)) emit_vec16(os, c, layout);
    os << "  constexpr bool kFast = false";
    for (auto& stp : c.steps()) {
      os << "\n      || tessera::cpu::ops::has_fast_path<decltype(" << stp.functor << ")";
      for (int a : stp.args) {
        os << ", " << cpp_type(a < 0 ? in[-a - 1] : c.steps()[a].dtype);
      }
      os << '>';
    }
    os << ";\n  (void)direct;\n  for (int64_t c = b; c < e; c += kBlock) {\n"
       << "    const int64_t ce = c + kBlock < e ? c + kBlock : e;\n"
       << "    if constexpr (kFast) {\n      unsigned slow = 0;\n      if (direct) {\n"
       << "#pragma GCC ivdep\n      for (int64_t i = c; i < ce; ++i) {\n";
    emit_body(os, c, layout, false, true);
    os << "      }\n      if (slow == 0) continue;\n      } else {\n";
    for (size_t o = 0; o < dts.size(); ++o) {
      os << "      " << cpp_type(dts[o]) << " b" << o << "[kBlock];\n";
    }
    os << "#pragma GCC ivdep\n      for (int64_t i = c; i < ce; ++i) {\n";
    emit_body(os, c, layout, false, true, nullptr, true);
    os << "      }\n      if (slow == 0) {\n";
    for (size_t o = 0; o < dts.size(); ++o) {
      os << "        for (int64_t i = c; i < ce; ++i) q" << o << "[i] = b" << o << "[i - c];\n";
    }
    os << "        continue;\n      }\n      }\n    }\n"
       << "#pragma GCC ivdep\n    for (int64_t i = c; i < ce; ++i) {\n";
    emit_body(os, c, layout, false);
    os << "    }\n  }\n}\n";
    return os.str();
  }
  // Position of element b in the collapsed dims, and each strided input's offset there.
  os << "  int64_t pos[32];\n  int64_t rem = b;\n"
     << "  for (int d = nd - 1; d >= 0; --d) { pos[d] = rem % shape[d]; rem /= shape[d]; }\n";
  for (size_t k = 0; k < in.size(); ++k) {
    if (layout[k] == 'd' || layout[k] == 's') continue;
    os << "  const int64_t* st" << k << " = st + " << k << " * nd;\n  int64_t o" << k
       << " = 0;\n  for (int d = 0; d < nd; ++d) o" << k << " += pos[d] * st" << k << "[d];\n";
    if (layout[k] == 'g') os << "  const int64_t s" << k << " = st" << k << "[nd - 1];\n";
  }
  // The 16-lane inner loop: every op has a 16-lane form, no general strides, and no output is an
  // input read at other positions (a donated input is read where it is written).
  const bool vec = all_vec16_dtypes(c) && layout.find('g') == std::string::npos;
  if (vec) {
    os << "#if defined(__AVX512F__)\n  constexpr bool kVec = true";
    for (auto& stp : c.steps()) {
      os << "\n      && tessera::cpu::ops::has_vec16<decltype(" << stp.functor << ")>";
    }
    os << ";\n  bool vec_ok = kVec;\n";
    emit_overlap_checks(os, c, layout, true);
    os << "#endif\n";
  }
  os << "  const int64_t last = shape[nd - 1];\n  int64_t i = b;\n  while (i < e) {\n"
     << "    const int64_t len = last - pos[nd - 1] < e - i ? last - pos[nd - 1] : e - i;\n";
  if (vec) emit_vec16_strided(os, c, layout);
  os << "    {\n#pragma GCC ivdep\n    for (int64_t j = 0; j < len; ++j) {\n";
  emit_body(os, c, layout, true);
  os << "    }\n    }\n    i += len;\n    pos[nd - 1] += len;\n";
  for (size_t k = 0; k < in.size(); ++k) {
    if (layout[k] == 'd' || layout[k] == 's') continue;
    os << "    o" << k << " += len * st" << k << "[nd - 1];\n";
  }
  os << "    for (int d = nd - 1; d > 0 && pos[d] == shape[d]; --d) {\n"
        "      pos[d] = 0;\n      ++pos[d - 1];\n";
  for (size_t k = 0; k < in.size(); ++k) {
    if (layout[k] == 'd' || layout[k] == 's') continue;
    os << "      o" << k << " += st" << k << "[d - 1] - shape[d] * st" << k << "[d];\n";
  }
  os << "    }\n  }\n}\n";
  return os.str();
}

namespace {

// A reduction's start value and its combination of a and b, as the eager kernel combines.
std::pair<std::string, std::string> reduction_terms(Primitive::FusedReduce op, const char* t) {
  switch (op) {
    case Primitive::FusedReduce::sum: return {std::string(t) + "(0)", "a + b"};
    case Primitive::FusedReduce::max:  // NaN wins, as the eager kernel
      return {"-std::numeric_limits<" + std::string(t) + ">::infinity()",
              "((b > a) | (b != b)) ? b : a"};
    default:
      return {"std::numeric_limits<" + std::string(t) + ">::infinity()",
              "((b < a) | (b != b)) ? b : a"};
  }
}

}  // namespace

std::string fused_reduce_source(const CompiledReduce& c, const std::string& layout) {
  const auto& in = c.input_dtypes();
  const char* t = cpp_type(c.output_dtypes()[0]);
  const std::string v = "t" + std::to_string(c.output_steps()[0]);
  const auto [init, combine] = reduction_terms(c.op(), t);
  std::ostringstream os;
  os << "// Tessera fused reduction: " << c.program() << "\n// layout " << layout << "\n"
     << "#include <cstdint>\n#include <limits>\n#include \"backend/cpu/binary_ops.h\"\n"
        "#include \"backend/cpu/unary_ops.h\"\n\n"
     << kFunctorNames << "static inline " << t << " combine(" << t << " a, " << t << " b) { return "
     << combine << "; }\n\n"
     << "extern \"C\" void tessera_fused(const void* const* in, void* const* out, int64_t b, "
        "int64_t e, int, const int64_t*, const int64_t*) {\n";
  emit_inputs(os, in, layout);
  os << "  " << t << " acc = " << init << ";\n  if (e - b < 16) {\n"
     << "    for (int64_t i = b; i < e; ++i) {\n";
  emit_body(os, c, layout, false, false, "i");
  os << "      acc = combine(acc, " << v << ");\n    }\n"
     << "    *static_cast<" << t << "*>(out[0]) = acc;\n    return;\n  }\n"
     << "  " << t << " lanes[16];\n  for (int l = 0; l < 16; ++l) lanes[l] = " << init << ";\n"
     << "  int64_t i = b;\n  for (; i + 16 <= e; i += 16) {\n#pragma GCC unroll 16\n"
     << "    for (int l = 0; l < 16; ++l) {\n      const int64_t k = i + l;\n";
  emit_body(os, c, layout, false, false, "k");
  os << "      lanes[l] = combine(lanes[l], " << v << ");\n    }\n  }\n"
     << "  for (; i < e; ++i) {\n";
  emit_body(os, c, layout, false, false, "i");
  os << "      acc = combine(acc, " << v << ");\n  }\n"
     << "  for (int w = 8; w > 0; w /= 2) {\n"
     << "    for (int l = 0; l < w; ++l) lanes[l] = combine(lanes[l], lanes[l + w]);\n  }\n"
     << "  *static_cast<" << t << "*>(out[0]) = combine(lanes[0], acc);\n}\n";
  return os.str();
}

// Row kernel. Per row: the steps of level 'W' that need no reduction, then for each phase its
// reductions (over a loop that computes the row steps they need) and the 'W' steps that became
// computable, then one loop computing and storing the row outputs, and the per-row outputs.
std::string fused_rows_source(const CompiledRows& c) {
  const auto& in = c.input_dtypes();
  const auto& steps = c.steps();
  const std::string& kinds = c.kinds();
  const std::string& levels = c.levels();
  const std::string& roles = c.roles();
  const size_t ns = steps.size();
  // Phase of every step: a reduction's is one more than the latest phase among its arguments;
  // any other step's is that latest phase (-1: it reads no reduction), so a level 'W' step is
  // computed right after the phase its value waits for.
  std::vector<int> phase(ns, -1);
  int phases = 0;
  for (size_t i = 0; i < ns; ++i) {
    int dep = -1;
    for (int a : steps[i].args) dep = a >= 0 ? std::max(dep, phase[a]) : dep;
    phase[i] = kinds[i] == 'r' ? dep + 1 : dep;
    if (kinds[i] == 'r') phases = std::max(phases, phase[i] + 1);
  }
  auto arg_expr = [](int a) {
    return a < 0 ? "x" + std::to_string(-a - 1) : "t" + std::to_string(a);
  };
  auto step_expr = [&](size_t i) {
    if (kinds[i] == 'b') return arg_expr(steps[i].args[0]);
    std::string e = steps[i].functor + "(";
    for (size_t a = 0; a < steps[i].args.size(); ++a) {
      e += (a ? ", " : "") + arg_expr(steps[i].args[a]);
    }
    return e + ")";
  };
  // The loops over a row: one per phase (its reductions' arguments), then one for the row
  // outputs. Each computes the row steps (level 'R') its targets need, except that a step an
  // earlier loop computed is stored there in a row buffer s<i> and loaded here (softmax's exp
  // runs once per element: its sum's loop stores it, the division's loop loads it).
  struct Loop {
    std::vector<int> targets, need, loads, reads;
  };
  std::vector<Loop> loops(static_cast<size_t>(phases));
  for (size_t i = 0; i < ns; ++i) {
    if (kinds[i] == 'r') loops[static_cast<size_t>(phase[i])].targets.push_back(steps[i].args[0]);
  }
  const auto& outs = c.output_steps();
  std::vector<int> row_outs;
  for (int o : outs) {
    if (levels[o] == 'R') row_outs.push_back(o);
  }
  if (!row_outs.empty()) loops.push_back(Loop{row_outs, {}, {}, {}});
  std::vector<int> first(ns, -1);  // the loop that first computes a row step
  std::vector<char> stored(ns, 0);
  for (size_t L = 0; L < loops.size(); ++L) {
    Loop& lp = loops[L];
    std::vector<char> mark(ns, 0), load(ns, 0), rd(in.size(), 0);
    std::vector<int> stack(lp.targets.begin(), lp.targets.end());
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      if (v < 0) {
        rd[-v - 1] = roles[-v - 1] == 'd';
        continue;
      }
      if (levels[v] != 'R' || mark[v] || load[v]) continue;
      if (first[v] >= 0 && kinds[v] != 'b') {  // a broadcast is only a copy: never stored
        load[v] = stored[v] = 1;
        continue;
      }
      mark[v] = 1;
      for (int a : steps[v].args) stack.push_back(a);
    }
    for (size_t i = 0; i < ns; ++i) {
      if (mark[i]) lp.need.push_back(static_cast<int>(i));
      if (load[i]) lp.loads.push_back(static_cast<int>(i));
      if (mark[i] && first[i] < 0) first[i] = static_cast<int>(L);
    }
    for (size_t k = 0; k < in.size(); ++k) {
      if (rd[k]) lp.reads.push_back(static_cast<int>(k));
    }
  }
  // A reduction reads its argument from a row: an input's, or the step's buffer s<i>, which its
  // phase's loop fills. The loops that compute values stay free of reductions, so the compiler
  // vectorises them; the reductions then combine the row as the eager kernel does.
  for (size_t i = 0; i < ns; ++i) {
    if (kinds[i] == 'r' && steps[i].args[0] >= 0) stored[steps[i].args[0]] = 1;
  }
  auto emit_row_body = [&](std::ostringstream& os, const Loop& lp, const char* j,
                           const char* indent) {
    for (int k : lp.reads) {
      os << indent << "const " << cpp_type(in[k]) << " x" << k << " = "
         << (in[k] == bool_ ? "0 != " : "") << "r" << k << '[' << j << "];\n";
    }
    for (int i : lp.loads) {
      os << indent << "const " << cpp_type(steps[i].dtype) << " t" << i << " = s" << i << '['
         << j << "];\n";
    }
    for (int i : lp.need) {
      os << indent << "const " << cpp_type(steps[i].dtype) << " t" << i << " = " << step_expr(i)
         << ";\n";
      if (stored[i]) os << indent << "s" << i << '[' << j << "] = t" << i << ";\n";
    }
  };
  auto emit_ready_w = [&](std::ostringstream& os, int ready) {
    for (size_t i = 0; i < ns; ++i) {
      if (levels[i] == 'W' && kinds[i] != 'r' && phase[i] == ready) {
        os << "    const " << cpp_type(steps[i].dtype) << " t" << i << " = " << step_expr(i)
           << ";\n";
      }
    }
  };

  // A loop over the row computing lp's steps and storing the outputs `stores` (indices into the
  // outputs), in blocks of 16 elements (a loop of fixed length, which the compiler vectorises
  // whole); the last elements of a row of 16 or more are the last full block again, which
  // recomputes some values with the same result (the inputs are never written: no output takes
  // over an input's buffer). A loop over the R % 16 left would run one element at a time: a
  // softmax over rows of 31 took twice as long.
  auto emit_block_loop = [&](std::ostringstream& os, const Loop& lp,
                             const std::vector<int>& stores) {
    os << "    {\n      auto block = [&](int64_t j0, int64_t n) {\n#pragma GCC ivdep\n"
       << "        for (int64_t j = j0; j < j0 + n; ++j) {\n";
    emit_row_body(os, lp, "j", "          ");
    for (int o : stores) os << "          q" << o << "[row * R + j] = t" << outs[o] << ";\n";
    os << "        }\n      };\n      int64_t j = 0;\n"
       << "      for (; j + 16 <= R; j += 16) block(j, 16);\n"
       << "      if (j < R) block(R >= 16 ? R - 16 : j, R >= 16 ? 16 : R - j);\n    }\n";
  };
  // Reduction r over its row (an input's or a buffer), in the eager kernel's order: a sum in
  // order below 16 elements, else 16 lanes, the tail, the lanes combined pairwise, then the
  // tail's value; a max or min in order below kMinMaxVectorFrom, else the eager minmax_run.
  auto emit_reduction = [&](std::ostringstream& os, int r) {
    const char* t = cpp_type(steps[r].dtype);
    const int arg = steps[r].args[0];
    const std::string v = arg < 0 ? "r" + std::to_string(-arg - 1) : "s" + std::to_string(arg);
    const std::string a = "a" + std::to_string(r);
    std::vector<int> axes;
    const auto op = steps[r].primitive->fused_reduction(&axes);
    const auto [init, combine] = reduction_terms(op, t);
    os << "    " << t << ' ' << a << " = " << init << ";\n    {\n      const auto* v = " << v
       << ";\n      auto c = [](" << t << " a, " << t << " b) { return " << combine << "; };\n";
    if (op != Primitive::FusedReduce::sum) {
      os << "      if (R < static_cast<int64_t>(tessera::cpu::kMinMaxVectorFrom)) {\n"
         << "        for (int64_t j = 0; j < R; ++j) " << a << " = c(" << a << ", v[j]);\n"
         << "      } else {\n        " << a << " = tessera::cpu::minmax_run<"
         << (op == Primitive::FusedReduce::max ? "true" : "false")
         << ">(v, static_cast<size_t>(R));\n      }\n    }\n";
    } else {
      os << "      if (R < 16) {\n        for (int64_t j = 0; j < R; ++j) " << a << " = c(" << a
         << ", v[j]);\n      } else {\n        " << t << " l[16];\n"
         << "        for (int i = 0; i < 16; ++i) l[i] = " << init << ";\n"
         << "        int64_t j = 0;\n        for (; j + 16 <= R; j += 16) {\n"
         << "#pragma GCC unroll 16\n"
         << "          for (int i = 0; i < 16; ++i) l[i] = c(l[i], v[j + i]);\n        }\n"
         << "        for (; j < R; ++j) " << a << " = c(" << a << ", v[j]);\n"
         << "        for (int w = 8; w > 0; w /= 2) {\n"
         << "          for (int i = 0; i < w; ++i) l[i] = c(l[i], l[i + w]);\n        }\n"
         << "        " << a << " = c(l[0], " << a << ");\n      }\n    }\n";
    }
    os << "    const " << t << " t" << r << " = " << a << ";\n";
  };

  std::ostringstream os;
  os << "// Tessera row-fused kernel: " << c.program() << "\n"
     << "#include <cstdint>\n#include <limits>\n#include <memory>\n"
        "#include \"backend/cpu/binary_ops.h\"\n#include \"backend/cpu/simd.h\"\n"
        "#include \"backend/cpu/unary_ops.h\"\n\n"
     << kFunctorNames
     << "extern \"C\" void tessera_fused(const void* const* in, void* const* out, int64_t b, "
        "int64_t e, int, const int64_t* shape, const int64_t*) {\n"
        "  const int64_t R = shape[0];\n";
  for (size_t k = 0; k < in.size(); ++k) {
    const char* t = in[k] == bool_ ? "uint8_t" : cpp_type(in[k]);
    os << "  const " << t << "* p" << k << " = static_cast<const " << t << "*>(in[" << k << "]);\n";
    if (roles[k] == 's') {
      os << "  const " << cpp_type(in[k]) << " x" << k << " = " << (in[k] == bool_ ? "0 != " : "")
         << "p" << k << "[0];\n";
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    const char* t = cpp_type(steps[outs[o]].dtype);
    os << "  " << t << "* q" << o << " = static_cast<" << t << "*>(out[" << o << "]);\n";
  }
  for (size_t i = 0; i < ns; ++i) {
    if (!stored[i]) continue;
    const char* t = cpp_type(steps[i].dtype);
    os << "  std::unique_ptr<" << t << "[]> s" << i << "_buf(new " << t << "[R]);\n  " << t
       << "* s" << i << " = s" << i << "_buf.get();\n";
  }
  os << "  for (int64_t row = b; row < e; ++row) {\n";
  for (size_t k = 0; k < in.size(); ++k) {
    if (roles[k] == 'd') {
      os << "    const auto* r" << k << " = p" << k << " + row * R;\n";
    } else if (roles[k] == 'w') {
      os << "    const " << cpp_type(in[k]) << " x" << k << " = " << (in[k] == bool_ ? "0 != " : "")
         << "p" << k << "[row];\n";
    }
  }
  emit_ready_w(os, -1);
  for (int ph = 0; ph < phases; ++ph) {
    const Loop& lp = loops[static_cast<size_t>(ph)];
    if (!lp.need.empty()) emit_block_loop(os, lp, {});
    for (size_t r = 0; r < ns; ++r) {
      if (kinds[r] == 'r' && phase[r] == ph) emit_reduction(os, static_cast<int>(r));
    }
    emit_ready_w(os, ph);
  }
  if (!row_outs.empty()) {
    std::vector<int> stores;
    for (size_t o = 0; o < outs.size(); ++o) {
      if (levels[outs[o]] == 'R') stores.push_back(static_cast<int>(o));
    }
    emit_block_loop(os, loops.back(), stores);
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    if (levels[outs[o]] == 'W') os << "    q" << o << "[row] = t" << outs[o] << ";\n";
  }
  os << "  }\n}\n";
  return os.str();
}

}  // namespace tessera::cpu
