// Entry point of the `tessera` command: finds the subcommand in a table and runs it.
// A new subcommand adds its function to commands.h, its own file, and one row below.
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"

namespace tessera::cli {
namespace {

// `tessera mlx` concerns a Python environment: the command of the Python package answers it before
// it reaches this tool (python/tessera/_cli.py). Listed here so that the usage shows it.
int mlx_command(const std::vector<std::string>&) {
  throw std::invalid_argument(
      "enable | disable | status is answered by the `tessera` command of the Python package "
      "(pip install tessera; or python -m tessera._cli mlx ...), which knows the environment");
}

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(const std::vector<std::string>& args);
  bool listed = true;  // shown by the usage
};

constexpr Subcommand kSubcommands[] = {
    {"env", "print every environment variable with its effective value and source",
     env_command},
    {"launch", "start and supervise the ranks of a job, on this host or over ssh", launch_command},
    {"config", "check ssh, probe the hosts' links, find a ring, write a hostfile (DOT with --dot)", config_command},
    {"mlx", "enable | disable | status: let `import mlx` in this Python environment give Tessera",
     mlx_command},
    {"_rank-agent", "", rank_agent_command, false},
    {"_probe", "", probe_command, false},
};

int usage() {
  std::fprintf(stderr, "usage: tessera <command> [arguments]\n\ncommands:\n");
  for (const Subcommand& sub : kSubcommands) {
    if (!sub.listed) continue;
    std::fprintf(stderr, "  %-10.*s %.*s\n", static_cast<int>(sub.name.size()), sub.name.data(),
                 static_cast<int>(sub.summary.size()), sub.summary.data());
  }
  std::fprintf(stderr, "\n`tessera <command> --help` describes one command.\n");
  return 2;
}

int run(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string_view name = argv[1];
  for (const Subcommand& sub : kSubcommands) {
    if (sub.name != name) continue;
    const std::vector<std::string> args(argv + 2, argv + argc);
    try {
      return sub.run(args);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "tessera %s: %s\n", argv[1], e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera %s: %s\n", argv[1], e.what());
      return 1;
    }
  }
  if (name != "--help" && name != "-h" && name != "help") {
    std::fprintf(stderr, "tessera: unknown command '%s'\n\n", argv[1]);
  }
  return usage();
}

}  // namespace
}  // namespace tessera::cli

int main(int argc, char** argv) {
  return tessera::cli::run(argc, argv);
}
