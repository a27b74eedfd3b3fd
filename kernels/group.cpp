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
// all_reduce's algorithms are in allreduce.cpp, waiting and failing (liveness) in liveness.cpp.
// Messages are built from std::string and snprintf, never iostreams: an extension built by a
// newer GCC than the libstdc++ it runs with (seen on a GPU machine) crashes in ostream's locale.
#include "group.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "group_segment.h"
#include "reduce.h"
#include "wait.h"

namespace gt {

namespace {

const char kProbeByte = 1;  // what peers read to learn they may attach to this process (cma.cpp)

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

struct Header {
  uint64_t magic;
  std::atomic<uint32_t> joined;
};

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t clamp_len(uint64_t total, size_t lo, size_t piece) {
  return total > lo ? std::min<size_t>(piece, total - lo) : 0;
}

}  // namespace

Node::Node(const std::string& prefix, int rank, size_t arena_bytes)
    : prefix_(prefix), rank_(rank), arena_bytes_(arena_bytes),
      arena_(new Arena(arena_name(prefix, rank), arena_bytes)) {
  RankStatus* st = status(rank_);  // set before any peer maps the arena (joining comes later)
  st->waiting_for.store(-1);
  st->pid.store(int32_t(getpid()));
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
  cpu_set_t cpus;
  bool affinity = sched_getaffinity(0, sizeof(cpus), &cpus) == 0;
  bool a_cpu_each = affinity && k_ <= CPU_COUNT(&cpus);
  spin_s_ = a_cpu_each ? opts_.spin_s : 0;
  // More members than CPUs: a late peer is waiting for a CPU, so yield almost at once (as Open
  // MPI does when oversubscribed) instead of spinning through a few microseconds first.
  spin_reloads_ = a_cpu_each ? 4000 : 64;
  if (const char* us = std::getenv("GLOBALTENSOR_SPIN_US")) spin_s_ = std::max(0.0, std::atof(us)) * 1e-6;
  if (const char* n = std::getenv("GLOBALTENSOR_SPIN_RELOADS")) spin_reloads_ = std::max(0, std::atoi(n));
  // Read alike on every rank (a launcher passes one environment): staging is decided per rank,
  // and the algorithm from the published descriptors, so differing values stay correct.
  if (const char* b = std::getenv("GLOBALTENSOR_STAGE_ARENA_BYTES")) opts_.stage_arena_bytes = size_t(std::atoll(b));
  if (const char* b = std::getenv("GLOBALTENSOR_CMA_BYTES")) opts_.cma_bytes = size_t(std::atoll(b));
  if (const char* b = std::getenv("GLOBALTENSOR_PUSH_BYTES")) opts_.push_bytes = size_t(std::atoll(b));
  slot_stride_ = round_up(sizeof(Slot), 64);
  counts_offset_ = kHeaderBytes + slot_stride_ * size_t(k_);
  stage_offset_ = round_up(counts_offset_ + 2 * size_t(k_) * 2 * size_t(k_) * sizeof(uint64_t), 4096);
  post_offset_ = stage_offset_ + size_t(k_) * 2 * 2 * opts_.stage_bytes;
  size_t total = post_offset_ + posts_bytes(k_);
  posts_.assign(size_t(k_), 0);
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

std::string Group::describe(int p) const { return describe_call(desc(p), ranks_); }

std::string describe_call(const Desc& d, const std::vector<int>& ranks) {
  std::string text = std::string(op_name(d.op)) + "(";
  if (d.op == kAllReduce || d.op == kReduceScatter)
    text += std::string(redop_name(d.redop)) + ", " + dtype_name(d.dtype) + ", ";
  text += std::to_string(d.in_bytes) + " bytes in, " + std::to_string(d.out_bytes) + " bytes out";
  if (d.op == kBroadcast && d.root >= 0 && size_t(d.root) < ranks.size())
    text += ", root rank " + std::to_string(ranks[d.root]);
  return text + ")";
}

std::string Group::calls_text(const char* what) const {
  std::string text = std::string(op_name_) + " on ranks " + ranks_text(all_members()) + ": " + what + "; the ranks called:";
  for (int p = 0; p < k_; ++p) text += "\n  rank " + std::to_string(ranks_[p]) + ": " + describe(p);
  return text + "\n" + collective_hint();
}

void Group::check_all(bool ok, const char* what) {
  if (!ok) throw CollectiveError(calls_text(what));
}

void Group::fail_all(const char* what) { fail(calls_text(what)); }

void Group::sync() {
  ++phase_;
  Slot& mine = slot(me_);
  mine.phase.store(phase_, std::memory_order_seq_cst);
  if (mine.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&mine.phase);
  for (int p = 0; p < k_; ++p)
    if (p != me_) wait_for(p, phase_);
}

void Group::start(uint32_t op) {
  drain();  // queued asynchronous ops come first, on every rank
  if (broken_)
    throw CollectiveError(std::string("this group can no longer be used after an earlier failure: ") + broken_reason_);
  if (!on_a_worker_thread()) {
    node_->sole_program_thread();  // a second thread making collectives turns cycle detection off
    RankStatus* mine = node_->status(node_->rank());  // a new collective: no longer "gave up"
    if (mine->failed_epoch.load(std::memory_order_relaxed) != 0) mine->failed_epoch.store(0, std::memory_order_release);
  }
  ++calls_;
  op_name_ = op_name(op);
  op_start_ = now_seconds();
  next_liveness_check_ = op_start_;
}

void Group::begin(uint32_t op, Desc d, const void* prestage, size_t prestage_bytes) {
  start(op);
  ++op_seq_;  // descriptors of op n live at parity n; readers of n - 2 are done
  pre_slot_ = stage_seq_++;
  d.op = op;
  d.call = calls_;
  d.posts = posts_digest_;
  d.probe_addr = reinterpret_cast<uintptr_t>(&kProbeByte);
  d.staged = 0;
  if (prestage) {
    copy_bytes(stage(me_, pre_slot_), prestage, prestage_bytes, false);
    d.staged = 1;
  }
  desc(me_) = d;
  sync();
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).op == op, "the ranks called different collectives");
    if (desc(p).call != d.call || desc(p).posts != d.posts)  // out of step for good: the group is broken
      fail_all(desc(p).call != d.call ? "the ranks called different collectives (some rank skipped one before)"
                                      : "the ranks called different small broadcasts before (other roots, or some "
                                        "rank skipped one)");
  }
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

void Group::all_gather(const void* in, size_t in_bytes, void* out, size_t out_bytes) {
  Desc d{};
  d.in_bytes = in_bytes;
  d.out_bytes = out_bytes;
  d.in_off = own_offset(in, in_bytes);
  d.out_off = shared_output(out, out_bytes, in, in_bytes);
  bool pre = prestaged(d.in_off, in_bytes) && !push_wanted(d);
  begin(kAllGather, d, pre ? in : nullptr, in_bytes);
  Scratch<size_t> displ(size_t(k_) + 1);
  for (int p = 0; p < k_; ++p) displ[p + 1] = displ[p] + desc(p).in_bytes;
  for (int p = 0; p < k_; ++p)
    check_all(desc(p).out_bytes == displ[k_], "each output must hold the sum of all inputs");
  char* o = static_cast<char*>(out);
  bool nt = out_bytes >= opts_.nontemporal_bytes;
  if (all_direct()) {  // no attach for private inputs: 0.54x-0.97x staging from 256 KiB to 16 MiB (RESULTS.md s11)
    for (int p = 0; p < k_; ++p) {
      const char* src = p == me_ ? static_cast<const char*>(in) : source(p, pre_slot_);
      copy_bytes(o + displ[p], src, desc(p).in_bytes, nt);
    }
    if (any_arena_source()) sync();
    return;
  }
  if (all_outputs_shared()) return all_gather_push(in, in_bytes, out, displ.data(), nt);
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
  bool pre = prestaged(d.in_off, d.in_bytes);
  begin(kReduceScatter, d, pre ? in : nullptr, d.in_bytes);
  Scratch<size_t> displ(size_t(k_) + 1);
  for (int p = 0; p < k_; ++p) displ[p + 1] = displ[p] + desc(p).out_bytes;
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).dtype == dtype && desc(p).redop == redop, "the ranks passed different dtypes or ops");
    check_all(desc(p).in_bytes == displ[k_], "each input must hold the sum of all outputs");
  }
  Scratch<const void*> srcs(k_);
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
  d.in_addr = reinterpret_cast<uintptr_t>(in);
  d.out_off = shared_output(out, d.out_bytes, in, d.in_bytes);
  bool pre = prestaged(d.in_off, d.in_bytes, true) && !push_wanted(d);
  begin(kAllToAll, d, pre ? in : nullptr, d.in_bytes);
  for (int p = 0; p < k_; ++p)
    for (int q = 0; q < k_; ++q)
      check_all(counts(p, 0, op_seq_)[q] == counts(q, 1, op_seq_)[p], "what one rank sends does not match what its peer expects");
  Scratch<size_t> rdispl(size_t(k_) + 1);
  for (int p = 0; p < k_; ++p) rdispl[p + 1] = rdispl[p] + recv_bytes[p];
  auto send_displ = [&](int p, int q) { return prefix_bytes(counts(p, 0, op_seq_), q); };
  char* o = static_cast<char*>(out);
  bool nt = d.out_bytes >= opts_.nontemporal_bytes;
  bool direct = all_direct();  // else some private input is left in place: pushed or attached where every member can
  if (!direct && all_outputs_shared()) return all_to_all_push(in, send_bytes, out, nt);
  if (direct || attach_inputs()) {
    for (int p = 0; p < k_; ++p)
      if (p == me_) copy_bytes(o + rdispl[p], static_cast<const char*>(in) + send_displ(p, me_), recv_bytes[p], nt);
      else read_input(p, send_displ(p, me_), o + rdispl[p], recv_bytes[p], nt);
    if (!direct || any_arena_source()) sync();
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
