// Collectives of private buffers by cross-memory attach (process_vm_readv / process_vm_writev).
//
// Arrays numpy did not allocate in the arena (a bytearray's, a memmap, one made before the job)
// used to pass through the staging slots: a copy in, a phase per 1 MiB chunk, a copy or reduction
// out. all_reduce: member i reads range i of every peer's input straight from the peer's memory into
// a small cache-resident buffer, reduces it with its own range in rank order (the same bits as the
// other algorithms), and writes the result into its own output and every peer's: one phase to
// start, one to end, each byte crossing between processes once (Open MPI's sm BTL does the same
// with its CMA single copy). Only the owner of range i reads or writes range i of any buffer, so in
// place is safe. all_to_all (read_input): each member reads what it receives from a private input
// straight into its output, one copy, then a phase so that no owner returns while a peer still
// reads. Not all_gather nor broadcast: attaching costs about 0.2 us a 4 KiB page here (8 GB/s against
// a copy's 20), and their staged paths overlap the owner's copy with the readers' (0.30x-0.97x from
// 1 to 16 MiB, RESULTS.md "Issue 34 (s11)"). Whether every member may attach is probed once per group:
// each member reads one byte of every peer's memory (a static byte whose address every Desc
// carries) and publishes the answer; the next phase makes the decision the same on every rank
// (GLOBALTENSOR_CMA=0 turns it off).
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "group.h"
#include "group_segment.h"
#include "reduce.h"

namespace gt {

namespace {

constexpr size_t kChunkBytes = size_t(256) << 10;  // per peer: the peers' chunks stay in L2
// all_reduce: timed trials of each algorithm per size class before the choice, after one untimed each (a
// group's first large call maps and faults in pages: 100 ms against 4 at 16 MiB). Attaching won on a Xeon
// (16 MiB 1.28x-1.38x Open MPI against 0.97x staged) and lost on a Zen 3 (0.81x-0.91x staged's speed).
constexpr uint32_t kTrials = 3;

bool cma_allowed_by_env() {
  const char* v = std::getenv("GLOBALTENSOR_CMA");
  if (!v) return true;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "no" || s == "off");
}

// Move n bytes between `local` here and `remote` in process `pid`; false (errno set) on failure.
bool cma_move(int pid, bool write, char* local, uint64_t remote, size_t n) {
  while (n > 0) {
    iovec l{local, n}, r{reinterpret_cast<void*>(uintptr_t(remote)), n};
    ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    local += got;
    remote += uint64_t(got);
    n -= size_t(got);
  }
  return true;
}

}  // namespace

bool Group::cma_agreed() {
  if (cma_state_ >= 0) return cma_state_ == 1;
  uint32_t ok = cma_allowed_by_env() ? 1 : 0;
  char probe = 0;
  for (int p = 0; p < k_ && ok; ++p)
    if (p != me_) ok = cma_move(slot(p).pid.load(std::memory_order_acquire), false, &probe, desc(p).probe_addr, 1) ? 1 : 0;
  desc(me_).cma = ok;
  sync();  // every answer is published: all members decide alike
  bool all = true;
  for (int p = 0; p < k_; ++p) all = all && desc(p).cma == 1;
  cma_state_ = all ? 1 : 0;
  return all;
}

void Group::all_reduce_cma(const void* in, void* out, size_t count, int32_t dtype, int32_t redop) {
  size_t esz = dtype_size(dtype), lo, hi;
  split_range(count, k_, me_, 4096 / esz, &lo, &hi);
  size_t chunk = kChunkBytes / esz;
  if (cma_tmp_.size() < size_t(k_ - 1) * kChunkBytes) cma_tmp_.resize(size_t(k_ - 1) * kChunkBytes);
  std::vector<const void*> srcs(k_);
  std::vector<int> pids(k_);
  for (int p = 0; p < k_; ++p) pids[p] = slot(p).pid.load(std::memory_order_acquire);
  const char* mine_in = static_cast<const char*>(in);
  char* mine_out = static_cast<char*>(out);
  for (size_t c0 = lo; c0 < hi; c0 += chunk) {
    size_t n = std::min(chunk, hi - c0), off = c0 * esz;
    char* tmp = cma_tmp_.data();
    for (int p = 0; p < k_; ++p) {
      if (p == me_) {
        srcs[p] = mine_in + off;
        continue;
      }
      if (!cma_move(pids[p], false, tmp, desc(p).in_addr + off, n * esz))
        fail(std::string("all_reduce: reading rank ") + std::to_string(ranks_[p]) + "'s input by cross-memory attach failed: " +
             std::strerror(errno));
      srcs[p] = tmp;
      tmp += kChunkBytes;
    }
    void* dst = mine_out + off;
    reduce_to(&dst, 1, srcs.data(), k_, n, dtype, redop, false);
    for (int p = 0; p < k_; ++p)
      if (p != me_ && !cma_move(pids[p], true, mine_out + off, desc(p).out_addr + off, n * esz))
        fail(std::string("all_reduce: writing rank ") + std::to_string(ranks_[p]) + "'s output by cross-memory attach failed: " +
             std::strerror(errno));
  }
  sync();  // no member returns (and reuses its buffers) while a peer still reads or writes them
}

bool Group::attach_all_reduce(int cls) {
  AttachTrial& t = trials_[cls];
  if (t.chosen >= 0) return t.chosen == 1;
  if (t.done < 2 * (kTrials + 1)) return t.done % 2 == 0;  // attached, staged, attached, ... (the first two warm up)
  // Every member published its best trial of each in this call's Desc (the same calls on every member,
  // so the same count of trials): the sums over the members decide, alike on every rank.
  uint64_t attached = 0, staged = 0;
  for (int p = 0; p < k_; ++p) {
    attached += desc(p).trial_ns[0];
    staged += desc(p).trial_ns[1];
  }
  t.chosen = attached <= staged ? 1 : 0;
  return t.chosen == 1;
}

bool Group::attach_inputs() {
  for (int p = 0; p < k_; ++p)
    if (!desc(p).staged && desc(p).in_off < 0 && desc(p).in_bytes >= opts_.nontemporal_bytes) return false;
  return cma_agreed();
}

void Group::read_input(int p, size_t offset, char* dst, size_t n, bool nt) {
  const Desc& d = desc(p);
  if (n == 0) return;
  if (d.staged || d.in_off >= 0) return copy_bytes(dst, source(p, pre_slot_) + offset, n, nt);
  if (!cma_move(slot(p).pid.load(std::memory_order_acquire), false, dst, d.in_addr + offset, n))
    fail(std::string(op_name_) + ": reading rank " + std::to_string(ranks_[p]) +
         "'s input by cross-memory attach failed: " + std::strerror(errno));
}

}  // namespace gt
