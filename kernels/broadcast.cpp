// Broadcasts: a small one posted into a numbered slot of the root's (the root goes on), others at phases.
//
// Each member p owns kPostSlots slots in the group's segment and two kinds of words:
//   post word of p          - how many messages p has posted (a slot is written before the number moves);
//   acknowledgement (p, q)  - how many of p's messages member q has read.
// Every member counts every member's posts alike (posts_), so a reader knows which number to wait
// for, and a root waits only to reuse a slot that some reader has not acknowledged yet: it returns
// once its message is written (as Open MPI's eager fragments do), up to kPostSlots calls ahead of
// its slowest reader. Each message carries its root's Desc with the number of collectives it has
// started in the group (`call`), so a reader raises on a message from another call (other roots,
// sizes) at once. Ranks that disagree without a reader seeing it (two ranks naming themselves root,
// a root posting while a member calls a phased collective) are caught by the checks of every wait
// (check_posts, the `awaiting` word) within 0.2 s, or by the next phased collective's descriptors
// (the call count and a digest of every member's posts). Larger broadcasts, and send/recv (a
// rendezvous: crossed sends raise at once), meet at phases (group.cpp).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "group.h"
#include "group_segment.h"
#include "reduce.h"
#include "wait.h"

namespace gt {

namespace {

constexpr uint32_t kPostSlots = 64;
constexpr size_t kPostHeader = 128;              // the root's Desc, padded to two cache lines
constexpr size_t kPostBytes = size_t(16) << 10;  // the largest message that is posted
constexpr size_t kShareBytes = size_t(64) << 10;  // from this size every member shares a broadcast's copies
constexpr size_t kSlotBytes = kPostHeader + kPostBytes;
constexpr size_t kWordBytes = 64;                // one word per cache line: no false sharing
static_assert(sizeof(Desc) <= kPostHeader, "a Desc must fit a post's header");

// What posts_digest_ adds for one post of member p: the sums differ when members' counts do.
uint64_t post_mark(int p) { return 0x9E3779B97F4A7C15ull * (2 * uint64_t(p) + 1); }

// Map a member's whole ring of slots into this process at its first post (its root writing, a reader
// reading): else each of the first kPostSlots calls faulted its slot's pages in, 10 us a 16 KiB call
// against 1-2.5 us once mapped (again after 2^32 posts, harmlessly). Best effort (MADV_POPULATE_*:
// Linux 5.14); else a word a page is touched, by a locked add of 0 where it must be written (the
// value stays whatever a peer reads there).
void populate(char* ring, size_t len, bool write) {
#ifdef MADV_POPULATE_WRITE
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  uintptr_t lo = reinterpret_cast<uintptr_t>(ring) / page * page;
  if (madvise(reinterpret_cast<void*>(lo), reinterpret_cast<uintptr_t>(ring) + len - lo,
              write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
    return;
#endif
  for (size_t at = 0; at < len; at += 4096) {  // ring is 64-byte aligned: so is every word touched
    if (write) __atomic_fetch_add(reinterpret_cast<uint64_t*>(ring + at), uint64_t(0), __ATOMIC_RELAXED);
    else (void)*static_cast<volatile char*>(ring + at);
  }
}

}  // namespace

struct Group::PostWord {
  std::atomic<uint32_t> value;
  std::atomic<uint32_t> waiters;
};

uint32_t Group::my_posts() const { return post_word(me_).value.load(std::memory_order_acquire); }

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

bool Group::posted(int p, uint32_t seq) const {
  return int32_t(post_word(p).value.load(std::memory_order_acquire) - seq) >= 0;
}

bool Group::acknowledged(int q, uint32_t seq) const {
  return int32_t(ack_word(me_, q).value.load(std::memory_order_acquire) - seq) >= 0;
}

void Group::post(const void* data, size_t nbytes, int root) {
  uint32_t seq = posts_[me_] + 1;
  if (seq == 1) populate(post_slot(me_, 0), kPostSlots * kSlotBytes, true);
  uint32_t reused = seq - kPostSlots;  // the post that last used this slot: every reader must be past it
  for (int q = 0; q < k_; ++q) {
    PostWord& ack = ack_word(me_, q);
    if (q != me_ && !acknowledged(q, reused)) wait_on(q, ack.value, ack.waiters, reused, Word::ack);
  }
  Desc d{};
  d.op = kBroadcast;
  d.root = root;
  d.in_bytes = d.out_bytes = nbytes;
  d.in_off = -1;
  d.call = calls_;
  char* slot = post_slot(me_, seq);
  std::memcpy(slot, &d, sizeof(Desc));
  copy_bytes(slot + kPostHeader, data, nbytes, false);
  posts_[me_] = seq;
  posts_digest_ += post_mark(me_);
  PostWord& w = post_word(me_);
  w.value.store(seq, std::memory_order_seq_cst);
  if (w.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&w.value);
}

const char* Group::await_post(int p, size_t nbytes) {
  uint32_t seq = ++posts_[p];
  if (seq == 1) populate(post_slot(p, 0), kPostSlots * kSlotBytes, false);
  posts_digest_ += post_mark(p);
  PostWord& w = post_word(p);
  if (!posted(p, seq)) {
    Slot& mine = slot(me_);  // peers awaiting a post from this rank in this same call learn it will not come
    mine.awaiting.store(uint32_t(calls_ & 0x7fffffffu) | 0x80000000u, std::memory_order_seq_cst);
    struct Clear { std::atomic<uint32_t>& a; ~Clear() { a.store(0, std::memory_order_release); } } clear{mine.awaiting};
    wait_on(p, w.value, w.waiters, seq, Word::post);
  }
  const char* slot = post_slot(p, seq);
  Desc theirs;
  std::memcpy(&theirs, slot, sizeof(Desc));
  if (theirs.op == kBroadcast && theirs.root == p && theirs.out_bytes == nbytes && theirs.call == calls_)
    return slot + kPostHeader;
  ack_post(p);  // read: the root may reuse the slot
  Desc mine{};
  mine.op = kBroadcast;
  mine.root = p;
  mine.in_bytes = mine.out_bytes = nbytes;
  fail(std::string(op_name_) + " on ranks " + ranks_text(all_members()) +
       ": the ranks called different collectives, or broadcasts with different roots or sizes; rank " +
       std::to_string(ranks_[p]) + " posted " + describe_call(theirs, ranks_) + " as its call " +
       std::to_string(theirs.call) + " in the group, rank " + std::to_string(ranks_[me_]) + " expected " +
       describe_call(mine, ranks_) + " as call " + std::to_string(calls_) + "\n" + collective_hint());
}

void Group::ack_post(int p) {
  PostWord& ack = ack_word(p, me_);
  ack.value.store(posts_[p], std::memory_order_seq_cst);
  if (ack.waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&ack.value);
}

void Group::check_posts(int awaited, const std::atomic<uint32_t>& word, uint32_t target) {
  for (int q = 0; q < k_; ++q) {
    uint32_t read = posts_[q] - (q == awaited ? 1u : 0u);
    if (q == me_ || int32_t(post_word(q).value.load(std::memory_order_seq_cst) - read) <= 0) continue;
    // a post made after this rank's wait ended (the waited-for word, written first, now reached) is legitimate
    if (int32_t(word.load(std::memory_order_seq_cst) - target) >= 0) return;
    fail(std::string(op_name_) + " on ranks " + ranks_text(all_members()) + ": rank " + std::to_string(ranks_[q]) +
         " broadcast from itself (a small broadcast: it posted its message and went on) where rank " +
         std::to_string(ranks_[me_]) + " called " + op_name_ +
         (awaited >= 0 ? " with root rank " + std::to_string(ranks_[awaited]) : std::string()) +
         ": the ranks called different collectives, or named different roots\n" + collective_hint());
  }
}

bool Group::broadcast_now(size_t nbytes, int root) const {
  if (nbytes > kPostBytes || root < 0 || root >= k_ || worker_) return false;
  if (me_ != root) return posted(root, posts_[root] + 1);
  for (int q = 0; q < k_; ++q)
    if (q != me_ && !acknowledged(q, posts_[me_] + 1 - kPostSlots)) return false;
  return true;
}

void Group::broadcast(void* buf, size_t nbytes, int root) {
  if (root < 0 || root >= k_) throw std::invalid_argument("broadcast root is not a member of the group");
  if (nbytes > kPostBytes) return broadcast_phased(buf, nbytes, root);
  start(kBroadcast);
  if (me_ == root) return post(buf, nbytes, root);
  const char* payload = await_post(root, nbytes);
  copy_bytes(buf, payload, nbytes, false);
  ack_post(root);
}

void Group::transfer(void* buf, size_t nbytes, int root) {
  if (root < 0 || root >= k_) throw std::invalid_argument("broadcast root is not a member of the group");
  broadcast_phased(buf, nbytes, root);
}

void Group::broadcast_phased(void* buf, size_t nbytes, int root) {
  Desc d{};
  d.root = root;
  d.in_bytes = me_ == root ? nbytes : 0;  // only the root contributes; the others only receive
  d.out_bytes = nbytes;
  d.in_off = me_ == root ? own_offset(buf, nbytes) : -1;
  d.out_off = own_offset(buf, nbytes);
  bool pre = me_ == root && prestaged(d.in_off, nbytes);
  begin(kBroadcast, d, pre ? buf : nullptr, nbytes);
  for (int p = 0; p < k_; ++p) {
    check_all(desc(p).root == root, "the ranks named different roots");
    check_all(desc(p).out_bytes == nbytes, "the ranks passed buffers of different sizes");
  }
  char* out = static_cast<char*>(buf);
  bool nt = nbytes >= opts_.nontemporal_bytes;
  if (all_direct()) {  // no attach for a private root: the root would idle while its readers copy (RESULTS.md s11)
    if (nbytes >= kShareBytes && any_arena_source() && all_outputs_shared()) {
      // every member, the root too, copies its share of the message into every reader's output (the
      // copies on k CPUs instead of k - 1, the message read once): 2 ranks, 16 MiB 1.12 -> 0.77 ms
      size_t lo, hi;
      split_range(nbytes, k_, me_, 4096, &lo, &hi);
      for (int j = 1; j <= k_; ++j) {
        int q = (me_ + j) % k_;
        if (q != root) copy_bytes(output_of(q, buf) + lo, source(root, pre_slot_) + lo, hi - lo, nt);
      }
      ++pushed_;
      sync();
      return;
    }
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
