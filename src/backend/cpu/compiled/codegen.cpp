// Source generation for fused kernels (codegen.h). Every step calls the functor its primitive
// names in the fusion table (fused_functor(), backend/cpu/*_ops.h), on values of the step's
// dtype, so a fused kernel rounds exactly where the eager kernels round.
#include "backend/cpu/compiled/codegen.h"

#include <sstream>
#include <vector>

namespace tessera::cpu {

const char* cpp_type(Dtype d) {
  switch (d.val()) {
    case Dtype::Val::bool_: return "bool";
    case Dtype::Val::uint8: return "uint8_t";
    case Dtype::Val::uint16: return "uint16_t";
    case Dtype::Val::uint32: return "uint32_t";
    case Dtype::Val::uint64: return "uint64_t";
    case Dtype::Val::int8: return "int8_t";
    case Dtype::Val::int16: return "int16_t";
    case Dtype::Val::int32: return "int32_t";
    case Dtype::Val::int64: return "int64_t";
    case Dtype::Val::float16: return "tessera::float16_t";
    case Dtype::Val::bfloat16: return "tessera::bfloat16_t";
    case Dtype::Val::float32: return "float";
    case Dtype::Val::float64: return "double";
    case Dtype::Val::complex64: return "tessera::complex64_t";
  }
  return "void";
}

namespace {

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

}  // namespace

std::string fused_source(const Compiled& c, const std::string& layout) {
  const auto& in = c.input_dtypes();
  const bool strided = layout.find_first_of("rbg") != std::string::npos;
  std::ostringstream os;
  os << "// Tessera fused kernel: " << c.program() << "\n// layout " << layout << "\n"
     << "#include <cstdint>\n#include \"backend/cpu/binary_ops.h\"\n"
        "#include \"backend/cpu/unary_ops.h\"\n\n"
        "extern \"C\" void tessera_fused(const void* const* in, void* const* out, int64_t b, "
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
  os << "  const int64_t last = shape[nd - 1];\n  int64_t i = b;\n  while (i < e) {\n"
     << "    const int64_t len = last - pos[nd - 1] < e - i ? last - pos[nd - 1] : e - i;\n"
     << "#pragma GCC ivdep\n    for (int64_t j = 0; j < len; ++j) {\n";
  emit_body(os, c, layout, true);
  os << "    }\n    i += len;\n    pos[nd - 1] += len;\n";
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

std::string fused_reduce_source(const CompiledReduce& c, const std::string& layout) {
  const auto& in = c.input_dtypes();
  const char* t = cpp_type(c.output_dtypes()[0]);
  const std::string v = "t" + std::to_string(c.output_steps()[0]);
  std::string init, combine;
  switch (c.op()) {
    case Primitive::FusedReduce::sum:
      init = std::string(t) + "(0)";
      combine = "a + b";
      break;
    case Primitive::FusedReduce::max:
      init = "-std::numeric_limits<" + std::string(t) + ">::infinity()";
      combine = "((b > a) | (b != b)) ? b : a";  // NaN wins, as the eager kernel
      break;
    default:
      init = "std::numeric_limits<" + std::string(t) + ">::infinity()";
      combine = "((b < a) | (b != b)) ? b : a";
      break;
  }
  std::ostringstream os;
  os << "// Tessera fused reduction: " << c.program() << "\n// layout " << layout << "\n"
     << "#include <cstdint>\n#include <limits>\n#include \"backend/cpu/binary_ops.h\"\n"
        "#include \"backend/cpu/unary_ops.h\"\n\n"
     << "static inline " << t << " combine(" << t << " a, " << t << " b) { return " << combine
     << "; }\n\n"
        "extern \"C\" void tessera_fused(const void* const* in, void* const* out, int64_t b, "
        "int64_t e, int, const int64_t*, const int64_t*) {\n";
  emit_inputs(os, in, layout);
  os << "  " << t << " acc = " << init << ";\n  if (e - b < 32) {\n"
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

}  // namespace tessera::cpu
