// Posted small collectives: a sender copies its message into its own slot, numbers it and goes on.
//
// Each member p owns kPostSlots slots in the group's segment and two kinds of words:
//   post word of p          - how many messages p has posted (a slot is written before the number moves);
//   acknowledgement (p, q)  - how many of p's messages member q has read.
// Every member counts every member's posts alike (posts_), so a reader knows which number to wait
// for, and a poster waits only to reuse a slot that some reader has not acknowledged yet: a root
// of a small broadcast returns once its message is written (as Open MPI's eager fragments do),
// up to kPostSlots calls ahead of its slowest reader. Each message carries its sender's Desc with
// the number of collectives it started in the group (`call`), so a reader raises on a message
// from another collective (other roots, sizes, ops) or one left behind by an earlier mismatch.
// Large broadcasts keep the phased path (direct reads of the root's arena, or staged rounds).
#include <algorithm>
#include <cstring>
#include <string>

#include "group.h"
#include "group_segment.h"
#include "reduce.h"
#include "wait.h"

namespace gt {

namespace {

constexpr uint32_t kPostSlots = 4;
constexpr size_t kPostHeader = 128;           // the sender's Desc, padded to two cache lines
constexpr size_t kPostBytes = size_t(16) << 10;  // the largest message that is posted
constexpr size_t kSlotBytes = kPostHeader + kPostBytes;
constexpr size_t kWordBytes = 64;             // one word per cache line: no false sharing
static_assert(sizeof(Desc) <= kPostHeader, "a Desc must fit a post's header");

}  // namespace

struct Group::PostWord {
  std::atomic<uint32_t> value;
  std::atomic<uint32_t> waiters;
};

size_t posts_bytes(int k) {
  size_t words = size_t(k) * kWordBytes + size_t(k) * size_t(k) * kWordBytes;
  return words + size_t(k) * kPostSlots * kSlotBytes;
}

Group::PostWord& Group::post_word(int p) const {
  return *reinterpret_cast<PostWord*>(segment_->data() + post_offset_ + size_t(p) * kWordBytes);
}

Group::PostWord& Group::ack_word(int p, int q) const {
  size_t at = post_offset_ + size_t(k_) * kWordBytes + (size_t(p) * size_t(k_) + size_t(q)) * kWordBytes;
  return *reinterpret_cast<PostWord*>(segment_->data() + at);
}

char* Group::post_slot(int p, uint32_t seq) const {
  size_t words = size_t(k_) * kWordBytes * (1 + size_t(k_));
  size_t index = size_t(p) * kPostSlots + seq % kPostSlots;
  return segment_->data() + post_offset_ + words + index * kSlotBytes;
}

void Group::post(Desc d, const void* data, size_t nbytes) {
  uint32_t seq = ++posts_[me_];
  uint32_t reused = seq - kPostSlots;  // the post that last used this slot: every reader must be past it
  for (int q = 0; q < k_; ++q) {
    if (q == me_) continue;
    PostWord& ack = ack_word(me_, q);
    if (int32_t(ack.value.load(std::memory_order_acquire) - reused) < 0)
      wait_on(q, ack.value, ack.waiters, reused, false);
  }
  char* slot = post_slot(me_, seq);
  d.call = calls_;
  std::memcpy(slot, &d, sizeof(Desc));
  if (nbytes) std::memcpy(slot + kPostHeader, data, nbytes);
  PostWord& w = post_word(me_);
  w.value.store(seq, std::memory_order_seq_cst);
  if (w.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&w.value);
}

const char* Group::await_post(int p, const Desc& mine) {
  uint32_t seq = ++posts_[p];
  PostWord& w = post_word(p);
  if (int32_t(w.value.load(std::memory_order_acquire) - seq) < 0) wait_on(p, w.value, w.waiters, seq, false);
  const char* slot = post_slot(p, seq);
  Desc theirs;
  std::memcpy(&theirs, slot, sizeof(Desc));
  bool same = theirs.op == mine.op && theirs.root == mine.root && theirs.out_bytes == mine.out_bytes &&
              theirs.dtype == mine.dtype && theirs.redop == mine.redop && theirs.call == calls_;
  if (same) return slot + kPostHeader;
  ack_post(p);  // read: the poster may reuse the slot
  std::string text = std::string(op_name_) + " on ranks " + ranks_text(all_members()) +
                     ": the ranks called different collectives, or with different roots or sizes; rank " +
                     std::to_string(ranks_[p]) + " posted " + describe_call(theirs, ranks_) + " as its call " +
                     std::to_string(theirs.call) + " in the group, rank " + std::to_string(ranks_[me_]) +
                     " expected " + describe_call(mine, ranks_) + " as call " + std::to_string(calls_) +
                     "\n" + collective_hint();
  throw CollectiveError(text);
}

void Group::ack_post(int p) {
  PostWord& ack = ack_word(p, me_);
  ack.value.store(posts_[p], std::memory_order_seq_cst);
  if (ack.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&ack.value);
}

bool Group::broadcast_now(size_t nbytes, int root) const {
  if (nbytes > kPostBytes || root < 0 || root >= k_ || worker_) return false;
  if (me_ != root)
    return int32_t(post_word(root).value.load(std::memory_order_acquire) - (posts_[root] + 1)) >= 0;
  uint32_t reused = posts_[me_] + 1 - kPostSlots;
  for (int q = 0; q < k_; ++q)
    if (q != me_ && int32_t(ack_word(me_, q).value.load(std::memory_order_acquire) - reused) < 0) return false;
  return true;
}

void Group::broadcast(void* buf, size_t nbytes, int root) {
  if (root < 0 || root >= k_) throw std::invalid_argument("broadcast root is not a member of the group");
  if (nbytes <= kPostBytes)
    broadcast_posted(buf, nbytes, root);
  else
    broadcast_phased(buf, nbytes, root);
}

void Group::broadcast_posted(void* buf, size_t nbytes, int root) {
  start(kBroadcast);
  Desc d{};
  d.op = kBroadcast;
  d.root = root;
  d.in_bytes = nbytes;  // as the root posts it: every reader compares its own call with the root's
  d.out_bytes = nbytes;
  d.in_off = -1;
  if (me_ == root) {
    post(d, buf, nbytes);
    return;
  }
  const char* payload = await_post(root, d);
  std::memcpy(buf, payload, nbytes);
  ack_post(root);
}

void Group::broadcast_phased(void* buf, size_t nbytes, int root) {
  Desc d{};
  d.root = root;
  d.in_bytes = me_ == root ? nbytes : 0;  // only the root contributes; the others only receive
  d.out_bytes = nbytes;
  d.in_off = me_ == root ? own_offset(buf, nbytes) : -1;
  bool pre = me_ == root && prestaged(d.in_off, nbytes);
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

}  // namespace gt
