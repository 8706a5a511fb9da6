// Array IO from Python: load (by extension or format=, .npy / .npz / .safetensors / .gguf,
// return_metadata), save, savez, savez_compressed, save_safetensors, save_gguf; paths (str or
// os.PathLike) or binary file objects. Every header is validated in C++ (include/tessera/io.h).
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/vector.h>

#include <filesystem>

#include "convert.h"
#include "tessera/io.h"

namespace tessera::python {

namespace {

bool is_path(nb::handle f) {
  return nb::isinstance<nb::str>(f) || nb::hasattr(f, "__fspath__");
}

std::string path_of(nb::handle f) {
  return nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(f));
}

std::string extension(const std::string& path) {
  return std::filesystem::path(path).extension().string();
}

nb::dict to_dict(const std::unordered_map<std::string, array>& m) {
  nb::dict d;
  for (const auto& [k, v] : m) d[k.c_str()] = nb::cast(v);
  return d;
}

std::unordered_map<std::string, array> from_dict(nb::handle d, const char* op) {
  std::unordered_map<std::string, array> out;
  for (auto [k, v] : nb::borrow<nb::dict>(d)) {
    if (!nb::isinstance<nb::str>(k)) {
      throw std::invalid_argument(std::string("[") + op + "] keys must be strings, got " +
                                  nb::cast<std::string>(nb::repr(k)));
    }
    out.emplace(nb::cast<std::string>(k), to_array(v));
  }
  return out;
}

// The bytes of a binary file object (read()), or of the file at a path.
std::string read_all(nb::handle f) {
  nb::object data = f.attr("read")();
  if (!nb::isinstance<nb::bytes>(data)) {
    throw std::invalid_argument("[load] the file object's read() returned " +
                                nb::cast<std::string>(nb::str(data.type().attr("__name__"))) +
                                ", not bytes: open the file in binary mode ('rb')");
  }
  nb::bytes b = nb::borrow<nb::bytes>(data);
  return std::string(b.c_str(), b.size());
}

void write_all(nb::handle f, const std::string& bytes) {
  f.attr("write")(nb::bytes(bytes.data(), bytes.size()));
}

// Saves to a path (to_path(path)) or to a binary file object (the bytes to_bytes() returns),
// without the GIL.
template <typename ToPath, typename ToBytes>
void save_to(nb::handle file, ToPath&& to_path, ToBytes&& to_bytes) {
  if (is_path(file)) {
    std::string path = path_of(file);
    blocking([&] { to_path(path); });
  } else {
    std::string bytes;
    blocking([&] { bytes = to_bytes(); });
    write_all(file, bytes);
  }
}

nb::object load_any(nb::handle file, std::optional<std::string> format, bool return_metadata,
                    StreamOrDevice s) {
  std::string fmt;
  std::string path;
  if (is_path(file)) {
    path = path_of(file);
    fmt = format ? *format : extension(path);
  } else {
    // A file from open() has a name to take the extension from, as MLX does.
    nb::object fname = nb::getattr(file, "name", nb::none());
    if (format) {
      fmt = *format;
    } else if (nb::isinstance<nb::str>(fname)) {
      fmt = extension(nb::cast<std::string>(fname));
    }
    if (fmt.empty()) {
      throw std::invalid_argument("[load] a file object without a name needs format= ('npy', "
                                  "'npz', 'safetensors' or 'gguf'): it has no extension to tell");
    }
  }
  if (!fmt.empty() && fmt[0] == '.') fmt = fmt.substr(1);
  if (return_metadata && fmt != "safetensors" && fmt != "gguf") {
    throw std::invalid_argument("[load] return_metadata is only for .safetensors and .gguf files");
  }
  const std::string name = path.empty() ? std::string("<file object>") : path;
  std::string bytes;
  if (path.empty()) bytes = read_all(file);
  if (fmt == "npy") {
    std::optional<array> a;
    blocking([&] { a = path.empty() ? load_npy_bytes(bytes, name) : load(path, s); });
    return nb::cast(*a);
  }
  if (fmt == "npz") {
    std::unordered_map<std::string, array> m;
    blocking([&] { m = path.empty() ? load_npz_bytes(bytes, name) : load_npz(path); });
    return to_dict(m);
  }
  if (fmt == "safetensors") {
    SafetensorsLoad r;
    blocking([&] { r = path.empty() ? load_safetensors_bytes(bytes, name) : load_safetensors(path, s); });
    nb::dict arrays = to_dict(r.first);
    if (!return_metadata) return arrays;
    nb::dict meta;
    for (const auto& [k, v] : r.second) meta[k.c_str()] = v;
    return nb::make_tuple(arrays, meta);
  }
  if (fmt == "gguf") {
    GGUFLoad r;
    blocking([&] { r = path.empty() ? load_gguf_bytes(bytes, name) : load_gguf(path); });
    nb::dict arrays = to_dict(r.first);
    if (!return_metadata) return arrays;
    nb::dict meta;
    for (const auto& [k, v] : r.second) {
      if (const auto* a = std::get_if<array>(&v)) meta[k.c_str()] = nb::cast(*a);
      else if (const auto* str = std::get_if<std::string>(&v)) meta[k.c_str()] = *str;
      else if (const auto* list = std::get_if<std::vector<std::string>>(&v)) meta[k.c_str()] = nb::cast(*list);
    }
    return nb::make_tuple(arrays, meta);
  }
  throw std::invalid_argument("[load] unknown format '" + fmt + "' for " + name +
                              ": expected npy, npz, safetensors or gguf");
}

void savez_any(nb::handle file, nb::args args, nb::kwargs kwargs, bool compressed) {
  nb::dict all;
  size_t i = 0;
  for (nb::handle a : args) all[("arr_" + std::to_string(i++)).c_str()] = a;
  for (auto [k, v] : kwargs) {
    if (all.contains(k)) {
      throw std::invalid_argument("[savez] the keyword " + nb::cast<std::string>(k) +
                                  " names a positional array too");
    }
    all[k] = v;
  }
  auto arrays = from_dict(all, "savez");
  save_to(
      file, [&](const std::string& path) { savez(path, arrays, compressed); },
      [&] { return savez_bytes(arrays, compressed); });
}

}  // namespace

void init_io(nb::module_& m) {
  m.def("load", &load_any, "file"_a, "format"_a = nb::none(), "return_metadata"_a = false,
        nb::kw_only(), "stream"_a = nb::none(),
        "Loads a .npy (an array), .npz, .safetensors or .gguf (a dict of arrays) file, chosen by its "
        "extension (a file object's name) or format=; with return_metadata=True a .safetensors or .gguf file also gives its "
        "metadata dict. A corrupt or truncated file is a ValueError naming the file and the "
        "tensor, raised here; the data of a .npy or .safetensors file is read when an array is "
        "evaluated (on `stream`), so tensors never used are never read.");
  m.def(
      "save",
      [](nb::handle file, const ArrayLike& a) {
        array x = to_array(a);
        save_to(
            file, [&](const std::string& path) { save(path, x); },
            [&] { return save_npy_bytes(x); });
      },
      "file"_a, "arr"_a, "Saves an array as .npy (the extension is added when missing).");
  m.def("savez", [](nb::handle file, nb::args args, nb::kwargs kwargs) { savez_any(file, args, kwargs, false); },
        "file"_a, "args"_a, "kwargs"_a,
        "Saves arrays in an uncompressed .npz: positional ones as arr_0, arr_1, ...");
  m.def("savez_compressed",
        [](nb::handle file, nb::args args, nb::kwargs kwargs) { savez_any(file, args, kwargs, true); },
        "file"_a, "args"_a, "kwargs"_a, "As savez, compressed (deflate).");
  m.def(
      "save_safetensors",
      [](nb::handle file, nb::dict arrays, std::optional<nb::dict> metadata) {
        auto m_arrays = from_dict(arrays, "save_safetensors");
        std::unordered_map<std::string, std::string> meta;
        if (metadata) {
          for (auto [k, v] : *metadata) {
            if (!nb::isinstance<nb::str>(v) || !nb::isinstance<nb::str>(k)) {
              throw std::invalid_argument("[save_safetensors] metadata must map strings to strings");
            }
            meta.emplace(nb::cast<std::string>(k), nb::cast<std::string>(v));
          }
        }
        save_to(
            file, [&](const std::string& path) { save_safetensors(path, m_arrays, meta); },
            [&] { return save_safetensors_bytes(m_arrays, meta); });
      },
      "file"_a, "arrays"_a, "metadata"_a = nb::none(),
      "Saves a dict of arrays as .safetensors, with optional string metadata.");
  m.def(
      "save_gguf",
      [](nb::handle file, nb::dict arrays, std::optional<nb::dict> metadata) {
        auto m_arrays = from_dict(arrays, "save_gguf");
        std::unordered_map<std::string, GGUFMetaData> meta;
        if (metadata) {
          for (auto [k, v] : *metadata) {
            if (!nb::isinstance<nb::str>(k)) {
              throw std::invalid_argument("[save_gguf] metadata keys must be strings, got " +
                                          nb::cast<std::string>(nb::repr(k)));
            }
            const std::string key = nb::cast<std::string>(k);
            if (nb::isinstance<nb::str>(v)) {
              meta.emplace(key, nb::cast<std::string>(v));
            } else if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
              std::vector<std::string> strs;
              for (nb::handle e : v) {
                if (!nb::isinstance<nb::str>(e)) {
                  throw std::invalid_argument("[save_gguf] metadata '" + key +
                                              "' is a list with a non-string item " +
                                              nb::cast<std::string>(nb::repr(e)) +
                                              ": lists must hold strings (use an array for numbers)");
                }
                strs.push_back(nb::cast<std::string>(e));
              }
              meta.emplace(key, std::move(strs));
            } else if (nb::isinstance<array>(v) || nb::isinstance<nb::int_>(v) ||
                       nb::isinstance<nb::float_>(v) || nb::isinstance<nb::bool_>(v)) {
              meta.emplace(key, to_array(v));
            } else {
              throw std::invalid_argument("[save_gguf] metadata '" + key + "' is a " +
                                          nb::cast<std::string>(nb::str(v.type().attr("__name__"))) +
                                          "; values must be arrays, numbers, strings or lists of strings");
            }
          }
        }
        save_to(
            file, [&](const std::string& path) { save_gguf(path, m_arrays, meta); },
            [&] { return save_gguf_bytes(m_arrays, meta); });
      },
      "file"_a, "arrays"_a, "metadata"_a = nb::none(),
      "Saves a dict of arrays as .gguf (version 3), with optional metadata: arrays (0-d or 1-d),\n"
      "numbers, strings or lists of strings.");
}

}  // namespace tessera::python
