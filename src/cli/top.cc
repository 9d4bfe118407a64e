// `simba top [PREFIX]`: a live view of the mutexes under a prefix (owner, fencing token, held
// for, waiting demand where the engine carries one, caching and idle), sorted by hold time,
// redrawn in place every --interval until `q` (or a signal). Without a terminal on stdout it
// prints one view and exits.
//
// "Held for" is how long this view has seen the same owner and token (no engine records when a
// lease was first taken, only its last renewal): "-" until the second look, then at least that.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "cli/terminal.h"

namespace simba::cli {
namespace {

using Clock = std::chrono::steady_clock;

// What the view remembers of a mutex between looks: its owner and token, and since when.
struct Seen {
  std::string owner;
  std::uint64_t token = 0;
  Clock::time_point since;
};

struct Row {
  std::string mutex;
  MutexOwner owner;
  std::string state;    // free, held, cached, cached+idle
  std::string waiting;  // "yes", "-", or "?" (the engine carries no demand)
  std::optional<Clock::duration> held;
};

std::string held_text(const std::optional<Clock::duration>& held) {
  if (!held) return "-";
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(*held).count();
  std::ostringstream out;
  if (s >= 3600) {
    out << s / 3600 << "h" << std::setw(2) << std::setfill('0') << (s % 3600) / 60 << "m";
  } else if (s >= 60) {
    out << s / 60 << "m" << std::setw(2) << std::setfill('0') << s % 60 << "s";
  } else {
    out << s << "s";
  }
  return out.str();
}

// The terminal in raw mode (no echo, a key at a time) for as long as it lives; the cursor hidden.
class RawTerminal {
 public:
  RawTerminal() {
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    std::cout << "\x1b[?25l" << std::flush;
  }
  ~RawTerminal() {
    std::cout << "\x1b[?25h" << std::flush;
    if (restore_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool restore_ = false;
};

int terminal_rows() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0) return size.ws_row;
  return 24;
}

class TopView {
 public:
  TopView(Client client, std::string prefix, std::size_t limit)
      : client_(std::move(client)),
        prefix_(std::move(prefix)),
        limit_(limit),
        demands_(client_.backend()->demand_signal() != nullptr) {}

  // One look: the records under the prefix, sorted by hold time (longest first), then name.
  // `rows`: how many to read in full (their waiting demand costs a read each).
  std::vector<Row> look(std::size_t rows) {
    auto* administration = client_.backend()->administration();
    if (!administration) {
      throw Error(errc::failed_precondition,
                  "simba top: the " + client_.backend()->capabilities().engine + " backend cannot list its mutexes");
    }
    listing_ = administration->list(prefix_, limit_);
    const auto now = Clock::now();
    std::map<std::string, Seen> seen;
    std::vector<Row> out;
    for (auto& record : listing_.records) {
      Row row{record.mutex, record.owner, "free", "-", std::nullopt};
      if (!record.owner.empty()) {
        // The same grant (owner and token) as before: held since it was first seen, also
        // through a look that found its lease run out (a renewal that waited for the database
        // landed after that look, with the same token).
        auto it = seen_.find(record.mutex);
        const bool same = it != seen_.end() && it->second.owner == record.owner.owner_id &&
                          it->second.token == record.owner.fencing_token;
        const Seen grant = same ? it->second : Seen{record.owner.owner_id, record.owner.fencing_token, now};
        seen[record.mutex] = grant;
        if (record.owner.has_owner(listing_.now)) {
          row.state = record.owner.caching() ? (record.owner.idle ? "cached+idle" : "cached") : "held";
          if (same) {
            row.held = now - grant.since;
          } else if (looked_) {
            row.held = Clock::duration::zero();  // taken since the last look
          }
        }
      }
      out.push_back(std::move(row));
    }
    seen_ = std::move(seen);
    looked_ = true;
    std::stable_sort(out.begin(), out.end(), [](const Row& a, const Row& b) {
      const auto ha = a.held.value_or(Clock::duration::min()), hb = b.held.value_or(Clock::duration::min());
      const bool oa = a.state != "free", ob = b.state != "free";
      if (oa != ob) return oa;
      return ha > hb;
    });
    for (std::size_t i = 0; i < out.size() && i < rows; ++i) {
      if (out[i].state == "free") continue;
      if (!demands_) {
        out[i].waiting = "?";
        continue;
      }
      try {
        out[i].waiting = client_.snapshot(out[i].mutex).demanded ? "yes" : "-";
      } catch (const std::exception&) {
        out[i].waiting = "?";
      }
    }
    return out;
  }

  // The view as text: a header line, the column titles, up to `rows` rows.
  std::string render(const std::vector<Row>& rows_in, std::size_t rows) const {
    std::size_t width = 5;
    for (std::size_t i = 0; i < rows_in.size() && i < rows; ++i) width = std::max(width, rows_in[i].mutex.size());
    std::size_t owned = 0;
    for (const auto& row : rows_in) owned += row.state != "free" ? 1 : 0;
    std::ostringstream out;
    out << "simba top  " << client_.describe() << "  prefix '" << prefix_ << "'  " << rows_in.size() << " mutexes, "
        << owned << " owned" << (listing_.truncated ? " (more: --limit)" : "") << "  " << iso_time(listing_.now)
        << "\n";
    out << std::left << std::setw(static_cast<int>(width)) << "MUTEX"
        << "  " << std::setw(11) << "STATE"
        << "  " << std::setw(10) << "HELD FOR"
        << "  " << std::setw(7) << "WAITING"
        << "  " << std::setw(17) << "TOKEN"
        << "  OWNER\n";
    for (std::size_t i = 0; i < rows_in.size() && i < rows; ++i) {
      const auto& row = rows_in[i];
      const bool free = row.state == "free";
      out << std::setw(static_cast<int>(width)) << row.mutex << "  " << std::setw(11) << row.state << "  "
          << std::setw(10) << (free ? "-" : held_text(row.held)) << "  " << std::setw(7) << (free ? "-" : row.waiting)
          << "  " << std::setw(17) << row.owner.fencing_token << "  " << (free ? "-" : row.owner.owner_id) << "\n";
    }
    if (rows_in.size() > rows) out << "... " << rows_in.size() - rows << " more\n";
    return out.str();
  }

 private:
  Client client_;
  const std::string prefix_;
  const std::size_t limit_;
  const bool demands_;
  MutexListing listing_;
  std::map<std::string, Seen> seen_;
  bool looked_ = false;
};

// Waits up to `interval` for a key; true if it was q (or Q).
bool quit_pressed(std::chrono::milliseconds interval) {
  pollfd in{STDIN_FILENO, POLLIN, 0};
  if (poll(&in, 1, static_cast<int>(interval.count())) <= 0) return false;
  char key = 0;
  while (read(STDIN_FILENO, &key, 1) == 1) {
    if (key == 'q' || key == 'Q') return true;
  }
  return false;
}

}  // namespace

int run_top(const BackendChoice& backend, const std::string& prefix, std::size_t limit,
            const std::string& interval_text) {
  const auto interval = parse_duration(interval_text);
  if (interval < std::chrono::milliseconds(100)) {
    throw Error(errc::invalid_argument, "--interval " + interval_text + " is shorter than 100ms");
  }
  TopView view(backend.connect(), prefix, limit);
  if (!isatty(STDOUT_FILENO)) {
    std::cout << view.render(view.look(limit), limit) << std::flush;
    return 0;
  }
  auto stop_signal = std::make_shared<std::atomic<int>>(0);
  handle_signals([stop_signal](int sig) { stop_signal->store(sig); });
  RawTerminal raw;
  for (;;) {
    const auto rows = static_cast<std::size_t>(std::max(terminal_rows() - 3, 1));
    std::string screen;
    try {
      screen = view.render(view.look(rows), rows);
    } catch (const std::system_error& e) {
      screen = std::string("simba top: ") + e.what() + "\n";  // the backend may come back: keep looking
    }
    std::cout << "\x1b[H\x1b[2J" << screen << "(q quits)" << std::flush;
    if (quit_pressed(interval) || stop_signal->load() != 0) break;
  }
  std::cout << "\n";
  return stop_signal->load() != 0 ? 128 + stop_signal->load() : 0;
}

}  // namespace simba::cli
