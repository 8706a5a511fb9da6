// Exporting traced functions to a file and running them in another process (MLX's export API):
// export_function traces `fun` on example inputs, as compile does, and writes the graph (every
// primitive with its parameters, the constants it captured) to `file`; import_function reads it
// back as a callable that replays the graph, with no Python and no original code needed. An
// exporter writes several traces (other shapes, dtypes or keyword sets) into one file; the
// imported function picks the trace its arguments match. With `shapeless`, a trace takes any
// shapes of the traced ranks.
//
// The file is Tessera's own format (docs/python.md, "Exporting functions"); files MLX writes are
// refused with an error that says so.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/array.h"

namespace tessera {

using Args = std::vector<array>;
using Kwargs = std::unordered_map<std::string, array>;
using ExportFn = std::function<std::vector<array>(const Args&, const Kwargs&)>;

// Writes each trace into its file as it is made; close() (or the destructor) ends it, after which
// a call throws.
class FunctionExporter {
 public:
  void operator()(const Args& args, const Kwargs& kwargs = {});
  void operator()(const Kwargs& kwargs) { (*this)(Args{}, kwargs); }
  // exporter({x, y}) and exporter({}): positional arrays (a braced list would be ambiguous).
  void operator()(std::initializer_list<array> args) { (*this)(Args(args)); }
  void close();
  ~FunctionExporter();
  FunctionExporter(FunctionExporter&&) noexcept;
  FunctionExporter& operator=(FunctionExporter&&) noexcept;

  struct Impl;

 private:
  friend FunctionExporter exporter(const std::string&, ExportFn, bool, const std::string&);
  explicit FunctionExporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

FunctionExporter exporter(const std::string& file, ExportFn fun, bool shapeless = false,
                          const std::string& metadata = "");
FunctionExporter exporter(const std::string& file,
                          const std::function<std::vector<array>(const Args&)>& fun,
                          bool shapeless = false, const std::string& metadata = "");

void export_function(const std::string& file, ExportFn fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless = false,
                     const std::string& metadata = "");
void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Args&)>& fun, const Args& args,
                     bool shapeless = false, const std::string& metadata = "");
void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Kwargs&)>& fun,
                     const Kwargs& kwargs, bool shapeless = false,
                     const std::string& metadata = "");

class ImportedFunction;
namespace detail {
std::vector<std::string> exported_primitives(const std::string& file);
}  // namespace detail

class ImportedFunction {
 public:
  // The outputs of the trace whose inputs match: the same number of positional arrays, the same
  // keywords, dtypes, and shapes (ranks for a shapeless export). No match throws
  // std::invalid_argument listing the traces the file has.
  std::vector<array> operator()(const Args& args, const Kwargs& kwargs = {}) const;
  std::vector<array> operator()(const Kwargs& kwargs) const { return (*this)(Args{}, kwargs); }
  // f({x, y}) and f({}): positional arrays (a braced list would be ambiguous), as MLX's.
  std::vector<array> operator()(std::initializer_list<array> args) const {
    return (*this)(Args(args));
  }
  const std::string& metadata() const;

  struct Impl;

 private:
  friend ImportedFunction import_function(const std::string& file);
  friend std::vector<std::string> detail::exported_primitives(const std::string& file);
  explicit ImportedFunction(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Reads `file`; std::invalid_argument naming the file for a missing, truncated or foreign one.
ImportedFunction import_function(const std::string& file);

namespace detail {
// The primitives import_function can rebuild, and those a file's traces use, by key (sorted;
// the tests check that every exportable primitive goes through a file).
std::vector<std::string> exportable_primitives();
std::vector<std::string> exported_primitives(const std::string& file);
}  // namespace detail

}  // namespace tessera
