// Futex and liveness helpers for the shared-memory collectives.
#include "wait.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gt {

double now_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void cpu_relax() {
  // No PAUSE: under KVM a PAUSE loop longer than a few thousand cycles traps to the
  // hypervisor (pause-loop exiting), which deschedules the vCPU and adds ~100 us to a
  // wait measured here. A plain reload loop keeps the vCPU running.
  asm volatile("" ::: "memory");
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, double seconds) {
  timespec ts;
  ts.tv_sec = time_t(seconds);
  ts.tv_nsec = long((seconds - double(ts.tv_sec)) * 1e9);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool process_alive(int pid) {
  if (pid <= 0) return true;  // not joined yet: nothing to check
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return true;  // another pid namespace: trust kill()
  char buf[256];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close_paren = nullptr;
  for (const char* p = buf; *p; ++p)
    if (*p == ')') close_paren = p;
  if (!close_paren || close_paren[1] == 0) return true;
  char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

}  // namespace gt
