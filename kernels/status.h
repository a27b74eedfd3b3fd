// What a rank is doing, kept in the first page of its arena for its peers on the node.
// Peers read it to tell a rank that finished its script, or a cycle of ranks waiting for each
// other, from a slow one.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

namespace gt {

struct RankStatus {
  std::atomic<uint64_t> epoch;        // moves each time the program's thread starts or stops a wait
  std::atomic<int32_t> waiting_for;   // the global rank the program's thread waits for, or -1
  std::atomic<int32_t> finished;      // 1 once the script has ended (see `how`)
  std::atomic<uint64_t> group_key;    // the group of that wait (Group::key) ...
  std::atomic<uint32_t> target;       // ... and the phase (or, with posts set, the post) it waits for there
  std::atomic<int32_t> threads;       // 1: one program thread waits in collectives; 2: several
  std::atomic<uint64_t> failed_epoch; // nonzero: gave up its last wait, until its epoch moves on
  std::atomic<int32_t> pid;
  std::atomic<int32_t> posts;         // 1: that wait is for a post of waiting_for's (broadcast.cpp), 0: a phase
  char doing[120];                    // "all_gather on ranks [0, 1]" while waiting
  char how[128];                      // "finished the script", "raised ValueError: ..."
  char failure[256];                  // why it gave up (with failed_epoch)
};
static_assert(sizeof(RankStatus) <= 4096, "the status must fit the arena's first page");

inline void copy_text(char* dst, size_t cap, const std::string& text) {
  size_t n = std::min(cap - 1, text.size());
  std::memcpy(dst, text.data(), n);
  dst[n] = '\0';
}

// Read a text field that its owner may be rewriting: best effort, always terminated.
inline std::string read_text(const char* src, size_t cap) {
  char buf[256];
  size_t n = std::min(cap, sizeof(buf) - 1);
  std::memcpy(buf, src, n);
  buf[n] = '\0';
  return std::string(buf);
}

// The hint every "the ranks did not meet" error ends with.
inline const char* collective_hint() {
  return "Every rank of a placement must make the same collective calls in the same order: print(x), "
         "x.numpy(), x.item() and x.tolist() of a global tensor are collectives too (to print on one rank, "
         "call value = x.numpy() on every rank, then print(value) on that one).";
}

}  // namespace gt
