// The subcommands of the `tessera` command line tool (DESIGN.md section 6), one file each;
// main.cpp looks them up by name in its table.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

// Each takes the arguments after the subcommand's name and returns the process exit code:
// 0 on success, 2 for bad usage or bad configuration, 1 for other failures.
int env_command(const std::vector<std::string>& args);
int launch_command(const std::vector<std::string>& args);
int config_command(const std::vector<std::string>& args);
// Not listed in the usage: config's reachability probe, run on every host (config_command.cpp).
int probe_command(const std::vector<std::string>& args);
// Not listed in the usage: the remote end of a rank started over ssh (rank_agent.cpp).
int rank_agent_command(const std::vector<std::string>& args);

// Merges DIR/rank0.json ... rank<n-1>.json into DIR/trace.json (launch --trace); returns its path.
std::string merge_rank_traces(const std::string& dir, int n);

}  // namespace tessera::cli
