// A Group's shared control segment, as group.cpp, allreduce.cpp and liveness.cpp read it.
// One Slot per member (its phase, its sleepers, its pid, its descriptors) and the op codes of a Desc.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "group.h"

namespace gt {

enum OpCode : uint32_t { kBarrier = 1, kBroadcast, kAllGather, kReduceScatter, kAllReduce, kAllToAll };

struct Group::Slot {
  std::atomic<uint32_t> phase;
  std::atomic<uint32_t> waiters;
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> awaiting;  // the call (low bits) in which this member awaits a post, 0 none
  uint32_t pad[12];
  Desc desc[2];
};

// n zeroed entries (one per member, or one more): on the stack up to 17, on the heap beyond, so a
// small call's path allocates nothing.
template <typename T>
class Scratch {
 public:
  explicit Scratch(size_t n) : heap_(n > kInline ? n : 0), p_(n > kInline ? heap_.data() : inline_) {
    for (size_t i = 0; i < n; ++i) p_[i] = T();
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T& operator[](size_t i) { return p_[i]; }
  T* data() { return p_; }

 private:
  static constexpr size_t kInline = 17;
  T inline_[kInline];
  std::vector<T> heap_;
  T* p_;
};

// "broadcast(8 bytes in, 8 bytes out, root rank 1)": one rank's call, for the errors that compare them.
std::string describe_call(const Desc& d, const std::vector<int>& ranks);

// The bytes of a group's post words, acknowledgement words and post slots (broadcast.cpp), k members.
size_t posts_bytes(int k);

// The bytes before entry n of a row of byte counts (an all_to_all's send or receive row): where piece n starts.
inline size_t prefix_bytes(const uint64_t* row, int n) {
  size_t s = 0;
  for (int j = 0; j < n; ++j) s += row[j];
  return s;
}

// Balanced split of `count` elements over k parts, boundaries on multiples of `align`: part i.
void split_range(size_t count, int k, int i, size_t align, size_t* lo, size_t* hi);

}  // namespace gt
