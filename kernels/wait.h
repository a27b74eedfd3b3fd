// Waiting on a 32-bit counter in shared memory: spin, then yield, then futex sleep.
#pragma once
#include <atomic>
#include <cstdint>

namespace gt {

double now_seconds();
void cpu_relax();
// Sleep while *word == expected, at most `seconds` (cross-process futex).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, double seconds);
void futex_wake_all(std::atomic<uint32_t>* word);
// True when the process exists and is not a zombie.
bool process_alive(int pid);

}  // namespace gt
