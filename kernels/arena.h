// A per-rank heap in one sparse shared-memory file that every peer on the node maps once.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gt {

// Owner side: carves blocks out of its file (after the first page, which holds the rank's
// RankStatus). Peers map the same file read-write and reach
// a block by its offset, so a tensor stored here is read by peers without a staging copy.
class Arena {
 public:
  Arena(const std::string& name, size_t reserve_bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Offset of a block of at least `nbytes` (page aligned); throws ShmExhausted when
  // /dev/shm cannot hold it. Pages are committed with fallocate, so no SIGBUS later.
  // *zeroed (when given) says whether the block's pages are known to read as zeros
  // (never handed out before, or given back to the system since).
  int64_t alloc(size_t nbytes, bool* zeroed = nullptr);
  void free(int64_t offset);
  // The size of the block handed out at `offset` (0 when none is).
  size_t size_of(int64_t offset) const;
  // Give the pages of every free block back to the system.
  void release_cached();
  // Offset of [ptr, ptr + nbytes) inside this arena, or -1.
  int64_t offset_of(const void* ptr, size_t nbytes) const;
  void unlink();

  char* base() const { return base_; }
  int fd() const { return fd_; }
  size_t reserve() const { return reserve_; }
  size_t used_bytes() const;
  size_t cached_bytes() const;
  size_t peak_bytes() const { return peak_.load(); }
  void reset_peak() { peak_.store(allocated_.load()); }
  bool contains(const void* ptr) const {
    auto p = static_cast<const char*>(ptr);
    return p >= base_ && p < base_ + reserve_;
  }

 private:
  // committed: every page has backing store; zero: every page is known to read as zeros
  // (never handed out, or punched since). A merge keeps a flag only when both halves had it.
  struct Block { size_t size; bool committed; bool zero; };
  void insert_free(size_t off, Block b);
  std::string name_;
  int fd_ = -1;
  char* base_ = nullptr;
  size_t reserve_ = 0;
  std::atomic<size_t> top_{0};  // everything at or above top_ was never handed out
  std::atomic<size_t> allocated_{0}, peak_{0};
  mutable std::mutex mu_;
  std::map<size_t, Block> free_;               // offset -> free block
  std::unordered_map<size_t, size_t> used_;    // offset -> size
  bool unlinked_ = false;
};

// A read-write mapping of a peer's arena (or of any named segment).
class Mapping {
 public:
  Mapping(const std::string& name, size_t bytes, bool create);
  // An open file by path (a peer's unlinked arena: /proc/<pid>/fd/<fd>), mapped whole.
  explicit Mapping(const std::string& path);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }
  void unlink();

 private:
  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  bool unlinked_ = false;
};

}  // namespace gt
