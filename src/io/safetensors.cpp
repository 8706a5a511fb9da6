// safetensors: header validation (JSON, dtypes, shapes, offsets that tile the data section as
// the format requires), reading, and writing; the public load/save_safetensors (tessera/io.h).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "io/byte_io.h"
#include "io/npy.h"
#include "tessera/io.h"
#include "tessera/eval.h"

namespace tessera {

namespace {

using json = nlohmann::json;
using ArrayMap = std::unordered_map<std::string, array>;
using StringMap = std::unordered_map<std::string, std::string>;
using namespace detail::io;

// As the reference implementation (huggingface/safetensors): larger headers are refused.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct StDtype {
  const char* code;
  Dtype dtype;
  size_t file_item;  // bytes per element in the file
};
// The fp8 codes have no Tessera dtype: their bytes load as uint8, as MLX 0.32 loads them
// (from_fp8 decodes F8_E4M3; F8_E8M0 bytes are the exponents mxfp scales use).
constexpr StDtype kStDtypes[] = {
    {"BOOL", bool_, 1},    {"U8", uint8, 1},      {"I8", int8, 1},       {"U16", uint16, 2},
    {"I16", int16, 2},     {"U32", uint32, 4},    {"I32", int32, 4},     {"U64", uint64, 8},
    {"I64", int64, 8},     {"F16", float16, 2},   {"BF16", bfloat16, 2}, {"F32", float32, 4},
    {"F64", float64, 8},   {"C64", complex64, 8}, {"F8_E4M3", uint8, 1}, {"F8_E8M0", uint8, 1},
};

const StDtype* find_code(std::string_view code) {
  for (const StDtype& d : kStDtypes) {
    if (code == d.code) return &d;
  }
  return nullptr;
}

const char* code_of(Dtype dtype) {
  for (const StDtype& d : kStDtypes) {
    if (d.dtype == dtype) return d.code;  // U8 precedes the fp8 codes
  }
  throw std::logic_error("[save_safetensors] unknown dtype");
}

std::string dims_text(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

struct TensorInfo {
  std::string name;
  const StDtype* dtype = nullptr;
  Shape shape;
  uint64_t begin = 0;  // within the data section
  uint64_t end = 0;
};

uint64_t read_uint(const json& v, const std::string& tw, const char* what) {
  if (!v.is_number_unsigned()) {
    fail(tw, std::string(what) + " must be a non-negative integer, not " + printable(v.dump(), 40));
  }
  return v.get<uint64_t>();
}

TensorInfo parse_tensor(const std::string& name, const json& v, uint64_t data_size,
                        const std::string& where) {
  const std::string tw = where + ": tensor " + printable(name);
  if (!v.is_object()) fail(tw, "its header entry is not a JSON object");
  TensorInfo t;
  t.name = name;
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail(tw, "its header entry has no \"dtype\" string");
  const std::string& code = dt->get_ref<const std::string&>();
  t.dtype = find_code(code);
  if (!t.dtype) {
    fail(tw, "dtype " + printable(code) +
                 " is not supported (supported: BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, "
                 "BF16, F32, F64, C64, F8_E4M3, F8_E8M0)");
  }
  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) fail(tw, "its header entry has no \"shape\" list");
  if (sh->size() > kMaxNpyDims) {
    fail(tw, "its shape has " + std::to_string(sh->size()) + " dimensions, more than " +
                 std::to_string(kMaxNpyDims));
  }
  uint64_t count = 1;
  for (const json& d : *sh) {
    const uint64_t dim = read_uint(d, tw, "each shape dimension");
    if (dim > static_cast<uint64_t>(INT32_MAX)) {
      fail(tw, "shape dimension " + std::to_string(dim) +
                   " exceeds 2147483647 (Tessera shapes hold int32 dims)");
    }
    t.shape.push_back(static_cast<int32_t>(dim));
    if (mul_overflows(count, dim, &count)) fail(tw, "its shape overflows 64-bit element counts");
  }
  const auto offs = v.find("data_offsets");
  if (offs == v.end() || !offs->is_array() || offs->size() != 2) {
    fail(tw, "its header entry needs \"data_offsets\": [begin, end]");
  }
  t.begin = read_uint((*offs)[0], tw, "data_offsets begin");
  t.end = read_uint((*offs)[1], tw, "data_offsets end");
  const std::string range =
      "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
  if (t.end < t.begin) fail(tw, range + " end before they begin");
  if (t.end > data_size) {
    fail(tw, range + " run past the end of the data section (" + std::to_string(data_size) +
                 " bytes); the file is truncated or corrupt");
  }
  uint64_t need = 0;
  const bool overflow = mul_overflows(count, t.dtype->file_item, &need);
  if (overflow || need != t.end - t.begin) {
    fail(tw, range + " hold " + std::to_string(t.end - t.begin) + " bytes but " + code +
                 " with shape " + dims_text(t.shape) + " needs " +
                 (overflow ? std::string("more than 2^64") : std::to_string(need)));
  }
  return t;
}

// The tensors of the safetensors file in `r`, every header field checked first. With `lazy` (a
// handle on `r` itself) each tensor is read when its array is evaluated, on stream `s`.
SafetensorsLoad read_safetensors(const ByteReader& r, const std::string& where,
                                 const std::shared_ptr<const ByteReader>& lazy = nullptr,
                                 StreamOrDevice s = {}) {
  const uint64_t size = r.size();
  if (size < 8) {
    fail(where, "not a safetensors file: " + std::to_string(size) +
                    " bytes, fewer than the 8-byte header length");
  }
  const uint64_t n = le64(r.read_string(0, 8).data());
  if (n > kMaxHeaderBytes) {
    fail(where, "the header length field says " + std::to_string(n) + " bytes, more than the " +
                    std::to_string(kMaxHeaderBytes) +
                    " safetensors allows; the file is corrupt or not a safetensors file");
  }
  if (n > size - 8) {
    fail(where, "truncated: the header length field says " + std::to_string(n) +
                    " bytes but only " + std::to_string(size - 8) + " follow it");
  }
  if (n < 2) fail(where, "the header length " + std::to_string(n) + " is too small for JSON");
  const std::string text = r.read_string(8, static_cast<size_t>(n));
  if (text[0] != '{') {
    fail(where, "the header does not start with '{' (it starts " + printable(text, 16) +
                    "); not a safetensors file");
  }
  std::optional<std::string> duplicate;
  std::unordered_set<std::string> top_keys;
  const json::parser_callback_t on_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !duplicate &&
        !top_keys.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, on_key);
  } catch (const json::exception& e) {
    fail(where, "the JSON header is malformed: " + printable(e.what(), 300));
  }
  if (duplicate) fail(where, "the key " + printable(*duplicate) + " appears twice in the header");
  if (!header.is_object()) fail(where, "the JSON header is not an object");

  const uint64_t data_size = size - 8 - n;
  StringMap metadata;
  std::vector<TensorInfo> tensors;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (value.is_null()) continue;
      if (!value.is_object()) fail(where, "\"__metadata__\" is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          fail(where, "\"__metadata__\" value of " + printable(mk) +
                          " is not a string (safetensors metadata maps strings to strings)");
        }
        metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    tensors.push_back(parse_tensor(key, value, data_size, where));
  }
  // The tensors must tile the data section: no gaps, no overlaps, nothing left over.
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.begin != expected) {
      const std::string tw = where + ": tensor " + printable(t.name);
      if (t.begin > expected) {
        fail(tw, "its data starts at " + std::to_string(t.begin) +
                     " but the tensors before it end at " + std::to_string(expected) +
                     ": a gap, which safetensors forbids");
      }
      fail(tw, "its data [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                   "] overlaps tensor " + printable(prev ? prev->name : std::string()) +
                   ", which ends at " + std::to_string(expected));
    }
    expected = t.end;
    prev = &t;
  }
  if (expected != data_size) {
    fail(where, "the tensors cover " + std::to_string(expected) +
                    " bytes but the data section holds " + std::to_string(data_size) +
                    "; safetensors forbids trailing bytes");
  }

  ArrayMap arrays;
  const uint64_t base = 8 + n;
  for (TensorInfo& t : tensors) {
    // File items are Tessera's (little-endian, row-major).
    const TensorBytes bytes{base + t.begin, t.end - t.begin, 0, false};
    const Dtype dtype = t.dtype->dtype;
    if (lazy) {
      arrays.emplace(t.name, lazy_tensor(lazy, where + ": tensor " + printable(t.name), bytes,
                                         std::move(t.shape), dtype, s));
      continue;
    }
    OwnedBuffer out(static_cast<size_t>(bytes.nbytes));
    read_tensor(r, bytes, t.shape, dtype, out.data());
    arrays.emplace(t.name, array(out.release(), std::move(t.shape), dtype, allocator::free));
  }
  return {std::move(arrays), std::move(metadata)};
}

using Prepared = PreparedArrays;

Prepared prepare_tensors(ArrayMap arrays) {
  if (arrays.count(kMetadataKey)) {
    throw std::invalid_argument(
        "[save_safetensors] an array is named \"__metadata__\", which safetensors reserves for "
        "the metadata map; rename it");
  }
  return prepare_sorted_for_save(arrays);
}

// The length field and the JSON header, padded with spaces so the data starts 8-byte aligned.
std::string header_bytes(const Prepared& arrays, const StringMap& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [key, a] : arrays) {
    json shape = json::array();
    for (int32_t d : a.shape()) shape.push_back(d);
    header[key] = {{"dtype", code_of(a.dtype())},
                   {"shape", std::move(shape)},
                   {"data_offsets", {offset, offset + a.nbytes()}}};
    offset += a.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {
    throw std::invalid_argument(
        "[save_safetensors] a tensor name or metadata string is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  put_le(out, text.size(), 8);
  return out + text;
}

void write_safetensors(ByteWriter& w, const Prepared& arrays, const std::string& header) {
  w.write(header);
  for (const auto& [key, a] : arrays) {
    if (a.nbytes() > 0) w.write(a.data<char>(), a.nbytes());
  }
}

}  // namespace

SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s) {
  auto r = std::make_shared<const FileReader>(file, "[load_safetensors]");
  return read_safetensors(*r, "[load_safetensors] " + file, r, s);
}

void save_safetensors(const std::string& file, std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata) {
  const Prepared prepared = prepare_tensors(std::move(arrays));
  const std::string header = header_bytes(prepared, metadata);
  const std::string path = ends_with(file, ".safetensors") ? file : file + ".safetensors";
  FileWriter w(path, "[save_safetensors]");
  write_safetensors(w, prepared, header);
  w.close();
}

SafetensorsLoad load_safetensors_bytes(std::string_view bytes, const std::string& name) {
  MemoryReader r(bytes);
  return read_safetensors(r, "[load_safetensors] " + name);
}

std::string save_safetensors_bytes(std::unordered_map<std::string, array> arrays,
                                   std::unordered_map<std::string, std::string> metadata) {
  const Prepared prepared = prepare_tensors(std::move(arrays));
  StringWriter w;
  write_safetensors(w, prepared, header_bytes(prepared, metadata));
  return w.take();
}

}  // namespace tessera
