// A real single-node Slurm (Debian's slurm-wlm): slurmctld and slurmd started by the test from
// a private directory (auth/none, no munge), 4 task slots on this host, and `srun -n 4` of a
// ring job with no hostfile — the ranks meet at the step's first node (rendezvous.h). The
// daemons, every step process and the directory are removed afterwards.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "test_util.h"

using tessera::test_util::count_of;
using tessera::test_util::free_loopback_ports;
using tessera::test_util::run_command;

namespace {

namespace fs = std::filesystem;

// The processes whose environment holds `entry` (slurmd gives SLURM_CONF to every step process).
std::vector<pid_t> processes_with_env(const std::string& entry) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::atoi(name.c_str());
    if (pid == ::getpid()) continue;
    std::ifstream f(e.path() / "environ");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string env = ss.str();
    for (size_t at = 0; at < env.size();) {
      const size_t end = env.find('\0', at);
      if (env.compare(at, end == std::string::npos ? std::string::npos : end - at, entry) == 0) {
        out.push_back(pid);
        break;
      }
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return out;
}

class Slurm {
 public:
  static bool available() {
    return ::geteuid() == 0 && ::access("/usr/sbin/slurmctld", X_OK) == 0 &&
           ::access("/usr/sbin/slurmd", X_OK) == 0 && ::access("/usr/bin/srun", X_OK) == 0;
  }
  Slurm() {
    char tmpl[] = "/tmp/tessera-slurm-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    for (const char* d : {"state", "spool", "log", "run"}) fs::create_directories(dir_ + "/" + d);
    std::ofstream(dir_ + "/plugstack.conf");
    char host[HOST_NAME_MAX + 1] = {};
    ::gethostname(host, sizeof host - 1);
    const auto ports = free_loopback_ports(2);
    std::ofstream(conf()) << "ClusterName=tessera\nSlurmctldHost=" << host << "(127.0.0.1)\n"
        << "SlurmctldPort=" << ports[0] << "\nSlurmdPort=" << ports[1] << "\n"
        << "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/none\nCredType=cred/none\n"
        << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool/%n\n"
        << "SlurmctldPidFile=" << dir_ << "/run/slurmctld.pid\nSlurmdPidFile=" << dir_ << "/run/slurmd.pid\n"
        << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\nSlurmdLogFile=" << dir_ << "/log/slurmd.log\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
        << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nMpiDefault=none\n"
        << "SwitchType=switch/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
        << "SchedulerType=sched/builtin\nReturnToService=2\nSlurmdParameters=config_overrides\n"
        << "PlugStackConfig=" << dir_ << "/plugstack.conf\nMailProg=/bin/true\n"
        << "NodeName=" << host << " NodeAddr=127.0.0.1 CPUs=4 Boards=1 SocketsPerBoard=1 "
        << "CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN\n"
        << "PartitionName=debug Nodes=" << host << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n";
    daemons_.push_back(start({"/usr/sbin/slurmctld", "-D", "-i", "-f", conf()}));
    daemons_.push_back(start({"/usr/sbin/slurmd", "-D", "-f", conf()}));
  }
  ~Slurm() {
    for (pid_t p : daemons_) ::kill(p, SIGKILL);
    for (pid_t p : daemons_) ::waitpid(p, nullptr, 0);
    // A step outlives its daemons (slurmstepd ignores SIGTERM): everything that has this
    // cluster's SLURM_CONF goes, bounded.
    for (int i = 0; i < 50; ++i) {
      auto left = processes_with_env("SLURM_CONF=" + conf());
      if (left.empty()) break;
      for (pid_t p : left) ::kill(p, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string conf() const { return dir_ + "/slurm.conf"; }
  // Runs `srun ARGS` against this cluster; SLURM_CONF is given to that command only.
  tessera::test_util::CommandResult srun(const std::string& args, int limit_s = 60) const {
    return run_command("env SLURM_CONF=" + conf() + " timeout -s KILL " + std::to_string(limit_s) +
                       " srun " + args + " 2>&1");
  }
  // Waits (bounded) until a 4-task step runs.
  bool ready() const {
    for (int i = 0; i < 40; ++i) {
      if (srun("-n 4 true", 5).code == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return false;
  }
  std::string log() const {
    std::stringstream ss;
    for (const char* f : {"/log/slurmctld.log", "/log/slurmd.log"}) ss << std::ifstream(dir_ + f).rdbuf();
    return ss.str();
  }

 private:
  pid_t start(std::vector<std::string> argv) {
    pid_t pid = ::fork();
    if (pid == 0) {
      for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        if (kv.rfind("SLURM_", 0) == 0) ::unsetenv(kv.substr(0, kv.find('=')).c_str());
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    return pid;
  }
  std::string dir_;
  std::vector<pid_t> daemons_;
};

}  // namespace

TEST(Slurm, SrunStartsARingJobWithoutAHostfile) {
  if (!Slurm::available()) GTEST_SKIP() << "needs root and slurm-wlm (make test installs it)";
  Slurm slurm;
  ASSERT_TRUE(slurm.ready()) << slurm.log();
  auto r = slurm.srun("-n 4 -l env TESSERA_JOB_TOKEN=s3cret TESSERA_DIST_CONNECT_TIMEOUT=20 " +
                      std::string(TESSERA_BIN_DIR) + "/dist_worker join");
  ASSERT_EQ(r.code, 0) << r.out << slurm.log();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(count_of(r.out, std::to_string(t) + ": rank " + std::to_string(t) + ": all_sum 10"), 1) << r.out;
  }
}
