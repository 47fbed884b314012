// cli::Main, the production wiring of cli::Run: the process's environment,
// terminals and file descriptors, and the real WebSocket connector (which is why
// it is not in main.cc: tests link main.cc without the WebSocket client).

#include <sys/ioctl.h>
#include <unistd.h>

#include "hpod/cli/main.h"
#include "hpod/cli/session.h"

namespace hpod::cli {

int Main(int argc, const char* const* argv, const char* const* envp, std::ostream& out,
         std::ostream& err) {
  Runtime rt;
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) rt.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  rt.out = &out;
  rt.err = &err;
  rt.stderr_is_tty = ::isatty(STDERR_FILENO) == 1;
  rt.stdin_is_tty = ::isatty(STDIN_FILENO) == 1;
  rt.stdin_fd = STDIN_FILENO;
  rt.stdout_fd = STDOUT_FILENO;
  rt.make_session_connector = [](const http::ClientOptions& options) {
    return RealSessionConnector(options);
  };
  // awscli measures the terminal behind stdout and falls back to 80 columns.
  winsize ws{};
  if (::isatty(STDOUT_FILENO) == 1 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
      ws.ws_col > 0) {
    rt.terminal_width = ws.ws_col;
  }
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return Run(args, rt);
}

}  // namespace hpod::cli
