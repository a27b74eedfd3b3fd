// The liveness protocol of a Group: waiting for a member's phase while checking on the member.
// The member must live, not have finished its script or given up, and not be in a cycle of
// waits; else the error says which.
//
// A waiting program thread publishes what it waits for in its RankStatus (status.h): peers follow
// these "waits for" edges to find a deadlock, and a rank that raised publishes that it gave up,
// so peers waiting for it fail at once instead of at the timeout.
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "group.h"
#include "group_segment.h"
#include "wait.h"

namespace gt {

namespace {

constexpr double kYieldSeconds = 0.002;
constexpr double kSleepSeconds = 0.02;
constexpr double kLivenessPeriod = 0.2;

// Messages are built from std::string and snprintf, never iostreams: an extension built by a
// newer GCC than the libstdc++ it runs with (seen on a GPU machine) crashes in ostream's locale.
std::string seconds_text(double s) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

}  // namespace

void Node::add_group(uint64_t key, Group* group) {
  std::lock_guard<std::mutex> lock(groups_mu_);
  groups_[key] = group;
}

void Node::remove_group(uint64_t key) {
  std::lock_guard<std::mutex> lock(groups_mu_);
  groups_.erase(key);
}

int64_t Node::phase_in(uint64_t key, bool posts) const {
  std::lock_guard<std::mutex> lock(groups_mu_);
  auto it = groups_.find(key);
  if (it == groups_.end()) return -1;
  return int64_t(posts ? it->second->my_posts() : it->second->my_phase());
}

bool Node::sole_program_thread() {
  thread_local size_t me = std::hash<std::thread::id>()(std::this_thread::get_id()) | 1;
  size_t first = 0;
  if (program_thread_.compare_exchange_strong(first, me) || first == me) return true;
  status(rank_)->threads.store(2);  // peers stop following this rank's waits: one slot, two threads
  return false;
}

void Node::mark_finished(const std::string& how) {
  RankStatus* st = status(rank_);
  copy_text(st->how, sizeof(st->how), how);
  st->finished.store(1, std::memory_order_release);
}

void Node::give_up(const std::string& what) {
  RankStatus* st = status(rank_);
  if (st->threads.load() > 1) return;  // with several program threads "this rank" waits nowhere in particular
  copy_text(st->failure, sizeof(st->failure), what.substr(0, what.find('\n')));
  uint64_t failed = st->waiting_for.load() >= 0
                        ? st->epoch.load() + 1  // inside a wait: its end moves the epoch once more
                        : st->epoch.fetch_add(2, std::memory_order_acq_rel) + 2;  // even (not waiting), never 0
  st->failed_epoch.store(failed, std::memory_order_release);
}

std::vector<int> Node::known_ranks() const {
  std::vector<int> out{rank_};
  for (auto& [r, mapping] : peers_) out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

void Group::wait_for(int p, uint32_t target) {
  Slot& s = slot(p);
  wait_on(p, s.phase, s.waiters, target, Word::phase);
}

void Group::wait_on(int p, std::atomic<uint32_t>& word, std::atomic<uint32_t>& waiters, uint32_t target, Word kind) {
  bool phase = kind == Word::phase;
  auto reached = [&] { return int32_t(word.load(std::memory_order_acquire) - target) >= 0; };
  for (int i = 0; i < spin_reloads_; ++i) {
    if (reached()) return;
    cpu_relax();
  }
  if (spin_s_ > 0) {  // a rank per CPU at most: keep the CPU (a yield may give it away for ms)
    double spin_until = now_seconds() + spin_s_;
    do {
      for (int i = 0; i < 256; ++i) {
        if (reached()) return;
        cpu_relax();
      }
    } while (now_seconds() < spin_until);
  }
  double yield_until = now_seconds() + kYieldSeconds;
  while (now_seconds() < yield_until) {
    if (reached()) return;
    sched_yield();
  }
  waiters.fetch_add(1, std::memory_order_seq_cst);
  struct Leave { std::atomic<uint32_t>& w; ~Leave() { w.fetch_sub(1); } } leave{waiters};
  // The program's thread says what it waits for (peers follow such waits to find a cycle);
  // worker threads run queued all_reduces, which every rank drains before its next collective.
  RankStatus* mine = node_->status(node_->rank());
  if (on_a_worker_thread() || mine->threads.load(std::memory_order_relaxed) > 1) mine = nullptr;
  if (mine) {
    if (doing_.empty()) doing_ = " on ranks " + ranks_text(all_members());
    copy_text(mine->doing, sizeof(mine->doing), op_name_ + doing_);
    // a peer that follows this wait checks its own phase or post count against the target (check_cycle);
    // an acknowledgement has no such count: key 0, not checked
    mine->group_key.store(kind == Word::ack ? 0 : key_, std::memory_order_relaxed);
    mine->posts.store(kind == Word::post ? 1 : 0, std::memory_order_relaxed);
    mine->target.store(target, std::memory_order_relaxed);
    mine->waiting_for.store(ranks_[p], std::memory_order_relaxed);
    mine->epoch.fetch_add(1, std::memory_order_release);
  }
  struct Stop {
    RankStatus* st;
    ~Stop() {
      if (!st) return;
      st->waiting_for.store(-1, std::memory_order_relaxed);
      st->epoch.fetch_add(1, std::memory_order_release);
    }
  } stop{mine};
  while (true) {
    uint32_t v = word.load(std::memory_order_seq_cst);
    if (int32_t(v - target) >= 0) return;
    futex_wait(&word, v, kSleepSeconds);
    double t = now_seconds();
    if (t - op_start_ >= opts_.timeout_s) phase ? fail_waiting(target, true) : fail_post_wait(p, true, "");
    if (t >= next_liveness_check_) {
      next_liveness_check_ = t + kLivenessPeriod;
      if (phase) check_peers(p, target); else check_post_wait(p, word, target);
      check_posts(kind == Word::post ? p : -1, word, target);
      if (mine && opts_.deadlock_s > 0) check_cycle(p);
    }
  }
}

void Group::check_post_wait(int p, const std::atomic<uint32_t>& word, uint32_t target) {
  // p posts (or acknowledges) before it goes on: p at a later phase than this rank, or awaiting a
  // post itself in this very call, is p in another collective than this rank's, unless the word
  // read after those (p wrote it before them) shows that p did post (or acknowledge) meanwhile.
  const Slot& s = slot(p);
  uint32_t theirs = s.phase.load(std::memory_order_seq_cst);
  uint32_t awaiting = s.awaiting.load(std::memory_order_seq_cst);
  if (int32_t(word.load(std::memory_order_seq_cst) - target) >= 0) return;
  RankStatus* st = node_->status(ranks_[p]);
  if (int32_t(theirs - phase_) > 0)
    fail_post_wait(p, false, "in a later collective than this rank's (it called another one)");
  if (awaiting == (uint32_t(calls_ & 0x7fffffffu) | 0x80000000u))
    fail_post_wait(p, false, "awaiting a broadcast from another root in the same call (the ranks named different roots)");
  if (!process_alive(s.pid.load()) || (st && (st->finished.load(std::memory_order_acquire) || gave_up(st))))
    fail_post_wait(p, false, "");
}

void Group::fail_post_wait(int p, bool timed_out, const std::string& how) {
  std::string text = std::string(op_name_) + " on ranks " + ranks_text(all_members()) + ": rank " +
                     std::to_string(ranks_[me_]) + " waited " + seconds_text(now_seconds() - op_start_) +
                     " s for rank " + std::to_string(ranks_[p]);
  if (timed_out) text += " and timed out (the timeout is " + seconds_text(opts_.timeout_s) + " s, set by GLOBALTENSOR_TIMEOUT)";
  std::string state = how.empty() ? peer_state(ranks_[p], 0) : how;
  if (state.empty())
    state = process_alive(slot(p).pid.load()) ? "running, not in this collective (it may have called another one)"
                                              : "exited before the end of its script (killed, crashed, or os._exit)";
  text += ". The ranks were:\n  rank " + std::to_string(ranks_[me_]) + ": in " + op_name_ + " on ranks " +
          ranks_text(all_members()) + "\n  rank " + std::to_string(ranks_[p]) + ": " + state + "\n" + collective_hint();
  fail(text, timed_out);
}

void Group::check_peers(int p, uint32_t target) {
  (void)p;
  for (int q = 0; q < k_; ++q) {
    if (q == me_ || int32_t(slot(q).phase.load() - target) >= 0) continue;
    if (!process_alive(slot(q).pid.load())) fail_waiting(target, false);
    RankStatus* st = node_->status(ranks_[q]);
    if (st && (st->finished.load(std::memory_order_acquire) || gave_up(st))) fail_waiting(target, false);
  }
}

bool Group::gave_up(const RankStatus* st) {
  uint64_t failed = st->failed_epoch.load(std::memory_order_acquire);
  return failed != 0 && st->epoch.load(std::memory_order_acquire) == failed;
}

void Group::publish_failure(const std::string& what) {
  // Peers waiting for this rank learn it gave up (until it starts another wait): a rank that
  // catches the error and goes on must not leave them waiting for the timeout.
  if (!on_a_worker_thread()) node_->give_up(what);
}

void Group::check_cycle(int p) {
  // Follow "waits for" from the member this rank waits for; a path back here, unchanged for
  // opts_.deadlock_s, is a deadlock: every rank on it waits in a collective the next never reaches.
  std::vector<std::pair<int, uint64_t>> path{{node_->rank(), node_->status(node_->rank())->epoch.load()}};
  int r = ranks_[p];
  while (true) {  // ends: each step either returns, closes the cycle, or visits a new rank
    RankStatus* st = node_->status(r);
    if (!st) return;  // on another machine: only the timeout can tell
    uint64_t epoch = st->epoch.load(std::memory_order_acquire);
    int next = st->waiting_for.load(std::memory_order_relaxed);
    bool unknown = st->threads.load() > 1 || !process_alive(st->pid.load());  // no single story to follow
    if (next < 0 || unknown) {
      cycle_.clear();
      return;  // running (it may still come), or its wait cannot be trusted
    }
    path.emplace_back(r, epoch);
    if (next == node_->rank()) {
      // The last wait is on this rank: it is real only while this rank has not reached its target
      // there (else that rank is merely slow to notice), checked against this rank's own phase.
      int64_t reached = node_->phase_in(st->group_key.load(), st->posts.load() != 0);
      if (reached < 0 || int32_t(uint32_t(reached) - st->target.load()) >= 0) {
        cycle_.clear();
        return;
      }
      break;
    }
    for (auto& seen : path)
      if (seen.first == next) return;  // a cycle without this rank: its members report it
    r = next;
  }
  double t = now_seconds();
  if (path != cycle_) {
    cycle_ = path;
    cycle_since_ = t;
    return;
  }
  if (t - cycle_since_ < opts_.deadlock_s) return;
  std::string text = std::string(op_name_) + " on ranks " + ranks_text(all_members()) +
                     ": deadlock: these ranks wait for each other in collectives that the others do not call:";
  for (auto& [rank, epoch] : path) text += "\n  rank " + std::to_string(rank) + ": " + peer_state(rank, 0);
  std::string others;
  for (int rank : node_->known_ranks()) {
    bool on_path = false;
    for (auto& step : path) on_path = on_path || step.first == rank;
    std::string state = on_path ? "" : peer_state(rank, 0);
    if (!state.empty()) others += "\n  rank " + std::to_string(rank) + ": " + state;
  }
  if (!others.empty()) text += "\nThe other ranks on this machine:" + others;
  fail(text + "\n" + collective_hint());
}

void Group::fail(const std::string& what, bool timed_out) {
  broken_ = true;
  broken_reason_ = what;
  publish_failure(what);
  if (timed_out) throw CollectiveTimeout(what);
  throw CollectiveError(what);
}

std::string Group::peer_state(int rank, uint32_t target) const {
  (void)target;
  RankStatus* st = node_->status(rank);
  bool finished = st && st->finished.load(std::memory_order_acquire);
  if (st && gave_up(st))  // its own error says more than how its script ended
    return "gave up: " + read_text(st->failure, sizeof(st->failure)) +
           (finished ? " (then " + read_text(st->how, sizeof(st->how)) + ")" : "");
  if (finished) return read_text(st->how, sizeof(st->how));
  if (st && st->waiting_for.load() >= 0)
    return "in " + read_text(st->doing, sizeof(st->doing)) + ", waiting for rank " +
           std::to_string(st->waiting_for.load());
  return "";
}

void Group::fail_waiting(uint32_t target, bool timed_out) {
  std::vector<int> missing, gone;  // gone: exited, or finished their script
  for (int q = 0; q < k_; ++q) {
    if (q == me_ || int32_t(slot(q).phase.load() - target) >= 0) continue;
    missing.push_back(q);
    RankStatus* st = node_->status(ranks_[q]);
    if (!process_alive(slot(q).pid.load()) || (st && st->finished.load())) gone.push_back(q);
  }
  std::string elapsed = seconds_text(now_seconds() - op_start_);
  std::string text = std::string(op_name_) + " on ranks " + ranks_text(all_members());
  if (!gone.empty()) {
    text += ": rank(s) " + ranks_text(gone) + " will not come: they ended while rank " + std::to_string(ranks_[me_]) +
            " waited for them (" + elapsed + " s)";
  } else {
    text += ": timed out after " + elapsed + " s; rank(s) " + ranks_text(missing) + " did not arrive (the timeout is " +
            seconds_text(opts_.timeout_s) + " s, set by GLOBALTENSOR_TIMEOUT)";
  }
  text += ". The ranks were:\n  rank " + std::to_string(ranks_[me_]) + ": in " + op_name_ + " on ranks " +
          ranks_text(all_members());
  for (int q : missing) {
    std::string state = peer_state(ranks_[q], target);
    if (state.empty())
      state = process_alive(slot(q).pid.load()) ? "running, not in a collective"
                                                : "exited before the end of its script (killed, crashed, or os._exit)";
    text += "\n  rank " + std::to_string(ranks_[q]) + ": " + state;
  }
  text += std::string("\n") + collective_hint();
  fail(text, true);  // a CollectiveTimeout also when peers ended (as before: callers catch that class)
}

}  // namespace gt
