// What the launcher and the rank agent (the remote end of an ssh rank) share: the per-host
// defaults every rank gets (its CPUs, its share of memory) and the framing of the launcher's
// messages to an agent over ssh's stdin.
//
// The launcher -> agent stream: one line of JSON (the rank's job: argv, environment, ring
// hostfile, token, ...), then frames of one type byte each:
//   'D' u32 (big-endian) length, bytes   stdin data for the rank
//   'E'                                  the launcher's stdin ended: close the rank's stdin
//   'H'                                  heartbeat: the launcher is alive
//   'S' u8 signal                        send this signal to the rank's process group
// The end of the stream (ssh closed, the launcher died) means: stop the ranks. One agent runs
// every rank of its host, so a host costs one ssh session however many ranks it runs.
//
// The agent -> launcher stream (its stdout): the line kAgentReady (so the launcher can tell
// "ssh failed" from "a rank failed"), then frames:
//   'O' u32 rank, u32 length, bytes      the rank's stdout
//   'R' u32 rank, u32 length, bytes      the rank's stderr
//   'X' u32 rank, u32 status             the rank exited (a death by signal n as 128 + n)
// The agent's own messages (a directory that does not exist, ...) go to its stderr.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cli {

inline constexpr const char* kAgentReady = "\x1etessera rank agent ready\n";
inline constexpr const char* kAgentCommand = "_rank-agent";

std::string frame_data(const char* data, size_t n);
inline std::string frame_stdin_end() { return "E"; }
inline std::string frame_heartbeat() { return "H"; }
inline std::string frame_signal(int sig) { return std::string("S") + static_cast<char>(sig); }
std::string frame_output(char type, int rank, const char* data, size_t n);  // 'O' or 'R'
std::string frame_exit(int rank, int status);
// A big-endian u32 at p.
uint32_t read_u32(const char* p);

// One frame of either stream.
struct Frame {
  char type = 0;          // 'D', 'E', 'H', 'S' (launcher -> agent); 'O', 'R', 'X' (agent -> launcher)
  uint32_t rank = 0;      // 'O', 'R', 'X'
  uint32_t value = 0;     // 'S': the signal; 'X': the status
  std::string_view data;  // 'D', 'O', 'R'
};
// The longest payload a frame may carry (the builders' callers send at most one read, 64 KiB).
inline constexpr uint32_t kMaxFramePayload = 1u << 20;
// Decode the whole frames at the start of `buf` in order, calling on_frame for each, and return
// the bytes they took (a partial frame at the end waits for more bytes). A type byte that does
// not belong to the stream, or a length above kMaxFramePayload, throws std::runtime_error naming
// the byte offset: nothing after it can be trusted.
size_t decode_launcher_frames(std::string_view buf, const std::function<void(const Frame&)>& on_frame);
size_t decode_agent_frames(std::string_view buf, const std::function<void(const Frame&)>& on_frame);

// The CPUs this process may run on, ascending.
std::vector<int> allowed_cpus();
// Rank i's CPUs out of `cpus` for n ranks on this host: contiguous, nearly equal groups when
// n <= count, else the single CPU i mod count.
std::vector<int> cpus_for_rank(const std::vector<int>& cpus, int n, int i);

// "TESSERA_MEMORY_LIMIT_MB=<0.8 x RAM / n>" for each of n ranks on this host, or "" when the
// RAM size is unknown: n ranks each defaulting to 0.8 x RAM could together ask for 0.8 n x RAM
// and meet the kernel's OOM killer instead of Tessera's clear error.
std::string memory_share_entry(int ranks_on_host);

// Names the launcher sets for each rank; inherited values are dropped, never passed on.
bool is_launcher_variable(const std::string& name);

// Seconds on a monotonic clock.
double now_s();

// `s` quoted for a POSIX shell (the remote shell ssh hands its command to).
std::string shell_quote(const std::string& s);
// This command's own path (/proc/self/exe): the same path runs it on the other hosts.
std::string self_path();
// ssh's options for every connection the launcher and `tessera config` open: never a prompt, a
// bounded connect, a dead link noticed.
const std::vector<std::string>& ssh_options();

// Writes all n bytes (retrying EINTR, waiting out a full pipe); gives up quietly when the reader
// is gone.
void write_all(int fd, const char* p, size_t n);
inline void write_all(int fd, const std::string& s) { write_all(fd, s.data(), s.size()); }

// Owns a file descriptor; closes it on destruction.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    reset();
    fd = o.fd;
    o.fd = -1;
    return *this;
  }
  ~Fd() { reset(); }
  void reset();
};

// pipe2(O_CLOEXEC), or std::runtime_error naming the reason.
void make_pipe(int fds[2]);

// Starts `argv` (looked up in PATH) with stdin / stdout / stderr from in / out / err, in its own
// process group (signals reach its whole tree), killed when this process dies, on `cpus` (empty:
// anywhere), in `cwd` ("": here), with `env` (nullptr: this process's). Signals stay blocked
// across the fork until the child has its default handlers, so one meant for the job is not
// lost in the child. A program that cannot be started writes why to `err` and exits 127.
pid_t spawn_child(const std::vector<std::string>& argv, const std::vector<std::string>* env,
                  const std::vector<int>& cpus, const std::string& cwd, int in, int out, int err);

}  // namespace tessera::cli
