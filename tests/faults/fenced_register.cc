// simba-fenced-register: the storage a lock protects in the chaos test, fenced by token, and
// the checker of what it recorded. A semaphore's holders write it too: each permit slot (the
// CLI's $SIMBA_PERMIT) is fenced on its own, as a store would fence each of N workers' lanes.
//
//   simba-fenced-register section FILE [--writes N] [--interval MS] [--no-fencing]
//       A critical section: N writes (default 8), MS apart (default 25), with the token in
//       $SIMBA_FENCING_TOKEN, as holder "<pid>" of slot $SIMBA_PERMIT (0 if unset). Each
//       write, under flock(FILE.lock), is rejected if its token is below the highest accepted
//       so far on its slot (unless --no-fencing), and appended to FILE either way:
//       "<token> <holder> <index> accepted|rejected <slot>". The section stops at its first
//       rejected write (exit 3), like a client told no by its store. SIGTERM ends it after the
//       write in progress (exit 143).
//   simba-fenced-register check FILE [--min-sections N] [--writes N] [--permits N]
//       Reads FILE and prints one JSON line: writes, rejected, sections completed, the most
//       holders in the register at once (a holder is in from its first accepted write to its
//       last), and the violations, each judged per slot: accepted writes from a stale holder
//       (token below one accepted before), tokens shared by two holders, sections whose token
//       did not rise, interleavings (a holder writing again after another holder wrote), and
//       more holders at once than --permits (default 1). Exit 0 when there are none and at
//       least N sections completed (default 1), else 1.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile std::sig_atomic_t g_terminated = 0;

int usage(const std::string& why) {
  std::cerr << "simba-fenced-register: " << why
            << "\nusage: simba-fenced-register section FILE [--writes N] [--interval MS] [--no-fencing]\n"
               "       simba-fenced-register check FILE [--min-sections N] [--writes N] [--permits N]\n";
  return 64;
}

bool parse_number(const char* text, long& out) {
  char* end = nullptr;
  out = std::strtol(text, &end, 10);
  return end && *end == '\0' && end != text && out >= 0;
}

// One write under the register's lock: accepted unless fenced off.
bool write_once(const std::string& file, std::uint64_t token, long holder, long index, long slot, bool fencing) {
  const std::string lock_path = file + ".lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
    std::perror("simba-fenced-register: the register's lock");
    std::exit(70);
  }
  const std::string highest_path = file + ".highest." + std::to_string(slot);
  std::uint64_t highest = 0;
  if (FILE* in = std::fopen(highest_path.c_str(), "r")) {
    unsigned long long value = 0;
    if (std::fscanf(in, "%llu", &value) == 1) highest = value;
    std::fclose(in);
  }
  const bool accepted = !fencing || token >= highest;
  if (accepted && token > highest) {
    std::ofstream(highest_path.c_str(), std::ios::trunc) << token << "\n";
  }
  {
    std::ofstream log(file, std::ios::app);
    log << token << ' ' << holder << ' ' << index << ' ' << (accepted ? "accepted" : "rejected") << ' ' << slot << "\n";
    if (!log) {
      std::cerr << "simba-fenced-register: cannot append to " << file << "\n";
      std::exit(70);
    }
  }
  ::close(fd);
  return accepted;
}

int section(const std::string& file, long writes, long interval, bool fencing) {
  const char* text = std::getenv("SIMBA_FENCING_TOKEN");
  long token = 0;
  if (!text || !parse_number(text, token) || token == 0) return usage("$SIMBA_FENCING_TOKEN is missing or not a token");
  long slot = 0;
  if (const char* permit = std::getenv("SIMBA_PERMIT"); permit && !parse_number(permit, slot)) {
    return usage("$SIMBA_PERMIT is not a slot number: '" + std::string(permit) + "'");
  }
  std::signal(SIGTERM, [](int) { g_terminated = 1; });
  const long holder = static_cast<long>(::getpid());
  for (long i = 0; i < writes; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval));
    if (!write_once(file, static_cast<std::uint64_t>(token), holder, i, slot, fencing)) return 3;
    if (g_terminated) return 143;
  }
  return 0;
}

// What the check keeps per slot: the mutex's rules hold within each slot.
struct Slot {
  std::uint64_t highest = 0, last_section_token = 0;
  long current = -1;        // the holder of the slot's last accepted write
  std::set<long> finished;  // holders another holder of the slot wrote after
  std::map<std::uint64_t, long> token_holder;
};

int check(const std::string& file, long min_sections, long writes_per_section, long permits) {
  std::ifstream in(file);
  if (!in) {
    std::cerr << "simba-fenced-register: cannot read " << file << "\n";
    return 70;
  }
  long writes = 0, rejected = 0, stale_accepted = 0, shared_tokens = 0, not_rising = 0, interleaved = 0;
  std::uint64_t highest = 0;
  std::map<long, Slot> slots;
  std::map<long, long> accepted_by;                  // holder -> accepted writes
  std::map<long, std::pair<long, long>> in_between;  // holder -> its first and last accepted write (line)
  std::string line;
  for (long number = 0; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    unsigned long long token = 0;
    long holder = 0, index = 0, slot_number = 0;
    std::string verdict;
    if (!(fields >> token >> holder >> index >> verdict)) continue;
    fields >> slot_number;  // absent: slot 0
    ++writes;
    if (verdict != "accepted") {
      ++rejected;
      continue;
    }
    Slot& slot = slots[slot_number];
    if (token < slot.highest) ++stale_accepted;
    slot.highest = std::max<std::uint64_t>(slot.highest, token);
    highest = std::max<std::uint64_t>(highest, token);
    auto [it, inserted] = slot.token_holder.emplace(token, holder);
    if (!inserted && it->second != holder) ++shared_tokens;
    if (holder != slot.current) {
      if (slot.finished.count(holder)) ++interleaved;
      if (slot.current >= 0) slot.finished.insert(slot.current);
      if (!slot.finished.count(holder)) {  // a new section
        if (token <= slot.last_section_token && slot.last_section_token != 0) ++not_rising;
        slot.last_section_token = std::max<std::uint64_t>(slot.last_section_token, token);
      }
      slot.current = holder;
    }
    ++accepted_by[holder];
    auto [span, first] = in_between.emplace(holder, std::make_pair(number, number));
    if (!first) span->second.second = number;
  }
  // The most holders in the register at once: each is in from its first accepted write to its
  // last (a sweep over those spans' ends, an end after the start on the same line).
  std::vector<std::pair<long, int>> ends;
  for (const auto& [holder, span] : in_between) {
    ends.emplace_back(span.first, +1);
    ends.emplace_back(span.second, -1);
  }
  std::sort(ends.begin(), ends.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
  long inside = 0, most_inside = 0;
  for (const auto& [at, change] : ends) most_inside = std::max(most_inside, inside += change);
  const long over_permits = most_inside > permits ? 1 : 0;
  long completed = 0;
  for (auto& [holder, count] : accepted_by) completed += count >= writes_per_section;
  const long violations = stale_accepted + shared_tokens + not_rising + interleaved + over_permits;
  std::cout << "{\"writes\":" << writes << ",\"rejected\":" << rejected << ",\"sections\":" << accepted_by.size()
            << ",\"completed\":" << completed << ",\"stale_accepted\":" << stale_accepted
            << ",\"shared_tokens\":" << shared_tokens << ",\"tokens_not_rising\":" << not_rising
            << ",\"interleaved\":" << interleaved << ",\"permits\":" << permits
            << ",\"most_holders_at_once\":" << most_inside << ",\"slots_used\":" << slots.size()
            << ",\"highest\":" << highest << "}" << std::endl;
  return violations == 0 && completed >= min_sections ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage("expected a command and a FILE");
  const std::string command = argv[1], file = argv[2];
  long writes = 8, interval = 25, min_sections = 1, permits = 1;
  bool fencing = true;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](long& out) {
      if (i + 1 >= argc || !parse_number(argv[i + 1], out)) return false;
      ++i;
      return true;
    };
    if (arg == "--no-fencing") {
      fencing = false;
    } else if (arg == "--writes") {
      if (!number(writes) || writes == 0) return usage("--writes needs a number > 0");
    } else if (arg == "--interval") {
      if (!number(interval)) return usage("--interval needs milliseconds");
    } else if (arg == "--permits") {
      if (!number(permits) || permits == 0) return usage("--permits needs a number > 0");
    } else if (arg == "--min-sections") {
      if (!number(min_sections)) return usage("--min-sections needs a number");
    } else {
      return usage("unknown option '" + arg + "'");
    }
  }
  if (command == "section") return section(file, writes, interval, fencing);
  if (command == "check") return check(file, min_sections, writes, permits);
  return usage("unknown command '" + command + "'");
}
