// `tessera env`: prints every registered environment variable with its effective value and
// where it came from, or (--markdown) the registry as the Markdown page docs/env.md.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "tessera/config.h"

namespace tessera::cli {
namespace {

struct Row {
  std::string name, also, value, source, note;
};

std::string value_text(const config::VarInfo& info, const config::Effective& eff) {
  if (eff.raw) {
    if (info.secret) return "(hidden)";
    return eff.raw->empty() ? "\"\"" : *eff.raw;
  }
  return info.default_value.empty() ? "(unset)" : info.default_value;
}

std::string source_text(const config::VarInfo& info, const config::Effective& eff) {
  switch (eff.source) {
    case config::Source::tessera_name:
    case config::Source::mlx_name:
      return eff.read_from;
    case config::Source::override_value:
      return "override";
    case config::Source::default_value:
      break;
  }
  return info.default_value.empty() ? "unset" : "default";
}

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera env [--markdown]\n\n"
               "Prints every environment variable Tessera reads, its effective value and where "
               "it came from\n(default, the TESSERA_ name, or the MLX alias). Exits 2 when a "
               "value is malformed.\n\n"
               "  --markdown  print the registry as Markdown (the source of docs/env.md)\n");
}

int print_table() {
  std::vector<Row> rows;
  std::vector<std::string> errors;
  for (const config::VarInfo& info : config::registry()) {
    const config::Effective eff = config::effective(info.name);
    std::string also = info.alias;
    if (!info.alias2.empty()) also += (also.empty() ? "" : ",") + info.alias2;
    Row row{info.name, also.empty() ? "-" : also, value_text(info, eff), source_text(info, eff), ""};
    std::string problem;
    try {
      config::get_string(info.name);  // validates without caring about the type
    } catch (const std::invalid_argument& e) {
      problem = e.what();
    }
    if (!info.used_by_this_build) {
      row.note = "not used by this build (" + info.subsystem + ")";
      if (!problem.empty()) row.note += "; malformed, ignored";
    } else if (!problem.empty()) {
      row.note = "INVALID (see stderr)";
      errors.push_back(problem);
    }
    rows.push_back(std::move(row));
  }

  Row header{"NAME", "ALSO READ AS", "VALUE", "SOURCE", "NOTE"};
  size_t name_width = header.name.size(), also_width = header.also.size(),
         value_width = header.value.size(), source_width = header.source.size();
  for (const Row& row : rows) {
    name_width = std::max(name_width, row.name.size());
    also_width = std::max(also_width, row.also.size());
    value_width = std::max(value_width, row.value.size());
    source_width = std::max(source_width, row.source.size());
  }
  auto print_row = [&](const Row& row) {
    std::string line = row.name + std::string(name_width - row.name.size() + 2, ' ') +
                       row.also + std::string(also_width - row.also.size() + 2, ' ') +
                       row.value + std::string(value_width - row.value.size() + 2, ' ') +
                       row.source;
    if (!row.note.empty()) {
      line += std::string(source_width - row.source.size() + 2, ' ') + row.note;
    }
    std::printf("%s\n", line.c_str());
  };
  print_row(header);
  for (const Row& row : rows) print_row(row);
  std::fflush(stdout);

  for (const std::string& error : errors) std::fprintf(stderr, "%s\n", error.c_str());
  return errors.empty() ? 0 : 2;
}

}  // namespace

int env_command(const std::vector<std::string>& args) {
  if (args.empty()) return print_table();
  if (args.size() == 1 && args[0] == "--markdown") {
    std::fputs(config::markdown_table().c_str(), stdout);
    return 0;
  }
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    print_usage(stdout);
    return 0;
  }
  std::fprintf(stderr, "tessera env: unexpected argument '%s'\n\n", args[0].c_str());
  print_usage(stderr);
  return 2;
}

}  // namespace tessera::cli
