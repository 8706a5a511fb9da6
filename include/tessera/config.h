// The configuration registry: every environment variable Tessera reads, with its MLX alias,
// type, default and doc; `tessera env` prints it. Nothing else in the code calls getenv.
//
// Values parse strictly. A malformed value throws std::invalid_argument naming the variable,
// the value and what is accepted. TESSERA_x wins over MLX_x when both are set.
// Variables not used by this build (Metal, CUDA, JACCL) are accepted and never fail validate_all.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::config {

enum class VarType { boolean, integer, string, path };

// Where an effective value came from.
enum class Source { default_value, tessera_name, mlx_name, override_value };

struct VarInfo {
  std::string name;         // "TESSERA_BFS_MAX_WIDTH"
  std::string alias;        // "MLX_BFS_MAX_WIDTH" (may be empty, or a foreign name like NCCL_PORT)
  VarType type;
  std::string default_value;  // textual; empty = unset
  int64_t min_value;        // integers only
  int64_t max_value;
  std::string subsystem;    // "core", "compile", "distributed/ring", "metal", "cuda", ...
  bool used_by_this_build;  // false for Metal-only / CUDA-only knobs: accepted, reported unused
  std::string doc;          // one line
  std::string alias2 = {};  // a second foreign spelling (JACCL_RANK, CUDA_PATH); alias wins over it
  bool secret = false;      // value never printed (TESSERA_JOB_TOKEN)
};

struct Effective {
  const VarInfo* info;
  std::optional<std::string> raw;  // the text that was read (nullopt when defaulted)
  Source source;                   // mlx_name also covers alias2
  std::string read_from = {};      // the spelling read from the environment; empty otherwise
};

// The whole table, in a stable order.
const std::vector<VarInfo>& registry();

// Typed accessors. `name` is the TESSERA_ spelling and must be registered (else
// std::logic_error: a programming error). Values are read from the environment once and cached;
// reload() re-reads (tests use it after setenv).
bool get_bool(const std::string& name);
int64_t get_int(const std::string& name);
// Works for every type (the text, validated); nullopt when unset and with no default.
// get_int on an unset integer with no default throws std::logic_error: check get_string first.
std::optional<std::string> get_string(const std::string& name);
Effective effective(const std::string& name);

// Re-read the environment (tests). Overrides stay.
void reload();
// Force a value, as if set in the environment (tests, CLI); nullopt removes the override.
// A malformed value throws std::invalid_argument at once and leaves the previous state.
void set_override(const std::string& name, std::optional<std::string> value);

// Validate every registered variable now; throws on the first malformed one.
void validate_all();

// Markdown table of the registry (docs/env.md is generated from it).
std::string markdown_table();

}  // namespace tessera::config
