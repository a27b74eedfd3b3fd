// all_reduce of a Group: five algorithms, picked alike on every rank from the published descriptors.
//
//   in arenas     every input and output lies in a shared-memory arena: each rank reduces its
//                 range of every input straight into every output (zero copy, one phase more);
//   cross-memory  large, some buffer private, process_vm_readv allowed: cma.cpp;
//   one shot      small messages: every rank sums all the staged inputs into its own output;
//   whole chunks  a few ranks, large private inputs: chunk by chunk, each rank sums every
//                 member's staged chunk into its output;
//   shared chunks more ranks: each rank sums its share of the chunk, then copies every share out.
// The protocol all collectives share (descriptors, phases, staging slots) is group.cpp's.
#include <algorithm>
#include <cstring>
#include <vector>

#include "group.h"
#include "group_segment.h"
#include "reduce.h"
#include "wait.h"

namespace gt {

namespace {

// Up to this many ranks, a staged all_reduce has every rank sum the whole chunk (k reads of it)
// rather than its share and then copy the others' shares out (two phases per chunk).
constexpr int kWholeChunkRanks = 4;

}  // namespace

void split_range(size_t count, int k, int i, size_t align, size_t* lo, size_t* hi) {
  size_t units = (count + align - 1) / align, per = units / size_t(k), rem = units % size_t(k);
  size_t start = size_t(i) * per + std::min(size_t(i), rem);
  size_t end = start + per + (size_t(i) < rem ? 1 : 0);
  *lo = std::min(count, start * align);
  *hi = std::min(count, end * align);
}

std::shared_ptr<Work> Group::all_reduce_async(const void* in, void* out, size_t count, int32_t dtype,
                                              int32_t redop) {
  if (!worker_) worker_ = std::make_unique<Worker>();
  return worker_->submit([=] { all_reduce(in, out, count, dtype, redop); });
}

std::shared_ptr<Work> Group::all_gather_async(const void* in, size_t in_bytes, void* out, size_t out_bytes) {
  if (!worker_) worker_ = std::make_unique<Worker>();
  return worker_->submit([=] { all_gather(in, in_bytes, out, out_bytes); });
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
  std::memcpy(d.trial_ns, trials_[trial_class(nbytes)].ns, sizeof(d.trial_ns));
  d.in_off = own_offset(in, nbytes);
  d.out_off = own_offset(out, nbytes);
  d.in_addr = reinterpret_cast<uintptr_t>(in);
  d.out_addr = reinterpret_cast<uintptr_t>(out);
  bool mine_zero_copy = d.in_off >= 0 && d.out_off >= 0;
  bool small = nbytes <= opts_.oneshot_bytes;  // one-shot reads staging only, so in == out is safe
  // Tiny arena buffers are staged too, so one phase ends the op instead of the in-arena
  // reduction's two (when every member staged: the choice below reads the descriptors).
  bool tiny = nbytes <= opts_.stage_arena_bytes;
  begin(kAllReduce, d, small && (!mine_zero_copy || tiny) ? in : nullptr, nbytes);
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).dtype == dtype && desc(p).redop == redop, "the ranks passed different dtypes or ops");
    check_all(desc(p).in_bytes == nbytes, "the ranks passed buffers of different sizes");
  }
  bool zero_copy = true, all_staged = true;
  for (int p = 0; p < k_; ++p) {
    zero_copy = zero_copy && desc(p).in_off >= 0 && desc(p).out_off >= 0;
    all_staged = all_staged && desc(p).staged;
  }
  if (zero_copy && nbytes > 0 && !all_staged)  // from the descriptors: alike on every rank
    all_reduce_in_arenas(count, dtype, redop, d.in_off != d.out_off);
  else if (small)
    all_reduce_one_shot(in, out, count, dtype, redop, all_staged);
  else
    all_reduce_private(in, out, count, dtype, redop);
}

void Group::all_reduce_private(const void* in, void* out, size_t count, int32_t dtype, int32_t redop) {
  int cls = trial_class(count * dtype_size(dtype));
  bool attach = cma_agreed() && attach_all_reduce(cls);
  AttachTrial& t = trials_[cls];
  bool trial = t.chosen < 0 && cma_state_ == 1;  // timed, for the choice every member makes alike
  double t0 = trial ? now_seconds() : 0;
  if (attach)
    all_reduce_cma(in, out, count, dtype, redop);
  else if (k_ <= kWholeChunkRanks)
    all_reduce_whole_chunks(in, out, count, dtype, redop);
  else
    all_reduce_shared_chunks(in, out, count, dtype, redop);
  if (trial) {
    uint64_t ns = uint64_t((now_seconds() - t0) * 1e9);
    uint64_t& best = t.ns[attach ? 0 : 1];
    if (t.done >= 2 && (best == 0 || ns < best)) best = ns;  // the first of each warms up
    ++t.done;
  }
}

void Group::all_reduce_in_arenas(size_t count, int32_t dtype, int32_t redop, bool out_of_place) {
  size_t esz = dtype_size(dtype), lo, hi;
  split_range(count, k_, me_, 4096 / esz, &lo, &hi);
  std::vector<const void*> srcs(k_);
  std::vector<void*> dsts(k_);
  for (int p = 0; p < k_; ++p) {
    srcs[p] = bases_[p] + desc(p).in_off + lo * esz;
    dsts[p] = bases_[p] + desc(p).out_off + lo * esz;
  }
  // streaming stores only out of place: in place, the buffer just read is the one written
  bool nt = count * esz >= opts_.nontemporal_bytes && out_of_place;
  reduce_to(dsts.data(), k_, srcs.data(), k_, hi - lo, dtype, redop, nt);
  sync();
}

void Group::all_reduce_one_shot(const void* in, void* out, size_t count, int32_t dtype, int32_t redop,
                                bool all_staged) {
  if (!all_staged) {  // a rank in shared memory met ranks that are not: it stages late
    if (!desc(me_).staged) copy_bytes(stage(me_, pre_slot_), in, count * dtype_size(dtype), false);
    sync();
  }
  Scratch<const void*> srcs(k_);  // the small call's path allocates nothing
  for (int p = 0; p < k_; ++p) srcs[p] = stage(p, pre_slot_);
  reduce_to(&out, 1, srcs.data(), k_, count, dtype, redop, false);
}

void Group::all_reduce_whole_chunks(const void* in, void* out, size_t count, int32_t dtype, int32_t redop) {
  // Few ranks: each sums every member's staged chunk straight into its output. One phase per
  // chunk and no copy-out pass; the reads of chunk c end before this rank reaches the phase
  // of c + 1, after which slot c's parity is written again (at c + 2).
  size_t esz = dtype_size(dtype), chunk = opts_.stage_bytes / esz;
  bool nt = count * esz >= opts_.nontemporal_bytes && in != out;  // in place: the copy-out is read next
  std::vector<const void*> srcs(k_);
  for (size_t c0 = 0; c0 < count; c0 += chunk) {
    uint64_t s = stage_seq_++;
    size_t n = std::min(chunk, count - c0);
    copy_bytes(stage(me_, s), static_cast<const char*>(in) + c0 * esz, n * esz, false);
    sync();
    for (int p = 0; p < k_; ++p) srcs[p] = stage(p, s);
    void* dst = static_cast<char*>(out) + c0 * esz;
    reduce_to(&dst, 1, srcs.data(), k_, n, dtype, redop, nt);
  }
}

void Group::all_reduce_shared_chunks(const void* in, void* out, size_t count, int32_t dtype, int32_t redop) {
  // More ranks: each sums its share of the chunk into the second half of its slot, then every
  // rank copies all the shares out (two phases per chunk, each input read once).
  size_t esz = dtype_size(dtype), chunk = opts_.stage_bytes / esz;
  bool nt = count * esz >= opts_.nontemporal_bytes && in != out;  // in place: the copy-out is read next
  std::vector<const void*> srcs(k_);
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

}  // namespace gt
