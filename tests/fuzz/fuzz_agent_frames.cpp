// The launcher <-> rank agent streams over ssh (tools/tessera/rank_host.cpp): both decoders.
// What decodes must be what the builders write, byte for byte; anything else throws
// std::runtime_error naming the byte offset.
#include "fuzz_target.h"
#include "rank_host.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::cli;
  using tessera::fuzz::contract_broken;
  const std::string_view in = tessera::fuzz::bytes_of(data, size);
  tessera::fuzz::expect_parse_or<std::runtime_error>("at byte", [&] {
    std::string again;
    const size_t used = decode_launcher_frames(in, [&](const Frame& f) {
      if (f.type == 'D') again += frame_data(f.data.data(), f.data.size());
      else if (f.type == 'S') again += frame_signal(static_cast<int>(f.value));
      else again += f.type == 'E' ? frame_stdin_end() : frame_heartbeat();
    });
    if (used > in.size() || again != in.substr(0, used)) {
      contract_broken("launcher frames do not re-encode to their bytes", std::to_string(used));
    }
  });
  tessera::fuzz::expect_parse_or<std::runtime_error>("at byte", [&] {
    std::string again;
    const size_t used = decode_agent_frames(in, [&](const Frame& f) {
      if (f.data.size() > kMaxFramePayload) contract_broken("a payload over the limit", "");
      again += f.type == 'X' ? frame_exit(static_cast<int>(f.rank), static_cast<int>(f.value))
                             : frame_output(f.type, static_cast<int>(f.rank), f.data.data(),
                                            f.data.size());
    });
    if (used > in.size() || again != in.substr(0, used)) {
      contract_broken("agent frames do not re-encode to their bytes", std::to_string(used));
    }
  });
  return 0;
}
