// A Group's shared control segment, as group.cpp, allreduce.cpp and liveness.cpp read it.
// One Slot per member (its phase, its sleepers, its pid, its descriptors) and the op codes of a Desc.
#pragma once
#include <atomic>
#include <cstdint>

#include "group.h"

namespace gt {

enum OpCode : uint32_t { kBarrier = 1, kBroadcast, kAllGather, kReduceScatter, kAllReduce, kAllToAll };

struct Group::Slot {
  std::atomic<uint32_t> phase;
  std::atomic<uint32_t> waiters;
  std::atomic<int32_t> pid;
  uint32_t pad[13];
  Desc desc[2];
};

}  // namespace gt
