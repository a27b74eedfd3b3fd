// Shared-memory collectives: publish a descriptor, meet at a phase, then move bytes directly.
//
// Every op starts with one phase at which all members have published a Desc. Each member then
// validates every Desc (so all raise alike) and picks the same algorithm from them:
//   direct  - inputs are read where they live: a peer's arena (zero copy) or the small
//             input it copied into its staging slot before the phase;
//   rounds  - large private inputs pass through double-buffered staging slots in chunks, so
//             shared memory stays bounded for any message size.
// A slot used at stage_seq s is written again only at s + 2, after a phase that every reader
// reaches only once it has finished reading s; descriptors alternate the same way.
#include "group.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "reduce.h"
#include "wait.h"

namespace gt {

namespace {

// Messages are built from std::string and snprintf, never iostreams: an extension built by a
// newer GCC than the libstdc++ it runs with (seen on a GPU machine) crashes in ostream's locale.
std::string seconds_text(double s) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

enum OpCode : uint32_t { kBarrier = 1, kBroadcast, kAllGather, kReduceScatter, kAllReduce, kAllToAll };

const char* op_name(uint32_t op) {
  switch (op) {
    case kBarrier: return "barrier";
    case kBroadcast: return "broadcast";
    case kAllGather: return "all_gather";
    case kReduceScatter: return "reduce_scatter";
    case kAllReduce: return "all_reduce";
    case kAllToAll: return "all_to_all";
    default: return "unknown";
  }
}

constexpr uint64_t kMagic = 0x67745f67726f7570ull;  // "gt_group"

uint64_t name_key(const std::string& name) {  // FNV-1a: the same on every member of the group
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h | 1;
}
constexpr size_t kHeaderBytes = 64;
constexpr int kSpinIterations = 4000;
constexpr double kYieldSeconds = 0.002;
constexpr double kSleepSeconds = 0.02;
constexpr double kLivenessPeriod = 0.2;

struct Header {
  uint64_t magic;
  std::atomic<uint32_t> joined;
};

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Up to this many ranks, a staged all_reduce has every rank sum the whole chunk (k reads of it)
// rather than its share and then copy the others' shares out (two phases per chunk).
constexpr int kWholeChunkRanks = 4;

// Balanced split of `count` elements over k parts, boundaries on multiples of `align`.
void split_range(size_t count, int k, int i, size_t align, size_t* lo, size_t* hi) {
  size_t units = (count + align - 1) / align, per = units / size_t(k), rem = units % size_t(k);
  size_t start = size_t(i) * per + std::min(size_t(i), rem);
  size_t end = start + per + (size_t(i) < rem ? 1 : 0);
  *lo = std::min(count, start * align);
  *hi = std::min(count, end * align);
}

size_t clamp_len(uint64_t total, size_t lo, size_t piece) {
  return total > lo ? std::min<size_t>(piece, total - lo) : 0;
}

}  // namespace

struct Group::Slot {
  std::atomic<uint32_t> phase;
  std::atomic<uint32_t> waiters;
  std::atomic<int32_t> pid;
  uint32_t pad[13];
  Desc desc[2];
};

Node::Node(const std::string& prefix, int rank, size_t arena_bytes)
    : prefix_(prefix), rank_(rank), arena_bytes_(arena_bytes),
      arena_(new Arena(arena_name(prefix, rank), arena_bytes)) {
  RankStatus* st = status(rank_);  // set before any peer maps the arena (joining comes later)
  st->waiting_for.store(-1);
  st->pid.store(int32_t(getpid()));
}

void Node::add_group(uint64_t key, Group* group) {
  std::lock_guard<std::mutex> lock(groups_mu_);
  groups_[key] = group;
}

void Node::remove_group(uint64_t key) {
  std::lock_guard<std::mutex> lock(groups_mu_);
  groups_.erase(key);
}

int64_t Node::phase_in(uint64_t key) const {
  std::lock_guard<std::mutex> lock(groups_mu_);
  auto it = groups_.find(key);
  return it == groups_.end() ? -1 : int64_t(it->second->my_phase());
}

bool Node::sole_program_thread() {
  thread_local size_t me = std::hash<std::thread::id>()(std::this_thread::get_id()) | 1;
  size_t first = 0;
  if (program_thread_.compare_exchange_strong(first, me) || first == me) return true;
  status(rank_)->threads.store(2);  // peers stop following this rank's waits: one slot, two threads
  return false;
}

std::string Node::arena_name(const std::string& prefix, int rank) {
  return prefix + "a" + std::to_string(rank);
}

void Node::map_peer(int rank, const std::string& path) {
  if (rank == rank_ || peers_.count(rank)) return;
  peers_.emplace(rank, path.empty() ? std::make_unique<Mapping>(arena_name(prefix_, rank), arena_->reserve(), false)
                                    : std::make_unique<Mapping>(path));
}

char* Node::base_of(int rank) const {
  if (rank == rank_) return arena_->base();
  auto it = peers_.find(rank);
  return it == peers_.end() ? nullptr : it->second->data();
}

Group::Group(std::shared_ptr<Node> node, const std::string& name, std::vector<int> ranks, int index,
             GroupOptions options)
    : node_(std::move(node)), key_(name_key(name)), ranks_(std::move(ranks)), me_(index), k_(int(ranks_.size())),
      opts_(options) {
  if (k_ <= 0 || me_ < 0 || me_ >= k_) throw std::invalid_argument("group index out of range");
  opts_.stage_bytes = std::max<size_t>(round_up(opts_.stage_bytes, 64), size_t(64) * size_t(k_));
  opts_.oneshot_bytes = std::min(opts_.oneshot_bytes, opts_.stage_bytes);
  slot_stride_ = round_up(sizeof(Slot), 64);
  counts_offset_ = kHeaderBytes + slot_stride_ * size_t(k_);
  stage_offset_ = round_up(counts_offset_ + 2 * size_t(k_) * 2 * size_t(k_) * sizeof(uint64_t), 4096);
  size_t total = stage_offset_ + size_t(k_) * 2 * 2 * opts_.stage_bytes;
  for (int r : ranks_) {
    node_->map_peer(r);
    bases_.push_back(node_->base_of(r));
  }
  segment_ = std::make_unique<Mapping>(name, total, true);
  auto* header = reinterpret_cast<Header*>(segment_->data());
  slot(me_).pid.store(int32_t(getpid()), std::memory_order_release);
  header->magic = kMagic;
  if (header->joined.fetch_add(1) + 1 == uint32_t(k_)) segment_->unlink();  // last one in
  node_->add_group(key_, this);
}

Group::~Group() { node_->remove_group(key_); }

uint32_t Group::my_phase() const { return slot(me_).phase.load(std::memory_order_acquire); }

std::shared_ptr<Work> Group::all_reduce_async(const void* in, void* out, size_t count, int32_t dtype,
                                              int32_t redop) {
  if (!worker_) worker_ = std::make_unique<Worker>();
  return worker_->submit([=] { all_reduce(in, out, count, dtype, redop); });
}

void Group::drain() {
  if (worker_) worker_->drain();
}

Group::Slot& Group::slot(int p) const {
  return *reinterpret_cast<Slot*>(segment_->data() + kHeaderBytes + slot_stride_ * size_t(p));
}

Desc& Group::desc(int p) const { return slot(p).desc[op_seq_ & 1]; }

uint64_t* Group::counts(int p, int which, uint64_t seq) const {
  size_t row = (((seq & 1) * size_t(k_) + size_t(p)) * 2 + size_t(which)) * size_t(k_);
  return reinterpret_cast<uint64_t*>(segment_->data() + counts_offset_) + row;
}

char* Group::stage(int p, uint64_t slot_seq) const {
  size_t index = size_t(p) * 2 + size_t(slot_seq & 1);
  return segment_->data() + stage_offset_ + index * 2 * opts_.stage_bytes;
}

const char* Group::source(int p, uint64_t pre_slot) const {
  const Desc& d = desc(p);
  return d.staged ? stage(p, pre_slot) : bases_[p] + d.in_off;
}

int64_t Group::own_offset(const void* ptr, size_t nbytes) const {
  return node_->arena().offset_of(ptr, nbytes);
}

std::vector<int> Group::all_members() const {
  std::vector<int> v(k_);
  for (int i = 0; i < k_; ++i) v[i] = i;
  return v;
}

std::string Group::ranks_text(const std::vector<int>& members) const {
  std::string text = "[";
  for (size_t i = 0; i < members.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks_[members[i]]);
  return text + "]";
}

std::string Group::describe(int p) const {
  const Desc& d = desc(p);
  std::string text = std::string(op_name(d.op)) + "(";
  if (d.op == kAllReduce || d.op == kReduceScatter)
    text += std::string(redop_name(d.redop)) + ", " + dtype_name(d.dtype) + ", ";
  text += std::to_string(d.in_bytes) + " bytes in, " + std::to_string(d.out_bytes) + " bytes out";
  if (d.op == kBroadcast) text += ", root rank " + std::to_string(ranks_[d.root]);
  return text + ")";
}

void Group::check_all(bool ok, const std::string& what) {
  if (ok) return;
  std::string text = std::string(op_name_) + " on ranks " + ranks_text(all_members()) + ": " + what + "; the ranks called:";
  for (int p = 0; p < k_; ++p) text += "\n  rank " + std::to_string(ranks_[p]) + ": " + describe(p);
  throw CollectiveError(text + "\n" + collective_hint());
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
  auto reached = [&] { return int32_t(s.phase.load(std::memory_order_acquire) - target) >= 0; };
  for (int i = 0; i < kSpinIterations; ++i) {
    if (reached()) return;
    cpu_relax();
  }
  double yield_until = now_seconds() + kYieldSeconds;
  while (now_seconds() < yield_until) {
    if (reached()) return;
    sched_yield();
  }
  s.waiters.fetch_add(1, std::memory_order_seq_cst);
  struct Leave { std::atomic<uint32_t>& w; ~Leave() { w.fetch_sub(1); } } leave{s.waiters};
  // The program's thread says what it waits for (peers follow such waits to find a cycle);
  // worker threads run queued all_reduces, which every rank drains before its next collective.
  RankStatus* mine = node_->status(node_->rank());
  if (on_a_worker_thread() || mine->threads.load(std::memory_order_relaxed) > 1) mine = nullptr;
  if (mine) {
    if (doing_.empty()) doing_ = " on ranks " + ranks_text(all_members());
    copy_text(mine->doing, sizeof(mine->doing), op_name_ + doing_);
    mine->group_key.store(key_, std::memory_order_relaxed);
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
    uint32_t v = s.phase.load(std::memory_order_seq_cst);
    if (int32_t(v - target) >= 0) return;
    futex_wait(&s.phase, v, kSleepSeconds);
    double t = now_seconds();
    if (t - op_start_ >= opts_.timeout_s) fail_waiting(target, true);
    if (t >= next_liveness_check_) {
      next_liveness_check_ = t + kLivenessPeriod;
      check_peers(p, target);
      if (mine && opts_.deadlock_s > 0) check_cycle(p);
    }
  }
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
      int64_t reached = node_->phase_in(st->group_key.load());
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

void Group::fail(const std::string& what) {
  broken_ = true;
  broken_reason_ = what;
  publish_failure(what);
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
  broken_ = true;
  broken_reason_ = text;
  publish_failure(text);
  throw CollectiveTimeout(text);
}

void Group::sync() {
  ++phase_;
  Slot& mine = slot(me_);
  mine.phase.store(phase_, std::memory_order_seq_cst);
  if (mine.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&mine.phase);
  for (int p = 0; p < k_; ++p)
    if (p != me_) wait_for(p, phase_);
}

void Group::begin(uint32_t op, Desc d, const void* prestage, size_t prestage_bytes) {
  drain();  // queued asynchronous ops come first, on every rank
  if (broken_)
    throw CollectiveError(std::string("this group can no longer be used after an earlier failure: ") + broken_reason_);
  if (!on_a_worker_thread()) {
    node_->sole_program_thread();  // a second thread making collectives turns cycle detection off
    RankStatus* mine = node_->status(node_->rank());  // a new collective: no longer "gave up"
    if (mine->failed_epoch.load(std::memory_order_relaxed) != 0) mine->failed_epoch.store(0, std::memory_order_release);
  }
  ++op_seq_;  // descriptors of op n live at parity n; readers of n - 2 are done
  op_name_ = op_name(op);
  op_start_ = now_seconds();
  next_liveness_check_ = op_start_;
  pre_slot_ = stage_seq_++;
  d.op = op;
  d.staged = 0;
  if (prestage) {
    copy_bytes(stage(me_, pre_slot_), prestage, prestage_bytes, false);
    d.staged = 1;
  }
  desc(me_) = d;
  sync();
  for (int p = 0; p < k_; ++p)
    check_all(desc(p).op == op, "the ranks called different collectives");
}

bool Group::all_direct() const {
  for (int p = 0; p < k_; ++p)
    if (!desc(p).staged && desc(p).in_off < 0 && desc(p).in_bytes > 0) return false;
  return true;
}

bool Group::any_arena_source() const {
  for (int p = 0; p < k_; ++p)
    if (!desc(p).staged && desc(p).in_off >= 0 && desc(p).in_bytes > 0) return true;
  return false;
}

void Group::barrier() { begin(kBarrier, Desc{}, nullptr, 0); }

void Group::broadcast(void* buf, size_t nbytes, int root) {
  if (root < 0 || root >= k_) throw std::invalid_argument("broadcast root is not a member of the group");
  Desc d{};
  d.root = root;
  d.in_bytes = me_ == root ? nbytes : 0;  // only the root contributes; the others only receive
  d.out_bytes = nbytes;
  d.in_off = me_ == root ? own_offset(buf, nbytes) : -1;
  bool pre = me_ == root && d.in_off < 0 && nbytes <= opts_.stage_bytes;
  begin(kBroadcast, d, pre ? buf : nullptr, nbytes);
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).root == root, "the ranks named different roots");
    check_all(desc(p).out_bytes == nbytes, "the ranks passed buffers of different sizes");
  }
  char* out = static_cast<char*>(buf);
  bool nt = nbytes >= opts_.nontemporal_bytes;
  if (all_direct()) {
    if (me_ != root) copy_bytes(out, source(root, pre_slot_), nbytes, nt);
    if (any_arena_source()) sync();
    return;
  }
  for (size_t lo = 0; lo < nbytes; lo += opts_.stage_bytes) {
    uint64_t s = stage_seq_++;
    size_t len = std::min(opts_.stage_bytes, nbytes - lo);
    if (me_ == root) copy_bytes(stage(me_, s), out + lo, len, false);
    sync();
    if (me_ != root) copy_bytes(out + lo, stage(root, s), len, nt);
  }
}

void Group::all_gather(const void* in, size_t in_bytes, void* out, size_t out_bytes) {
  Desc d{};
  d.in_bytes = in_bytes;
  d.out_bytes = out_bytes;
  d.in_off = own_offset(in, in_bytes);
  bool pre = d.in_off < 0 && in_bytes <= opts_.stage_bytes;
  begin(kAllGather, d, pre ? in : nullptr, in_bytes);
  std::vector<size_t> displ(k_ + 1, 0);
  for (int p = 0; p < k_; ++p) displ[p + 1] = displ[p] + desc(p).in_bytes;
  for (int p = 0; p < k_; ++p)
    check_all(desc(p).out_bytes == displ[k_], "each output must hold the sum of all inputs");
  char* o = static_cast<char*>(out);
  bool nt = out_bytes >= opts_.nontemporal_bytes;
  if (all_direct()) {
    for (int p = 0; p < k_; ++p) {
      const char* src = p == me_ ? static_cast<const char*>(in) : source(p, pre_slot_);
      copy_bytes(o + displ[p], src, desc(p).in_bytes, nt);
    }
    if (any_arena_source()) sync();
    return;
  }
  uint64_t longest = 0;
  for (int p = 0; p < k_; ++p) longest = std::max(longest, desc(p).in_bytes);
  size_t piece = opts_.stage_bytes;
  for (size_t lo = 0; lo < longest; lo += piece) {
    uint64_t s = stage_seq_++;
    copy_bytes(stage(me_, s), static_cast<const char*>(in) + lo, clamp_len(in_bytes, lo, piece), false);
    sync();
    for (int p = 0; p < k_; ++p)
      copy_bytes(o + displ[p] + lo, stage(p, s), clamp_len(desc(p).in_bytes, lo, piece), nt);
  }
}

void Group::reduce_scatter(const void* in, size_t in_count, void* out, size_t out_count, int32_t dtype,
                           int32_t redop) {
  size_t esz = dtype_size(dtype);
  Desc d{};
  d.dtype = dtype;
  d.redop = redop;
  d.in_bytes = in_count * esz;
  d.out_bytes = out_count * esz;
  d.in_off = own_offset(in, d.in_bytes);
  bool pre = d.in_off < 0 && d.in_bytes <= opts_.stage_bytes;
  begin(kReduceScatter, d, pre ? in : nullptr, d.in_bytes);
  std::vector<size_t> displ(k_ + 1, 0);
  for (int p = 0; p < k_; ++p) displ[p + 1] = displ[p] + desc(p).out_bytes;
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).dtype == dtype && desc(p).redop == redop, "the ranks passed different dtypes or ops");
    check_all(desc(p).in_bytes == displ[k_], "each input must hold the sum of all outputs");
  }
  std::vector<const void*> srcs(k_);
  bool nt = d.out_bytes >= opts_.nontemporal_bytes;
  if (all_direct()) {
    for (int p = 0; p < k_; ++p)
      srcs[p] = (p == me_ ? static_cast<const char*>(in) : source(p, pre_slot_)) + displ[me_];
    reduce_to(&out, 1, srcs.data(), k_, out_count, dtype, redop, nt);
    if (any_arena_source()) sync();
    return;
  }
  uint64_t longest = 0;
  for (int p = 0; p < k_; ++p) longest = std::max(longest, desc(p).out_bytes);
  size_t piece = opts_.stage_bytes / size_t(k_) / 64 * 64;
  for (size_t lo = 0; lo < longest; lo += piece) {
    uint64_t s = stage_seq_++;
    for (int q = 0; q < k_; ++q)
      copy_bytes(stage(me_, s) + size_t(q) * piece, static_cast<const char*>(in) + displ[q] + lo,
                 clamp_len(desc(q).out_bytes, lo, piece), false);
    sync();
    size_t len = clamp_len(d.out_bytes, lo, piece);
    for (int p = 0; p < k_; ++p) srcs[p] = stage(p, s) + size_t(me_) * piece;
    void* dst = static_cast<char*>(out) + lo;
    reduce_to(&dst, 1, srcs.data(), k_, len / esz, dtype, redop, nt);
  }
}

void Group::all_reduce(const void* in, void* out, size_t count, int32_t dtype, int32_t redop) {
  size_t esz = dtype_size(dtype), nbytes = count * esz;
  if (k_ == 1) {  // nothing to combine with
    copy_bytes(out, in, nbytes, false);
    return;
  }
  Desc d{};
  d.dtype = dtype;
  d.redop = redop;
  d.in_bytes = d.out_bytes = nbytes;
  d.in_off = own_offset(in, nbytes);
  d.out_off = own_offset(out, nbytes);
  bool mine_zero_copy = d.in_off >= 0 && d.out_off >= 0;
  bool small = nbytes <= opts_.oneshot_bytes;  // one-shot reads staging only, so in == out is safe
  begin(kAllReduce, d, small && !mine_zero_copy ? in : nullptr, nbytes);
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).dtype == dtype && desc(p).redop == redop, "the ranks passed different dtypes or ops");
    check_all(desc(p).in_bytes == nbytes, "the ranks passed buffers of different sizes");
  }
  std::vector<const void*> srcs(k_);
  std::vector<void*> dsts(k_);
  bool zero_copy = true, all_staged = true;
  for (int p = 0; p < k_; ++p) {
    zero_copy = zero_copy && desc(p).in_off >= 0 && desc(p).out_off >= 0;
    all_staged = all_staged && desc(p).staged;
  }
  if (zero_copy && nbytes > 0) {  // each rank reduces its range from every input into every output
    size_t lo, hi;
    split_range(count, k_, me_, 4096 / esz, &lo, &hi);
    for (int p = 0; p < k_; ++p) {
      srcs[p] = bases_[p] + desc(p).in_off + lo * esz;
      dsts[p] = bases_[p] + desc(p).out_off + lo * esz;
    }
    // streaming stores only out of place: in place, the buffer just read is the one written
    bool nt = nbytes >= opts_.nontemporal_bytes && d.in_off != d.out_off;
    reduce_to(dsts.data(), k_, srcs.data(), k_, hi - lo, dtype, redop, nt);
    sync();
    return;
  }
  if (small) {
    if (!all_staged) {  // a rank in shared memory met ranks that are not: it stages late
      if (!desc(me_).staged) copy_bytes(stage(me_, pre_slot_), in, nbytes, false);
      sync();
    }
    for (int p = 0; p < k_; ++p) srcs[p] = stage(p, pre_slot_);
    reduce_to(&out, 1, srcs.data(), k_, count, dtype, redop, false);
    return;
  }
  size_t chunk = opts_.stage_bytes / esz;
  bool nt = nbytes >= opts_.nontemporal_bytes && in != out;  // in place: the copy-out is read next
  if (k_ <= kWholeChunkRanks) {
    // Few ranks: each sums every member's staged chunk straight into its output. One phase per
    // chunk and no copy-out pass; the reads of chunk c end before this rank reaches the phase
    // of c + 1, after which slot c's parity is written again (at c + 2).
    for (size_t c0 = 0; c0 < count; c0 += chunk) {
      uint64_t s = stage_seq_++;
      size_t n = std::min(chunk, count - c0);
      copy_bytes(stage(me_, s), static_cast<const char*>(in) + c0 * esz, n * esz, false);
      sync();
      for (int p = 0; p < k_; ++p) srcs[p] = stage(p, s);
      void* dst = static_cast<char*>(out) + c0 * esz;
      reduce_to(&dst, 1, srcs.data(), k_, n, dtype, redop, nt);
    }
    return;
  }
  for (size_t c0 = 0; c0 < count; c0 += chunk) {
    uint64_t s = stage_seq_++;
    size_t n = std::min(chunk, count - c0);
    copy_bytes(stage(me_, s), static_cast<const char*>(in) + c0 * esz, n * esz, false);
    sync();
    size_t lo, hi;
    split_range(n, k_, me_, 64 / esz, &lo, &hi);
    for (int p = 0; p < k_; ++p) srcs[p] = stage(p, s) + lo * esz;
    void* dst = stage(me_, s) + opts_.stage_bytes + lo * esz;
    reduce_to(&dst, 1, srcs.data(), k_, hi - lo, dtype, redop, false);
    sync();
    for (int p = 0; p < k_; ++p) {
      split_range(n, k_, p, 64 / esz, &lo, &hi);
      copy_bytes(static_cast<char*>(out) + (c0 + lo) * esz, stage(p, s) + opts_.stage_bytes + lo * esz,
                 (hi - lo) * esz, nt);
    }
  }
}

void Group::all_to_all(const void* in, const uint64_t* send_bytes, void* out, const uint64_t* recv_bytes) {
  // The count rows alternate like descriptors: write them at the parity begin() moves to.
  // Queued asynchronous ops run first (begin() would drain them too, but each one moves the
  // parity, and the worker must not touch op_seq_ while this thread reads it).
  drain();
  std::memcpy(counts(me_, 0, op_seq_ + 1), send_bytes, sizeof(uint64_t) * size_t(k_));
  std::memcpy(counts(me_, 1, op_seq_ + 1), recv_bytes, sizeof(uint64_t) * size_t(k_));
  Desc d{};
  for (int q = 0; q < k_; ++q) {
    d.in_bytes += send_bytes[q];
    d.out_bytes += recv_bytes[q];
  }
  d.in_off = own_offset(in, d.in_bytes);
  bool pre = d.in_off < 0 && d.in_bytes <= opts_.stage_bytes;
  begin(kAllToAll, d, pre ? in : nullptr, d.in_bytes);
  for (int p = 0; p < k_; ++p)
    for (int q = 0; q < k_; ++q)
      check_all(counts(p, 0, op_seq_)[q] == counts(q, 1, op_seq_)[p], "what one rank sends does not match what its peer expects");
  std::vector<size_t> rdispl(k_ + 1, 0);
  for (int p = 0; p < k_; ++p) rdispl[p + 1] = rdispl[p] + recv_bytes[p];
  auto send_displ = [&](int p, int q) {
    size_t s = 0;
    for (int j = 0; j < q; ++j) s += counts(p, 0, op_seq_)[j];
    return s;
  };
  char* o = static_cast<char*>(out);
  bool nt = d.out_bytes >= opts_.nontemporal_bytes;
  if (all_direct()) {
    for (int p = 0; p < k_; ++p) {
      const char* src = p == me_ ? static_cast<const char*>(in) : source(p, pre_slot_);
      copy_bytes(o + rdispl[p], src + send_displ(p, me_), recv_bytes[p], nt);
    }
    if (any_arena_source()) sync();
    return;
  }
  uint64_t longest = 0;
  for (int p = 0; p < k_; ++p)
    for (int q = 0; q < k_; ++q) longest = std::max(longest, counts(p, 0, op_seq_)[q]);
  size_t piece = opts_.stage_bytes / size_t(k_) / 64 * 64;
  for (size_t lo = 0; lo < longest; lo += piece) {
    uint64_t s = stage_seq_++;
    for (int q = 0; q < k_; ++q)
      copy_bytes(stage(me_, s) + size_t(q) * piece, static_cast<const char*>(in) + send_displ(me_, q) + lo,
                 clamp_len(send_bytes[q], lo, piece), false);
    sync();
    for (int p = 0; p < k_; ++p)
      copy_bytes(o + rdispl[p] + lo, stage(p, s) + size_t(me_) * piece, clamp_len(recv_bytes[p], lo, piece), nt);
  }
}

}  // namespace gt
